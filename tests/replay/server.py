"""A loopback HTTP server that answers like vLLM or SGLang, from their recorded outputs.

Endpoints, per engine (see docs/engines.md for the recordings behind each):
- both: GET /health, GET /v1/models, GET /metrics, POST /tokenize (SGLang also /v1/tokenize),
  POST /v1/chat/completions (streamed or not), POST /v1/responses (streamed or not);
- vLLM: GET /version, and GET /server_info with `dev_mode` (VLLM_SERVER_DEV_MODE=1; 404
  otherwise, as recorded); SGLang: GET /server_info, /get_server_info, /model_info,
  /get_model_info.

Deterministic rules (the replay is not a model):
- one token per whitespace-separated word. A prompt's tokens are the words of every text part of
  every message plus 4 per message (the chat template's framing); /tokenize counts the same way,
  so a client that sizes prompts through /tokenize lands where the server's length check does;
- the answer comes from `Profile.answer(request)` (default: a short fixed reasoning and content);
  one SSE chunk per word, `chunk_interval_s` apart, the first after `first_chunk_delay_s`;
- a prompt over the window gets the engine's 400: vLLM 0.26 (recorded) when prompt + max_tokens
  > max_model_len, on chat and Responses alike, naming "at least" the prompt size that fills
  the window, and max_tokens > max_model_len apart; SGLang when prompt >= max_model_len, and
  prompt + max_tokens > max_model_len apart;
- vLLM's latency histograms (`_sum`/`_count` of queue, prefill, TTFT, decode, generation
  tokens, inter-token latency) move when a request finishes, by the times the replay actually
  sent its first and last token (queue 0); their buckets stay at their recorded values;
- counters move when a request finishes, before its last chunk is written, so a scrape taken
  after the response is read always sees them; gauges show in-flight work and read 0 when idle;
- speculative decoding (Profile.spec): each verify step emits 1 + the accepted drafts; with G
  generated tokens and per-position acceptance p_i there are ceil(G / (1 + sum p)) steps, and
  position i is accepted round(steps * p_i) times. vLLM adds these to its spec counters; SGLang
  sets its per-batch gauges (accept length 1 + sum p, accept rate sum p / k) and counts verify
  calls.
"""

from __future__ import annotations

import copy
import json
import math
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .recordings import (
    FIXTURES,
    REASONING_KEYS,
    ChatTemplates,
    MetricsPage,
    body,
    responses_templates,
)

TEMPLATE_TOKENS_PER_MESSAGE = 4


@dataclass(frozen=True)
class Answer:
    reasoning: str = "The user wants a short answer, so I will give one."
    content: str = "The answer is 4."
    tool_call: tuple[str, str] | None = None  # (function name, JSON arguments)


@dataclass(frozen=True)
class Spec:
    """Speculative decoding: k draft tokens per step, accepted at position i with fraction p[i]."""

    num_speculative_tokens: int = 2
    acceptance: tuple[float, ...] = (0.7, 0.4)
    method: str = "mtp"  # what a vLLM /server_info (dev mode) reports


def default_answer(request: dict[str, Any]) -> Answer:
    tools = request.get("tools") or []
    if tools and request.get("tool_choice") != "none":
        fn = tools[0].get("function", tools[0])
        required = (fn.get("parameters") or {}).get("required") or []
        return Answer(tool_call=(fn["name"], json.dumps({name: "Paris" for name in required})))
    return Answer()


_FACT = re.compile(r"Note: [^.\n]{1,80} is (\d{3,})\.")


def recall_answer(request: dict[str, Any]) -> Answer:
    """A model with perfect recall: names every `Note: … is N.` fact of the prompt, in order
    (the context stage's needles); otherwise the default answer."""
    text = " ".join(_text(m.get("content")) for m in request.get("messages") or [])
    facts = _FACT.findall(text)
    if not facts:
        return default_answer(request)
    return Answer(
        reasoning="The document states the numbers; I list them.",
        content="The numbers are " + " and ".join(facts) + ".",
    )


