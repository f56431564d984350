"""Every stage judged again offline, from what its attempts kept, by `verify`.

A stage that can be re-judged has a pure function `qualify.<stage>.rebuild.rebuild(view)`: it
rebuilds, from the raw exchanges and samples one sealed attempt kept (`AttemptView`), the data
its judges read, or raises `NotKept` when the attempt did not keep what that needs. Which
stages those are is read from the stage registry (`rejudged`): every registered stage whose
package has a `rebuild` module, in the registry's order. Then:

- a probe stage's rebuild (preflight, quality) runs the stage's own checks again against the
  kept exchanges and sets the gates they give (`AttemptView.judged`); otherwise the stage's gate
  files, the project's own as this installation ships them (never a copy the
  run carries), judge the rebuilt data under the signed thresholds, through the check registry
  (`qualify.gates.runner.judge_stage`); a gate whose verdict differs from the sealed
  `result.json`, or that one side has and the other lacks, is a refusal naming stage, gate and
  both verdicts;
- every judged figure `result.json` records is compared with the one its exchanges give; each
  difference is a refusal naming the stage and the field (`lanes.candidate.figure.decode_tok_s`).

What a rebuild cannot take from the exchanges (a count read from the server's `/metrics`, which
no stage keeps raw, or the sandbox run of a quality task's code, which `verify` never runs) it
takes from the sealed record and says so (`view.trusted`): those are named in the verify
report's notes and in docs/trust.md.
"""

from __future__ import annotations

import importlib
import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qualify.candidate import Candidate
from qualify.evidence.store import RESULT
from qualify.gates.thresholds import Thresholds
from qualify.httpclient.client import Exchange, SSEEvent
from qualify.records import GateResult, StageResult

__all__ = [
    "REJUDGED",
    "AttemptView",
    "NotKept",
    "differences",
    "exchange_of",
    "rejudge_attempt",
]


def rejudged() -> tuple[str, ...]:
    """The stages whose verdicts `verify` derives again from their kept exchanges: every
    registered stage whose package has a `rebuild` module, in the registry's order (identity
    is judged again in `qualify.decision.verify`, and is left out here)."""
    from importlib.util import find_spec

    from qualify.registry import stage_names

    out = []
    for name in stage_names():
        try:
            found = find_spec(f"qualify.{name}.rebuild") is not None
        except ModuleNotFoundError:  # a registered stage with no package of its own
            found = False
        if found and name != "identity":
            out.append(name)
    return tuple(out)


REJUDGED = rejudged()

_PART = re.compile(r"^(?P<name>.+)\.part(?P<n>\d{3})$")


class NotKept(Exception):
    """The attempt did not keep what its data is rebuilt from (a refusal: a sealed attempt of a
    re-judged stage must keep it)."""


@dataclass
class AttemptView:
    """One sealed attempt of a run, read only through its signed files."""

    run: Path
    attempt: str
    files: dict[str, str]
    result: StageResult
    candidate: Candidate | None = None
    control: Candidate | None = None
    trusted: list[str] = field(default_factory=list)
    earlier: dict[str, str] = field(default_factory=dict)
    said: list[str] = field(default_factory=list)
    # A probe stage's rebuild runs its checks again over the kept exchanges and sets the gates
    # they give here; a judge stage's rebuilt data is judged by its gate files instead.
    judged: list[GateResult] | None = None
    # The house's accepted check codes per stage (`PolicyRules.check_codes`); None: any.
    accepted: dict[str, list[str]] | None = None

    def other_code(self, recorded: str | None, stage: str, now: str) -> None:
        """A record of check code other than this installation's (`now`): refused when the
        house lists the codes it accepts for `stage` and the record's is not one of them."""
        allowed = (self.accepted or {}).get(stage)
        if allowed is not None and recorded not in allowed:
            raise NotKept(
                f"its check_code {str(recorded)[:12]} is neither this installation's "
                f"({now[:12]}) nor one the house accepts for {stage} (check_codes)"
            )

    @property
    def stage(self) -> str:
        return self.attempt.split("/", 1)[0]

    @property
    def sealed(self) -> dict[str, Any]:
        """The sealed record's data (what the rebuilt data is compared with)."""
        return self.result.data

    def names(self) -> list[str]:
        """The files of this attempt, by name, parts joined (`x.json.part000` is `x.json`)."""
        out: set[str] = set()
        prefix = self.attempt + "/"
        for rel in self.files:
            if rel.startswith(prefix) and "/" not in rel[len(prefix) :]:
                base = rel[len(prefix) :]
                m = _PART.match(base)
                out.add(m.group("name") if m else base)
        return sorted(out)

    def read_bytes(self, name: str) -> bytes:
        """A signed file of this attempt (its parts joined); `NotKept` when it is none."""
        rel = f"{self.attempt}/{name}"
        if rel in self.files:
            return (self.run / rel).read_bytes()
        parts = sorted(p for p in self.files if _PART.match(p) and p.startswith(rel + ".part"))
        if not parts:
            raise NotKept(f"{rel}: not a signed file of the run")
        return b"".join((self.run / p).read_bytes() for p in parts)

    def read_json(self, name: str) -> Any:
        try:
            return json.loads(self.read_bytes(name))
        except ValueError as exc:
            raise NotKept(f"{self.attempt}/{name}: not JSON ({exc})") from None

    def exchange(self, name: str) -> Exchange:
        """A kept exchange (`StageContext.keep`) read back as the `Exchange` it was."""
        return exchange_of(self.read_json(name), f"{self.attempt}/{name}")

    def earlier_form(self, checks: list[str], why: str) -> None:
        """The record is of an earlier form that had no gates of these checks: a gate of one of
        them that the sealed result lacks is named in the notes, not judged."""
        for c in checks:
            self.earlier[c] = why

    def trust(self, what: str) -> None:
        """Say that `what` is taken from the sealed record (not kept raw)."""
        if what not in self.trusted:
            self.trusted.append(what)


