"""Quality judged again from the exchanges an attempt kept (`verify`, `qualify.trust.rejudge`).

Every gate of the sealed result runs again offline, as preflight's do
(`qualify.preflight.rebuild`, `qualify.trust.replay`): each task on the candidate lane at its
level, each task and each of the candidate's preflight gates on the control lane, with the
stage's own contexts (`task_context`, `control_preflight_context`) built from the signed
candidate and control copies, each request answered by the exchange its attempt kept. The
record's scope, budgets, totals, table, failures and control verdicts are built again from the
gates so judged, with the stage's own `ran_record` and `summarised`.

Not re-derived, so taken as recorded and said (`view.trust`): the sandbox run of a code task's
answer (`python_code`, `diff_edit`: exit code, output, whether it finished). That code is the
model's, read from the kept answer; `verify` runs on whoever checks a run, and the sandbox guards
against code that goes wrong, not against code written to escape, so `verify` never runs it. The
code the check extracts from the kept answer is compared with the code the attempt recorded.
A gate that cannot be judged again is treated as preflight treats it (other gate file, other
check code).
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from qualify.evidence.kept import AttemptView, NotKept
from qualify.gates.files import default_gates_dir, pick
from qualify.preflight.rebuild import (
    declared_again,
    every_gate,
    gate_files,
    regate,
    replayer,
    same_code,
)
from qualify.quality.record import Record
from qualify.quality.sandbox import RunResult
from qualify.records import GateResult
from qualify.trust.replay import Replay

STAGE = "quality"
CONTROL = "control"
CONTROL_PREFLIGHT = "control-preflight-"


class SandboxReplay(Replay):
    """A replay of the attempt's kept exchanges that also answers each task's sandbox run with
    the one the attempt recorded."""

    def recorded_run(self, script: Path, scratch: Path, limit_s: float) -> RunResult:
        """The sandbox run the attempt recorded for its code (`verify` runs no model-written
        code: what it did is taken as recorded, and said)."""
        run: Any = (self.current.metrics if self.current else {}).get("run")
        try:
            got = RunResult(**{f.name: run[f.name] for f in fields(RunResult)})
        except (KeyError, TypeError) as exc:
            n = self.current.number if self.current else "?"
            raise self._fail(f"attempt {n} recorded no sandbox run of its code ({exc!r})") from None
        self.view.trust("the sandbox runs of the answers' code (verify runs no model-written code)")
        return got


def _control_level(view: AttemptView, sealed: Record) -> str | None:
    if sealed.control is None or not sealed.control.ran:
        return None
    if view.control is None:
        raise NotKept("the record says the control lane ran; the run signed no control copy")
    level = next(iter(view.control.reasoning))
    if sealed.control.level != level:
        raise NotKept(f"the control ran at {sealed.control.level!r}, its lowest level is {level!r}")
    return level


def _judged(view: AttemptView, sealed: Record, strict: bool) -> list[GateResult]:
    """Every gate of the sealed result judged again (or taken as recorded, named)."""
    from qualify.quality.stage import control_preflight_context, task_context

    c, ctl = view.candidate, view.control
    assert c is not None
    tasks, preflights = gate_files(STAGE), gate_files("preflight")
    control_level = _control_level(view, sealed)
    own_preflight = c.stages.preflight.gates_dir is not None
    rp = SandboxReplay(view)
    out: list[GateResult] = []
    for g in view.result.gates:
        if g.gate == "gate-files":
            continue
        if g.level is None:
            raise NotKept(f"gate {g.key}: no reasoning level")
        if g.gate.startswith(CONTROL_PREFLIGHT) and ctl is not None and g.level == control_level:
            gid = g.gate.removeprefix(CONTROL_PREFLIGHT)
            io = (rp, rp.keep(f"{CONTROL}-"), rp.write)
            ctx = control_preflight_context(ctl, g.level, io, default_gates_dir())
            gate = None if own_preflight else preflights.get(gid)
            sha = gate.sha256 if gate else None
        elif g.gate.startswith(f"{CONTROL}-") and ctl is not None and g.level == control_level:
            gid = g.gate.removeprefix(f"{CONTROL}-")
            io = (rp, rp.keep(f"{CONTROL}-"), rp.write)
            ctx = task_context(c, ctl, CONTROL, g.level, io)
            gate, sha = tasks.get(gid), sealed.gate_files.get(gid)
        elif g.level in c.reasoning:
            gid, io = g.gate, (rp, rp.keep(), rp.write)
            ctx = task_context(c, c, "candidate", g.level, io)
            gate, sha = tasks.get(gid), sealed.gate_files.get(gid)
        else:
            raise NotKept(f"gate {g.key}: not a gate of the candidate's levels or its control's")
        rp.claim(g, f"{CONTROL}-" if g.gate.startswith(f"{CONTROL}-") else "", gid)
        if hasattr(ctx, "run_code"):
            ctx.run_code = rp.recorded_run
        sealed_as_run = g.model_copy(update={"gate": gid})
        run = replayer(gate, sha, ctx, sealed_as_run, rp)
        again = regate(view, sealed_as_run, run, strict, g.key)
        out.append(again.model_copy(update={"gate": g.gate, "stage": STAGE}))
    ran = {(t, lv) for t in sealed.gate_files for lv in c.reasoning}
    if control_level is not None:
        ran |= {(f"{CONTROL}-{t}", control_level) for t in sealed.gate_files}
        if not own_preflight:
            chosen, _ = pick(list(preflights.values()), c.stages.preflight.gates, "gates", "")
            ran |= {(f"{CONTROL_PREFLIGHT}{g.gate.id}", control_level) for g in chosen}
    every_gate(view, ran)
    rp.all_claimed()
    return out


def _recorded_code(view: AttemptView, judged: list[GateResult]) -> None:
    """The code (or diff) a code task's check extracts again must be the one whose recorded
    sandbox run it is given."""
    sealed = {(g.gate, g.level): g for g in view.result.gates}
    for g in judged:
        s = sealed.get((g.gate, g.level))
        for a, b in zip(s.attempts if s else [], g.attempts, strict=False):
            for k in ("code", "diff"):
                if "run" in a.metrics and a.metrics.get(k) != b.metrics.get(k):
                    raise NotKept(f"gate {g.key} attempt {a.number}: its answer gives another {k}")


def rebuild(view: AttemptView) -> dict[str, Any]:
    """The quality record rebuilt from the signed copies and the gates judged again from the
    kept exchanges (`view.judged`)."""
    from qualify.quality.stage import ran_record, summarised

    c = view.candidate
    if c is None:
        raise NotKept("the run signed no candidate copy to build the tasks' requests from")
    sealed = Record.model_validate(view.sealed)
    strict = same_code(view, sealed.check_code, STAGE)
    declared_again(view, sealed.declared_gate_files, STAGE, strict)
    judged = _judged(view, sealed, strict)
    _recorded_code(view, judged)
    view.judged = judged
    gates, _ = pick(list(gate_files(STAGE).values()), c.stages.quality.tasks, "tasks", STAGE)
    ran = ran_record(c, gates).model_copy(
        update={
            "gate_files": sealed.gate_files,
            "declared_gate_files": sealed.declared_gate_files,
            "check_code": sealed.check_code,
        }
    )
    if {g.gate.id: g.sha256 for g in gates} != sealed.gate_files:
        view.trust("the scope and budgets of gate files other than this installation's")
        ran = ran.model_copy(update={"scope": sealed.scope, "budgets": sealed.budgets})
    tasks = []
    for g in judged:
        lane = CONTROL if g.gate.startswith(f"{CONTROL}-") else "candidate"
        if not g.gate.startswith(CONTROL_PREFLIGHT):
            task = g.gate.removeprefix(f"{CONTROL}-") if lane == CONTROL else g.gate
            tasks.append((lane, task, g.model_copy(update={"gate": task})))
    why_not = sealed.control.why_not if sealed.control else None
    plan = (_control_level(view, sealed), why_not or "")
    record = summarised(ran, gates, tasks, judged, view.attempt, plan)
    out: dict[str, Any] = record.model_dump(mode="json")
    return {k: v for k, v in out.items() if k in view.sealed}