@dataclass
class Profile:
    """What one replayed server is: engine, served model, window and switches a test turns."""

    engine: str  # "vllm" | "sglang"
    served_model: str
    max_model_len: int
    version: str
    reasoning_keys: tuple[str, ...]
    spec: Spec | None = None
    reasoning_split: bool = True  # False: no --reasoning-parser, thinking arrives inside content
    tool_parser: bool = True
    answer: Callable[[dict[str, Any]], Answer] = default_answer
    first_chunk_delay_s: float = 0.01
    chunk_interval_s: float = 0.002
    max_num_seqs: int = 256
    kv_capacity_tokens: int = 161721
    dev_mode: bool = False  # vLLM: VLLM_SERVER_DEV_MODE=1, so /server_info answers

    @property
    def fixtures(self) -> Path:
        return FIXTURES / self.engine


def vllm_profile(**kw: Any) -> Profile:
    """vLLM 0.26.0 as recorded on the H200: reasoning in `reasoning` only."""
    base: dict[str, Any] = dict(
        engine="vllm",
        served_model="deepseek-v4-flash",
        max_model_len=8192,
        version="0.26.0",
        reasoning_keys=("reasoning",),
    )
    return Profile(**(base | kw))


def vllm_011_profile(**kw: Any) -> Profile:
    """A vLLM 0.11-0.2x build, as recorded: both `reasoning` and `reasoning_content`."""
    return vllm_profile(**({"version": "0.11.2", "reasoning_keys": REASONING_KEYS} | kw))


def sglang_profile(**kw: Any) -> Profile:
    base: dict[str, Any] = dict(
        engine="sglang",
        served_model="deepseek-v4.1-flash",
        max_model_len=8192,
        version="0.5.23",
        reasoning_keys=("reasoning_content",),
    )
    return Profile(**(base | kw))


def count_tokens(text: str) -> int:
    return len(text.split())


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def prompt_words(messages: list[dict[str, Any]]) -> list[str]:
    words: list[str] = []
    for m in messages:
        words += ["<msg>"] * TEMPLATE_TOKENS_PER_MESSAGE + _text(m.get("content")).split()
    return words


def responses_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    items = request.get("input", "")
    msgs = (
        [{"role": "system", "content": request["instructions"]}]
        if request.get("instructions")
        else []
    )
    if isinstance(items, str):
        return [*msgs, {"role": "user", "content": items}]
    for item in items:
        text = item.get("content", item.get("output", item.get("arguments", "")))
        msgs.append({"role": item.get("role", "user"), "content": text})
    return msgs


class HttpError(Exception):
    def __init__(self, status: int, payload: Any) -> None:
        super().__init__(status)
        self.status = status
        self.payload = payload


@dataclass
class Finished:
    prompt: int
    generated: int
    reason: str
    cached: int
    arrived: float = 0.0  # when the request came in (time.monotonic)
    first: float | None = None  # when its first token went out
    last: float | None = None  # when its last token went out
    steps: int = 0  # chunks that carried its tokens