def exchange_of(kept: Any, where: str) -> Exchange:
    """An `Exchange` from its evidence form (`Exchange.evidence`): the request as sent, the
    status, headers, body or text, every SSE event with its arrival time, the end time and the
    error. Arrival times are kept to the microsecond."""
    try:
        req, resp, tm = kept["request"], kept["response"], kept.get("timing") or {}
        ex = Exchange(
            method=str(req.get("method")),
            url=str(req.get("url")),
            request_headers=dict(req.get("headers") or {}),
            request_body=req.get("body"),
            status=resp.get("status"),
            response_headers=dict(resp.get("headers") or {}),
            body=resp.get("body"),
            text=resp.get("text"),
            events=[SSEEvent(float(t), str(e), str(d)) for t, e, d in resp.get("sse") or []],
            t_headers=tm.get("t_headers_s"),
            t_end=tm.get("t_end_s"),
            error=kept.get("error"),
            error_kind=kept.get("error_kind"),
            bytes_received=int(tm.get("bytes") or 0),
            stale_retries=int(tm.get("stale_retries") or 0),
        )
        ex.chunk_times = [0.0] * int(tm.get("network_chunks") or 0)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise NotKept(f"{where}: not a kept exchange ({exc!r})") from None
    return ex


# -- comparing figures ---------------------------------------------------------------------------

# Arrival times are kept to the microsecond, so a figure computed from them may differ from the
# one computed at run time in its last digits; anything beyond is a different figure.
REL_TOL = 1e-3
ABS_TOL = 1e-4
ABS_TOL_MS = 1e-2


def _close(key: str, a: float, b: float) -> bool:
    tol = ABS_TOL_MS if key.endswith("_ms") or "_ms_" in key else ABS_TOL
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=tol)


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _walk(path: str, key: str, a: Any, b: Any) -> Iterator[str]:
    if _num(a) and _num(b):
        if not _close(key, float(a), float(b)):
            yield path
    elif isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a:  # a field the sealed record's form does not have: nothing it claims
                continue
            if k not in b:
                yield f"{path}.{k}" if path else str(k)
                continue
            yield from _walk(f"{path}.{k}" if path else str(k), str(k), a[k], b[k])
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            yield f"{path} (length {len(a)}, from the exchanges {len(b)})"
            return
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _walk(f"{path}[{i}]", key, x, y)
    elif a != b:
        yield path


def differences(sealed: Any, rebuilt: Any) -> list[str]:
    """The field paths where the sealed data differs from the rebuilt one (numbers compared to
    the precision the kept arrival times allow)."""
    return list(_walk("", "", sealed, rebuilt))


def _value(data: Any, path: str) -> Any:
    cur = data
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path.split(" ")[0]):
        try:
            cur = cur[int(part[1:-1])] if part.startswith("[") else cur[part]
        except (KeyError, IndexError, TypeError, ValueError):
            return None
    return cur


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


# -- judging again --------------------------------------------------------------------------------

Rebuild = Callable[[AttemptView], dict[str, Any]]


def rebuilder(stage: str) -> Rebuild | None:
    """`qualify.<stage>.rebuild.rebuild`, when this build has one for the stage."""
    if stage not in rejudged():
        return None
    module = importlib.import_module(f"qualify.{stage}.rebuild")
    fn: Rebuild = module.rebuild
    return fn


def _key(g: GateResult) -> str:
    """A gate's name within its stage, with its level: `decode`, `garble@off`."""
    return g.gate + (f"@{g.level}" if g.level else "")


def _checks(stage: str, gates_dir: Path) -> dict[str, str]:
    """The check each of the stage's gate files names, by gate id."""
    from qualify.gates.files import load_gates

    return {g.gate.id: g.gate.check for g in load_gates(gates_dir, stage)[0]}


