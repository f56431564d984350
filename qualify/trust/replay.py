"""A probe gate run again, offline, against the exchanges one sealed attempt kept.

`verify` judges preflight and quality (both probe stages) again this way: the stage's own check
(the registered probe, through `qualify.gates.runner.run_gate`) runs with a client that answers
each request with the exchange the gate's attempt kept for it, in the order kept. A request is
answered only when it is the one the run sent (method, path and body, byte for byte as JSON),
under the label the run kept it under; a check that asks for more, fewer or other requests than
the attempt kept cannot be judged again from them (`Unmatched`, naming the request and the
first field that differs). Every kept exchange answers one request at most.

A run made by other check code (an earlier version sends other request fields) does not match;
how a rebuild treats that is its own (`qualify.preflight.rebuild`).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from qualify.evidence.kept import AttemptView, NotKept
from qualify.gates.files import LoadedGate
from qualify.gates.probe import GateContext
from qualify.httpclient.client import Exchange
from qualify.records import AttemptRecord, GateResult
from qualify.stage import safe

OUTCOME = ".outcome.json"
_PART = re.compile(r"\.part\d{3}$")


class Unmatched(Exception):
    """The check asked for a request the attempt did not keep (other check code, or a record
    that names other exchanges than the ones the gate was judged on)."""


def _first_difference(a: object, b: object, path: str = "body") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                return f"{path}.{k} ({'sent now only' if k in a else 'kept only'})"
            if a[k] != b[k]:
                return _first_difference(a[k], b[k], f"{path}.{k}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _first_difference(x, y, f"{path}[{i}]")
    return path


@dataclass
class Replay:
    """A client over one attempt's kept exchanges: `queue` is the gate attempt's, in order."""

    view: AttemptView
    claimed: set[str] = field(default_factory=set)
    queue: list[str] = field(default_factory=list)
    served: str | None = None
    problem: str | None = None
    current: AttemptRecord | None = None

    def claim(self, sealed: GateResult, prefix: str, gate: str) -> None:
        """Every file `sealed`'s attempts name was kept for this gate at its level (by its
        name, whatever check code kept it), and no other attempt names it: a record cannot lend
        one gate's exchanges to another. `NotKept` otherwise."""
        stem = safe(f"{prefix}{sealed.level or 'default'}-{gate}-")
        for a in sealed.attempts:
            for f in a.files:
                name = _PART.sub("", f)
                if name.split("-", 1)[-1][: len(stem)] != stem or not name[:4].isdigit():
                    raise NotKept(f"gate {sealed.key} attempt {a.number} names {f}, not its own")
                if f in self.claimed:
                    raise NotKept(f"{f} is named by more than one attempt")
                self.claimed.add(f)

    def all_claimed(self) -> None:
        """Every exchange the attempt kept is named by one of the record's gates: a gate left
        out of the record leaves its exchanges behind. `NotKept` otherwise."""
        claimed = {_PART.sub("", f) for f in self.claimed}
        kept = [n for n in self.view.names() if n[:4].isdigit() and n not in claimed]
        if kept:
            raise NotKept(f"{len(kept)} kept exchanges no gate of the record names: {kept[:3]}")

    def start(self, sealed: AttemptRecord | None) -> None:
        """Attempt `sealed` begins: its kept exchanges answer, in the order kept."""
        files = dict.fromkeys(_PART.sub("", f) for f in (sealed.files if sealed else []))
        self.queue = [f for f in files if f.endswith(".json") and not f.endswith(OUTCOME)]
        self.served, self.current = None, sealed

    def _fail(self, why: str) -> Unmatched:
        self.problem = self.problem or why
        return Unmatched(why)

    def _next(self, method: str, path: str, body: object) -> Exchange:
        if not self.queue:
            raise self._fail(f"the check sends {method} {path}, which the attempt did not keep")
        name = self.queue.pop(0)
        ex = self.view.exchange(name)
        if ex.method != method or urlsplit(ex.url).path != path:
            raise self._fail(f"{name} is {ex.method} {ex.url}, the check sends {method} {path}")
        sent = json.loads(json.dumps(body))
        if sent != ex.request_body:
            where = _first_difference(sent, ex.request_body)
            raise self._fail(f"{name}: the check sends another request ({where} differs)")
        self.served = name
        return ex

    async def post(self, path: str, body: object, timeout_s: float | None = None) -> Exchange:
        return self._next("POST", path, body)

    async def stream(self, path: str, body: object, timeout_s: float | None = None) -> Exchange:
        return self._next("POST", path, body)

    async def get(self, path: str, timeout_s: float | None = None) -> Exchange:
        return self._next("GET", path, None)

    def keep(self, prefix: str = "") -> Callable[[str, Exchange], list[str]]:
        """`StageContext.keep` as the attempt ran it: the name the exchange was kept under."""

        def kept(label: str, ex: Exchange) -> list[str]:
            name = self.served or ""
            if name.split("-", 1)[-1] != f"{safe(prefix + label)}.json":
                raise self._fail(f"{name} was not kept under the label {prefix + label!r}")
            return [name]

        return kept

    def write(self, name: str, obj: object) -> list[str]:
        return [name]


def replay_gate(gate: LoadedGate, gctx: GateContext, sealed: GateResult, rp: Replay) -> GateResult:
    """`gate` run again over the exchanges `sealed`'s attempts kept (`gctx.client` is `rp`).
    `Unmatched` when the check's requests are not the ones kept; `NotKept` when a file is not.
    The files must have been claimed (`Replay.claim`)."""
    from qualify.gates.runner import run_gate

    attempts = {a.number: a for a in sealed.attempts}
    rp.problem = None
    again = asyncio.run(run_gate(gate, gctx, lambda n: rp.start(attempts.get(n))))
    if rp.problem is not None:
        raise Unmatched(rp.problem)
    for a in again.attempts:
        kept = attempts[a.number].files if a.number in attempts else None
        if a.files != kept:
            raise Unmatched(f"attempt {a.number} kept {kept}, its check asks for {a.files}")
    return again