@dataclass
class Engine:
    """The engine state behind the replay: its metrics page and its in-flight requests."""

    profile: Profile
    page: MetricsPage = field(init=False)
    chat: ChatTemplates = field(init=False)
    responses: dict[str, dict[str, Any]] = field(init=False)
    lock: threading.Lock = field(default_factory=threading.Lock)
    inflight: dict[int, int] = field(default_factory=dict)
    last_prompt: list[str] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        p = self.profile
        files = [p.fixtures / "metrics.prom"] + (
            [p.fixtures / "metrics_spec.prom"] if p.spec else []
        )
        self.page = MetricsPage.load(*files, model_name=p.served_model)
        if p.spec is not None:  # one per-position series per draft token, as vLLM registers
            k = p.spec.num_speculative_tokens
            self.page.lines = [
                ln
                for ln in self.page.lines
                if isinstance(ln, str) or int(ln.labels.get("position", 0)) < k
            ]
        self.chat = ChatTemplates.load(p.fixtures)
        self.responses = responses_templates(p.fixtures)
        self._gauges()

    # ---- lengths and errors, in each engine's shape ----
    def check_length(self, prompt: int, max_tokens: int | None, route: str) -> None:
        p, n = self.profile, self.profile.max_model_len
        if p.engine == "vllm":
            # vLLM 0.26 (recorded, chat and Responses alike): max_tokens over the window, then
            # a prompt that with the output asked for does not fit, its size a lower bound.
            if max_tokens is not None and max_tokens > n:
                err = body(p.fixtures, "error_max_tokens.json")
                err["error"]["message"] = (
                    f"max_tokens={max_tokens} cannot be greater than max_model_len="
                    f"max_total_tokens={n}. Please request fewer output tokens. "
                    f"(parameter=max_tokens, value={max_tokens})"
                )
                raise HttpError(400, err)
            out = max_tokens or 1
            if prompt + out > n:
                seen = n + 1 - out
                err = body(p.fixtures, "error_overlength.json")
                err["error"]["message"] = (
                    f"This model's maximum context length is {n} tokens. However, you requested "
                    f"{out} output tokens and your prompt contains at least {seen} input tokens, "
                    f"for a total of at least {n + 1} tokens. Please reduce the length of the "
                    "input prompt or the number of requested output tokens. "
                    f"(parameter=input_tokens, value={seen})"
                )
                raise HttpError(400, err)
            return
        if prompt >= n:
            err = body(p.fixtures, "error_overlength.json")
            err["message"] = (
                f"The input ({prompt} tokens) is longer than the model's context length "
                f"({n} tokens)."
            )
            raise HttpError(400, err)
        if max_tokens is not None and prompt + max_tokens > n:
            err = body(p.fixtures, "error_overrequest.json")
            err["message"] = (
                f"Requested token count exceeds the model's maximum context length of {n} tokens. "
                f"You requested a total of {prompt + max_tokens} tokens: {prompt} tokens from the "
                f"input messages and {max_tokens} tokens for the completion. Please reduce the "
                "number of tokens in the input messages or the completion to fit within the limit."
            )
            raise HttpError(400, err)

    # ---- metrics ----
    def start(self, key: int, prompt: int) -> None:
        with self.lock:
            self.inflight[key] = prompt
            self._gauges()

    def finish(self, key: int, done: Finished) -> None:
        with self.lock:
            self.inflight.pop(key, None)
            self._count(done)
            self._gauges()

    def _gauges(self) -> None:
        p, page = self.profile, self.page
        running = min(len(self.inflight), p.max_num_seqs)
        waiting = len(self.inflight) - running
        used = sum(self.inflight.values())
        if p.engine == "vllm":
            page.set("vllm:num_requests_running", running)
            page.set("vllm:num_requests_waiting", waiting)
            page.set("vllm:kv_cache_usage_perc", used / p.kv_capacity_tokens)
        else:
            page.set("sglang:num_running_reqs", running)
            page.set("sglang:num_queue_reqs", waiting)
            page.set("sglang:num_used_tokens", used)
            page.set("sglang:token_usage", used / p.kv_capacity_tokens)
            page.set("sglang:max_total_num_tokens", p.kv_capacity_tokens)

    def _count(self, d: Finished) -> None:
        p, page = self.profile, self.page
        steps, per_pos = self._spec_steps(d.generated)
        if p.engine == "vllm":
            page.add("vllm:prompt_tokens_total", d.prompt)
            page.add("vllm:generation_tokens_total", d.generated)
            page.add("vllm:request_success_total", 1, finished_reason=d.reason)
            page.add("vllm:prefix_cache_queries_total", d.prompt)
            page.add("vllm:prefix_cache_hits_total", d.cached)
            page.add("vllm:prompt_tokens_cached_total", d.cached)
            self._histograms(d)
            if p.spec is not None:
                page.add("vllm:spec_decode_num_drafts_total", steps)
                page.add(
                    "vllm:spec_decode_num_draft_tokens_total", steps * p.spec.num_speculative_tokens
                )
                page.add("vllm:spec_decode_num_accepted_tokens_total", sum(per_pos))
                for i, n in enumerate(per_pos):
                    page.add(
                        "vllm:spec_decode_num_accepted_tokens_per_pos_total", n, position=str(i)
                    )
            return
        page.add("sglang:prompt_tokens_total", d.prompt)
        page.add("sglang:generation_tokens_total", d.generated)
        page.add("sglang:num_requests_total", 1)
        page.add("sglang:cached_tokens_total", d.cached)
        if p.spec is not None and steps:
            k = p.spec.num_speculative_tokens
            accepted = sum(per_pos) / steps
            page.set("sglang:spec_accept_length", 1 + accepted)
            page.set("sglang:spec_accept_rate", accepted / k)
            page.set("sglang:spec_num_steps", k)
            page.set("sglang:spec_num_draft_tokens", k + 1)
            page.add("sglang:spec_verify_calls_total", steps)

    def _histograms(self, d: Finished) -> None:
        """vLLM's latency histograms (`_sum`, `_count`), observed as vLLM does on a finished
        request, from the times the replay actually sent its tokens: queue 0, prefill and TTFT
        up to the first token, decode from the first token to the last."""
        if d.first is None or d.generated == 0:
            return
        last = d.last if d.last is not None else d.first
        page = self.page
        for name, value in (
            ("vllm:request_queue_time_seconds", 0.0),
            ("vllm:request_prefill_time_seconds", d.first - d.arrived),
            ("vllm:time_to_first_token_seconds", d.first - d.arrived),
            ("vllm:request_decode_time_seconds", last - d.first),
            ("vllm:request_generation_tokens", float(d.generated)),
        ):
            page.add(f"{name}_sum", value)
            page.add(f"{name}_count", 1)
        if d.steps > 1:
            page.add("vllm:inter_token_latency_seconds_sum", last - d.first)
            page.add("vllm:inter_token_latency_seconds_count", d.steps - 1)

    def _spec_steps(self, generated: int) -> tuple[int, list[int]]:
        spec = self.profile.spec
        if spec is None or generated == 0:
            return 0, []
        steps = math.ceil(generated / (1 + sum(spec.acceptance)))
        return steps, [round(steps * a) for a in spec.acceptance]

    def cached(self, words: list[str]) -> int:
        n = 0
        for a, b in zip(words, self.last_prompt, strict=False):
            if a != b:
                break
            n += 1
        self.last_prompt = words
        return n