def rejudge_attempt(
    view: AttemptView, gates_dir: Path, thresholds: Thresholds, most: int = 6
) -> list[str]:
    """The problems of one sealed attempt judged again from its exchanges (empty: it holds)."""
    from qualify.gates.runner import judge_stage

    fn = rebuilder(view.stage)
    where = f"{view.attempt}/{RESULT}"
    if fn is None or view.result.status != "finished":
        return []
    try:
        rebuilt = fn(view)
    except NotKept as exc:
        return [f"{where}: cannot be judged again from the exchanges it kept: {exc}"]
    problems = []
    diff = differences(view.sealed, rebuilt)
    for path in diff[:most]:
        problems.append(
            f"{where}: data.{path} is {_short(_value(view.sealed, path))}, its exchanges give "
            f"{_short(_value(rebuilt, path))}"
        )
    if len(diff) > most:
        problems.append(f"{where}: {len(diff) - most} more fields differ from its exchanges")
    if view.judged is not None:
        again = view.judged
    else:
        again, _load_problems = judge_stage(view.stage, gates_dir, rebuilt, thresholds)
    signed = {_key(g): g.verdict.value for g in view.result.gates if g.gate != "gate-files"}
    judged = {_key(g): g.verdict.value for g in again}
    checks = _checks(view.stage, gates_dir)
    for gate in sorted(set(judged) - set(signed)):
        why = view.earlier.get(checks.get(gate.split("@", 1)[0], ""))
        if why is not None:
            view.said.append(f"no gate {view.stage}/{gate}: {why}")
            del judged[gate]
        else:
            # The run records no list of the gate files it judged with, so a gate file newer
            # than the run cannot be told from a gate left out of its result: named, not judged.
            view.said.append(
                f"gate {view.stage}/{gate} is not in the sealed result (judged now: "
                f"{judged[gate]}; a gate file newer than the run, or one left out)"
            )
            del judged[gate]
    for gate in sorted(set(signed) | set(judged)):
        if signed.get(gate) != judged.get(gate):
            problems.append(
                f"{where}: gate {view.stage}/{gate} is {signed.get(gate) or 'absent'}, judged "
                f"again from the exchanges it kept: {judged.get(gate) or 'absent'}"
            )
    return problems


def rejudge_run(
    run: Path,
    files: dict[str, str],
    thresholds: Thresholds,
    candidate: Candidate | None,
    control: Candidate | None,
    accepted: dict[str, list[str]] | None = None,
) -> tuple[list[str], list[str]]:
    """Every finished attempt of every re-judged stage, judged again from its signed files with
    the project's gate files: (problems, notes)."""
    from pydantic import ValidationError

    from qualify.gates.files import default_gates_dir

    problems: list[str] = []
    notes: list[str] = []
    stages = rejudged()
    attempts = sorted({"/".join(n.split("/")[:2]) for n in files if n.endswith(f"/{RESULT}")})
    for attempt in attempts:
        if attempt.split("/", 1)[0] not in stages or f"{attempt}/{RESULT}" not in files:
            continue
        try:
            result = StageResult.model_validate_json((run / attempt / RESULT).read_text())
        except (OSError, ValidationError) as exc:
            problems.append(f"{attempt}/{RESULT}: not a stage result ({exc})")
            continue
        view = AttemptView(run, attempt, files, result, candidate, control, accepted=accepted)
        problems += rejudge_attempt(view, default_gates_dir(), thresholds)
        if result.status == "finished":
            taken = f"; taken as recorded (not kept raw): {'; '.join(view.trusted)}"
            notes.append(
                f"{attempt}: judged again from its exchanges{taken if view.trusted else ''}"
            )
            notes += [f"{attempt}: {n}" for n in view.said]
    return problems, notes


def control_in_run(run: Path, copy: str | None, files: dict[str, str]) -> Candidate | None:
    """The control as the run loaded it: its signed copy (`control.toml`, beside the candidate
    copy) applied to the signed candidate copy it extends; None when the run signed none or it
    does not load."""
    import tempfile
    import tomllib

    from qualify.candidate import ControlFile, load_candidate
    from qualify.errors import BadInput

    if copy is None:
        return None
    ctl = f"{Path(copy).parent.as_posix()}/control.toml"
    if ctl not in files or copy not in files:
        return None
    try:
        raw = (run / ctl).read_bytes()
        extends = ControlFile.model_validate(tomllib.loads(raw.decode())).extends
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp) / "control.toml"
            (base.parent / Path(extends).name).write_bytes((run / copy).read_bytes())
            base.write_bytes(raw.replace(extends.encode(), Path(extends).name.encode(), 1))
            return load_candidate(base).candidate
    except (OSError, ValueError, BadInput):
        return None
