"""What every engine's adapter holds beside its identity: its metric dialect, how a chat
prompt is counted, how it splits its context, how it reports its KV capacity, and the quirks the
HTTP client reads its answers with (`Quirks`, passed to the client as data)."""

from __future__ import annotations

from qualify.httpclient.chat import Quirks
from qualify.serving.dialects import VLLM, Dialect
from qualify.serving.identity import Identity


class EngineAdapter(Identity):
    """One engine: its identity (`Identity`), its `/metrics` names and its request quirks.

    `sizing`: how a chat prompt is counted (`tokenize` posts the messages to /tokenize;
    `apply-template+tokenize` renders them with /apply-template, then tokenizes the text).
    `context_per_slot`: the server splits its context over slots (a request gets total / slots).
    `kv_report`: how the server reports its KV capacity: "slots" (slots x per-slot context),
    "startup-log" (a line of its log; the gauge is a usage fraction), "pool-gauge" (a gauge of
    the pool's tokens); `kv_log` the log lines read, `kv_note` what the figures mean.
    """

    metrics: Dialect = VLLM
    quirks: Quirks = Quirks(reasoning_fields=("reasoning_content",))
    sizing = "tokenize"
    context_per_slot = False
    kv_report = "startup-log"
    kv_log: tuple[tuple[str, str], ...] = ()
    kv_note = ""