def _words(text: str) -> list[str]:
    """Split keeping the separators, so the joined pieces give back the text exactly."""
    out: list[str] = []
    for i, w in enumerate(text.split(" ")):
        out.append(w if i == 0 else " " + w)
    return [w for w in out if w]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ReplayHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        return

    @property
    def engine(self) -> Engine:
        return self.server.engine

    def do_GET(self) -> None:
        e, p = self.engine, self.engine.profile
        path = self.path.split("?", 1)[0]
        if path == "/health":
            self._send(200, b"", "application/json")
        elif path == "/metrics":
            with e.lock:
                text = e.page.render()
            self._send(200, text.encode(), "text/plain; version=0.0.4; charset=utf-8")
        elif path == "/v1/models":
            models = body(p.fixtures, "models.json")
            card = models["data"][0] | {"id": p.served_model, "max_model_len": p.max_model_len}
            card["root"] = p.served_model if p.engine == "sglang" else f"/models/{p.served_model}"
            self._json(200, models | {"data": [card]})
        elif path == "/version" and p.engine == "vllm":
            self._json(200, {"version": p.version})
        elif path == "/server_info" and p.engine == "vllm" and p.dev_mode:
            self._json(200, self._vllm_server_info())
        elif path in ("/server_info", "/get_server_info") and p.engine == "sglang":
            self._json(200, self._server_info())
        elif path in ("/model_info", "/get_model_info") and p.engine == "sglang":
            info = body(p.fixtures, "model_info.json")
            info |= {"served_model_name": p.served_model, "max_context_length": p.max_model_len}
            if not p.reasoning_split:
                info["reasoning_parser"] = None
            self._json(200, info)
        else:
            self._json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        e, p = self.engine, self.engine.profile
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("Content-Length") or 0)
        try:
            request = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError:
            self._json(400, {"detail": "body is not JSON"})
            return
        e.requests.append({"path": path, "body": request})
        try:
            if path == "/tokenize" or (path == "/v1/tokenize" and p.engine == "sglang"):
                self._tokenize(request)
            elif path == "/v1/chat/completions":
                self._chat(request)
            elif path == "/v1/responses":
                self._responses(request)
            else:
                self._json(404, {"detail": "Not Found"})
        except HttpError as err:
            self._json(err.status, err.payload)

    # ---- routes ----
    def _vllm_server_info(self) -> dict[str, Any]:
        """The recorded dev-mode `/server_info` (JSON form), with this profile's window and
        speculative decoding."""
        p = self.engine.profile
        info: dict[str, Any] = body(p.fixtures, "server_info.json")
        conf = info["vllm_config"]
        conf["model_config"]["max_model_len"] = p.max_model_len
        conf["scheduler_config"]["max_num_seqs"] = p.max_num_seqs
        spec = conf.get("speculative_config") or {}
        if p.spec is None:
            conf["speculative_config"] = None
        else:
            spec["num_speculative_tokens"] = p.spec.num_speculative_tokens
            spec["method"] = p.spec.method
            conf["speculative_config"] = spec
        return info

    def _server_info(self) -> dict[str, Any]:
        p = self.engine.profile
        info: dict[str, Any] = body(p.fixtures, "server_info.json")
        info |= {
            "served_model_name": p.served_model,
            "version": p.version,
            "context_length": p.max_model_len,
        }
        if not p.reasoning_split:
            info["reasoning_parser"] = None
        if p.spec is not None:
            k = p.spec.num_speculative_tokens
            info |= {
                "speculative_algorithm": "EAGLE",
                "speculative_num_steps": k,
                "speculative_eagle_topk": 1,
                "speculative_num_draft_tokens": k + 1,
            }
            info["internal_states"][0]["avg_spec_accept_length"] = self.engine.page.value(
                "sglang:spec_accept_length"
            )
        return info

    def _tokenize(self, request: dict[str, Any]) -> None:
        p = self.engine.profile
        if "messages" in request:
            n = len(prompt_words(request["messages"]))
        else:
            n = count_tokens(request.get("prompt", ""))
        tokens = list(range(1000, 1000 + n))
        if p.engine == "vllm":
            strs = [str(t) for t in tokens] if request.get("return_token_strs") else None
            self._json(
                200,
                {
                    "count": n,
                    "max_model_len": p.max_model_len,
                    "tokens": tokens,
                    "token_strs": strs,
                },
            )
        else:
            self._json(200, {"tokens": tokens, "count": n, "max_model_len": p.max_model_len})

    def _plan(
        self, request: dict[str, Any], messages: list[dict[str, Any]], route: str
    ) -> tuple[list[str], Answer]:
        e, p = self.engine, self.engine.profile
        words = prompt_words(messages)
        max_tokens = request.get(
            "max_tokens", request.get("max_completion_tokens", request.get("max_output_tokens"))
        )
        e.check_length(len(words), max_tokens, route)
        answer = p.answer(request)
        if answer.tool_call is not None and p.engine == "vllm" and not p.tool_parser:
            raise HttpError(
                400,
                {
                    "error": {
                        "message": '"auto" tool choice requires --enable-auto-tool-choice and '
                        "--tool-call-parser to be set",
                        "type": "BadRequestError",
                        "param": None,
                        "code": 400,
                    }
                },
            )
        return words, answer

    def _pieces(self, answer: Answer, max_tokens: int | None) -> tuple[list[tuple[str, str]], str]:
        """(kind, text) per token: kind is "reasoning" or "content"; and the finish reason."""
        p = self.engine.profile
        if p.reasoning_split:
            pieces = [("reasoning", w) for w in _words(answer.reasoning)]
            pieces += [("content", w) for w in _words(answer.content)]
        else:
            raw = (
                f"<think>\n{answer.reasoning}\n</think>\n\n{answer.content}"
                if answer.reasoning
                else answer.content
            )
            pieces = [("content", w) for w in _words(raw)]
        if max_tokens is not None and len(pieces) > max_tokens:
            return pieces[:max_tokens], "length"
        return pieces, "stop"

    def _chat(self, request: dict[str, Any]) -> None:
        e, p, t = self.engine, self.engine.profile, self.engine.chat
        words, answer = self._plan(request, request.get("messages") or [], "chat")
        max_tokens = request.get("max_tokens", request.get("max_completion_tokens"))
        pieces, reason = self._pieces(answer, max_tokens)
        if answer.tool_call is not None:
            pieces, reason = [("tool", w) for w in _words(answer.tool_call[1])], "tool_calls"
        key = id(request)
        cid = ("chatcmpl-" if p.engine == "vllm" else "") + uuid.uuid4().hex
        created = int(time.time())
        e.start(key, len(words))
        done = Finished(len(words), len(pieces), reason, e.cached(words), time.monotonic())

        def chunk(
            template: dict[str, Any], delta: dict[str, Any] | None = None, **choice: Any
        ) -> dict[str, Any]:
            c = copy.deepcopy(template) | {"id": cid, "created": created, "model": p.served_model}
            if c["choices"]:
                d = c["choices"][0]["delta"]
                for k in REASONING_KEYS:
                    d.pop(k, None)
                if p.engine == "sglang":
                    d["reasoning_content"] = None
                elif "reasoning_content" in p.reasoning_keys and "content" in (delta or {}):
                    d["reasoning_content"] = None  # as recorded on 0.11-era builds
                d.update(delta or {})
                c["choices"][0].update(choice)
            return c

        usage = {
            "prompt_tokens": done.prompt,
            "total_tokens": done.prompt + done.generated,
            "completion_tokens": done.generated,
        }
        if not request.get("stream"):
            time.sleep(p.first_chunk_delay_s)
            done.first = time.monotonic()
            time.sleep(p.chunk_interval_s * len(pieces))
            done.last, done.steps = time.monotonic(), len(pieces)
            e.finish(key, done)
            self._json(200, self._completion(cid, created, pieces, reason, answer, usage))
            return
        so = request.get("stream_options") or {}
        self._start_stream()
        time.sleep(p.first_chunk_delay_s)
        self._event(None, chunk(t.role))
        tool_id = ("chatcmpl-tool-" if p.engine == "vllm" else "call_") + uuid.uuid4().hex[:24]
        if answer.tool_call is not None:
            first = copy.deepcopy(t.tool_first["choices"][0]["delta"]["tool_calls"][0])
            first["id"] = tool_id
            first["function"]["name"] = answer.tool_call[0]
            self._event(None, chunk(t.tool_first, {"tool_calls": [first]}))
        for kind, text in pieces:
            time.sleep(p.chunk_interval_s)
            now = time.monotonic()
            done.first = done.first or now
            done.last, done.steps = now, done.steps + 1
            if kind == "tool":
                more = copy.deepcopy(t.tool_more["choices"][0]["delta"]["tool_calls"][0])
                more["function"]["arguments"] = text
                self._event(None, chunk(t.tool_more, {"tool_calls": [more]}))
            elif kind == "reasoning":
                self._event(None, chunk(t.reasoning, dict.fromkeys(p.reasoning_keys, text)))
            else:
                self._event(None, chunk(t.content, {"content": text}))
        e.finish(key, done)
        finish = t.tool_finish if answer.tool_call is not None else t.finish
        self._event(None, chunk(finish, finish_reason=reason))
        if so.get("include_usage"):
            u = copy.deepcopy(t.usage) | {"id": cid, "created": created, "model": p.served_model}
            u["usage"] = dict(u["usage"]) | usage
            self._event(None, u)
        self._event(None, "[DONE]")
        self._end_stream()

    def _completion(
        self,
        cid: str,
        created: int,
        pieces: list[tuple[str, str]],
        reason: str,
        answer: Answer,
        usage: dict[str, int],
    ) -> dict[str, Any]:
        p = self.engine.profile
        out = copy.deepcopy(self.engine.chat.completion) | {
            "id": cid,
            "created": created,
            "model": p.served_model,
        }
        msg = out["choices"][0]["message"]
        for k in REASONING_KEYS:
            msg.pop(k, None)
        reasoning = "".join(t for k, t in pieces if k == "reasoning")
        msg["content"] = "".join(t for k, t in pieces if k == "content") or None
        for k in p.reasoning_keys:
            msg[k] = reasoning or None
        if answer.tool_call is not None:
            tool_id = ("chatcmpl-tool-" if p.engine == "vllm" else "call_") + uuid.uuid4().hex[:24]
            msg["tool_calls"] = [
                {
                    "id": tool_id,
                    "type": "function",
                    "index": 0,
                    "function": {"name": answer.tool_call[0], "arguments": answer.tool_call[1]},
                }
            ]
            msg["content"] = None
        out["choices"][0]["finish_reason"] = reason
        out["usage"] = dict(out["usage"]) | usage
        return out

    def _responses(self, request: dict[str, Any]) -> None:
        e, p, t = self.engine, self.engine.profile, self.engine.responses
        words, answer = self._plan(request, responses_messages(request), "responses")
        pieces, reason = self._pieces(answer, request.get("max_output_tokens"))
        reasoning = [w for k, w in pieces if k == "reasoning"]
        content = [w for k, w in pieces if k == "content"]
        key, rid, created = id(request), "resp_" + uuid.uuid4().hex, int(time.time())
        rs_id, msg_id = "rs_" + uuid.uuid4().hex, "msg_" + uuid.uuid4().hex
        e.start(key, len(words))
        done = Finished(len(words), len(pieces), reason, e.cached(words), time.monotonic())
        usage = {
            "input_tokens": done.prompt,
            "input_tokens_details": {"cached_tokens": done.cached},
            "output_tokens": done.generated,
            "output_tokens_details": {"reasoning_tokens": len(reasoning)},
            "total_tokens": done.prompt + done.generated,
        }
        rs_item = copy.deepcopy(t["response.output_item.done"]["item"]) | {"id": rs_id}
        rs_item["content"] = [{"text": "".join(reasoning), "type": "reasoning_text"}]
        msg_item = copy.deepcopy(t["response.output_item.done#message"]["item"]) | {"id": msg_id}
        msg_item["content"][0]["text"] = "".join(content)
        output = ([rs_item] if reasoning else []) + [msg_item]
        status = "completed" if reason == "stop" else "incomplete"
        final = copy.deepcopy(t["response.completed"]["response"]) | {
            "id": rid,
            "created_at": created,
            "model": p.served_model,
            "output": output,
            "status": status,
            "usage": usage,
        }
        if reason != "stop":
            final["incomplete_details"] = {"reason": "max_output_tokens"}  # as recorded
        if not request.get("stream"):
            time.sleep(p.first_chunk_delay_s)
            done.first = time.monotonic()
            time.sleep(p.chunk_interval_s * len(pieces))
            done.last, done.steps = time.monotonic(), len(pieces)
            e.finish(key, done)
            self._json(200, final)
            return
        seq = iter(range(10**9))

        def ev(kind: str, **fields: Any) -> None:
            b = copy.deepcopy(t[kind]) | fields | {"sequence_number": next(seq)}
            self._event(b["type"], b)

        def tick() -> None:
            time.sleep(p.chunk_interval_s)
            now = time.monotonic()
            done.first = done.first or now
            done.last, done.steps = now, done.steps + 1

        self._start_stream()
        time.sleep(p.first_chunk_delay_s)
        head = {"id": rid, "created_at": created, "model": p.served_model}
        ev("response.created", response=t["response.created"]["response"] | head)
        ev("response.in_progress", response=t["response.in_progress"]["response"] | head)
        index = 0
        if reasoning:
            ev(
                "response.output_item.added",
                item=t["response.output_item.added"]["item"] | {"id": rs_id},
                output_index=index,
            )
            if "response.reasoning_part.added" in t:  # vLLM 0.26, recorded
                ev("response.reasoning_part.added", item_id=rs_id, output_index=index)
            for w in reasoning:
                tick()
                ev("response.reasoning_text.delta", delta=w, item_id=rs_id, output_index=index)
            ev(
                "response.reasoning_text.done",
                text="".join(reasoning),
                item_id=rs_id,
                output_index=index,
            )
            if "response.reasoning_part.done" in t:
                part = copy.deepcopy(t["response.reasoning_part.done"]["part"])
                part["text"] = "".join(reasoning)
                ev("response.reasoning_part.done", part=part, item_id=rs_id, output_index=index)
            ev("response.output_item.done", item=rs_item, output_index=index)
            index += 1
        ev(
            "response.output_item.added#message",
            item=t["response.output_item.added#message"]["item"] | {"id": msg_id},
            output_index=index,
        )
        ev("response.content_part.added", item_id=msg_id, output_index=index)
        for w in content:
            tick()
            ev("response.output_text.delta", delta=w, item_id=msg_id, output_index=index)
        ev("response.output_text.done", text="".join(content), item_id=msg_id, output_index=index)
        part = copy.deepcopy(t["response.content_part.done"]["part"]) | {"text": "".join(content)}
        ev("response.content_part.done", part=part, item_id=msg_id, output_index=index)
        ev("response.output_item.done#message", item=msg_item, output_index=index)
        e.finish(key, done)
        ev("response.completed", response=final)
        self._end_stream()

    # ---- wire ----
    def _json(self, status: int, payload: Any) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json")

    def _send(self, status: int, data: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _event(self, name: str | None, payload: Any) -> None:
        data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
        text = (f"event: {name}\n" if name else "") + f"data: {data}\n\n"
        raw = text.encode()
        self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
        self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class ReplayHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, engine: Engine) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.engine = engine


class Replay:
    """A running replay: `base_url`, the engine state (`engine.page`, `engine.requests`)."""

    def __init__(self, profile: Profile) -> None:
        self.engine = Engine(profile)
        self.httpd = ReplayHTTPServer(self.engine)
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="replay", daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> Replay:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def serve(profile: Profile) -> Iterator[Replay]:
    with Replay(profile) as replay:
        yield replay
