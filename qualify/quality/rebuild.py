"""Quality judged again from the exchanges an attempt kept (`verify`, `qualify.trust.rejudge`).

Every gate of the sealed result runs again offline as preflight's do (`qualify.preflight.rebuild`),
with the stage's own contexts built from the signed candidate and control copies; the record is
built again from the gates so judged, with the stage's own `ran_record` and `summarised`. The
sandbox run of a code task's answer is taken as recorded and said: `verify` runs no
model-written code (docs/trust.md); the code the check extracts from the kept answer must be
the code whose run the attempt recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from qualify.evidence.kept import AttemptView, NotKept
from qualify.gates.files import LoadedGate, default_gates_dir, pick
from qualify.gates.probe import GateContext
from qualify.preflight.rebuild import every_gate, gate_files, regate, replayer, same_code
from qualify.preflight.stage import gate_context
from qualify.quality.record import Record
from qualify.quality.sandbox import RunResult
from qualify.quality.stage import ControlPlan, ran_record, shared_levels, summarised, task_context
from qualify.quality.tasks import QualityContext
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
        run: Any = (self.current.metrics if self.current else {}).get("run")  # sealed JSON, raw
        try:
            got = RunResult(**{f.name: run[f.name] for f in fields(RunResult)})
        except (KeyError, TypeError) as exc:
            n = self.current.number if self.current else "?"
            raise self._fail(f"attempt {n} recorded no sandbox run of its code ({exc!r})") from None
        self.view.trust("the sandbox runs of the answers' code (verify runs no model-written code)")
        return got


def _control_plan(view: AttemptView, sealed: Record) -> ControlPlan:
    """Where the sealed record says the control ran, checked against the signed copies: its
    tasks at the control's lowest level, its preflight at every level both lanes declare (or,
    in a record made before, at that lowest level alone)."""
    if sealed.control is None or not sealed.control.ran:
        why_not = sealed.control.why_not if sealed.control else None
        return ControlPlan(None, why_not or "", [])
    if view.control is None or view.candidate is None:
        raise NotKept("the record says the control lane ran; the run signed no control copy")
    level = next(iter(view.control.reasoning))
    if sealed.control.level != level:
        raise NotKept(f"the control ran at {sealed.control.level!r}, its lowest level is {level!r}")
    levels = sealed.control.preflight_levels
    if levels is not None and levels != shared_levels(view.candidate, view.control):
        raise NotKept(
            f"the control's preflight ran at {levels}, the levels both lanes declare are "
            f"{shared_levels(view.candidate, view.control)}"
        )
    return ControlPlan(level, "", levels)


@dataclass
class _Again:
    """What judging one attempt's gates again needs: the view, its sealed record, where the
    control ran, the replay, and this installation's task and preflight gate files."""

    view: AttemptView
    sealed: Record
    plan: ControlPlan
    rp: SandboxReplay
    tasks: dict[str, LoadedGate] = field(default_factory=lambda: gate_files(STAGE))
    preflights: dict[str, LoadedGate] = field(default_factory=lambda: gate_files("preflight"))

    def gate_of(self, g: GateResult) -> tuple[str, GateContext, LoadedGate | None, str | None]:
        """The gate id, context, gate file and sealed sha256 one sealed gate is judged with."""
        c, ctl, rp, plan = self.view.candidate, self.view.control, self.rp, self.plan
        assert c is not None and g.level is not None
        on_control = ctl is not None and g.gate.startswith(f"{CONTROL}-")
        io = (rp, rp.keep(f"{CONTROL}-" if on_control else ""), rp.write)
        preflight_at = g.gate.startswith(CONTROL_PREFLIGHT) and g.level in plan.preflight_at
        if ctl is not None and on_control and preflight_at:
            gid = g.gate.removeprefix(CONTROL_PREFLIGHT)
            allowance = plan.preflight_levels is not None
            ctx = gate_context(ctl, g.level, *io, default_gates_dir(), allowance)
            gate = None if c.stages.preflight.gates_dir else self.preflights.get(gid)
            return gid, ctx, gate, gate.sha256 if gate else None
        gid = g.gate.removeprefix(f"{CONTROL}-") if on_control else g.gate
        if ctl is not None and on_control and g.level == plan.level:
            ctx = task_context(c, ctl, CONTROL, g.level, io)
        elif g.level in c.reasoning and not on_control:
            ctx = task_context(c, c, "candidate", g.level, io)
        else:
            raise NotKept(f"gate {g.key}: not a gate of the candidate's levels or its control's")
        return gid, ctx, self.tasks.get(gid), self.sealed.gate_files.get(gid)

    def ran(self) -> set[tuple[str, str]]:
        """Every (gate, level) the stage runs with these copies: the sealed result must hold
        exactly these."""
        c, plan = self.view.candidate, self.plan
        assert c is not None
        out = {(t, lv) for t in self.sealed.gate_files for lv in c.reasoning}
        if plan.level is None:
            return out
        out |= {(f"{CONTROL}-{t}", plan.level) for t in self.sealed.gate_files}
        if c.stages.preflight.gates_dir is None:
            chosen, _ = pick(list(self.preflights.values()), c.stages.preflight.gates, "gates", "")
            out |= {
                (f"{CONTROL_PREFLIGHT}{g.gate.id}", lv) for g in chosen for lv in plan.preflight_at
            }
        return out


def _judged(view: AttemptView, sealed: Record, strict: bool) -> tuple[_Again, list[GateResult]]:
    """Every gate of the sealed result judged again (or taken as recorded, named); the code (or
    diff) a code task's check extracts again must be the one whose recorded sandbox run it is
    given."""
    again = _Again(view, sealed, _control_plan(view, sealed), SandboxReplay(view))
    rp = again.rp
    out: list[GateResult] = []
    for g in view.result.gates:
        if g.gate == "gate-files":
            continue
        if g.level is None:
            raise NotKept(f"gate {g.key}: no reasoning level")
        gid, ctx, gate, sha = again.gate_of(g)
        rp.claim(g, f"{CONTROL}-" if g.gate.startswith(f"{CONTROL}-") else "", gid)
        if isinstance(ctx, QualityContext):
            ctx.run_code = rp.recorded_run
        sealed_as_run = g.model_copy(update={"gate": gid})
        run = replayer(gate, sha, ctx, sealed_as_run, rp)
        judged = regate(view, sealed_as_run, run, strict, g.key)
        for a, b in zip(g.attempts, judged.attempts, strict=False):
            for k in ("code", "diff"):
                if "run" in a.metrics and a.metrics.get(k) != b.metrics.get(k):
                    raise NotKept(f"gate {g.key} attempt {a.number}: its answer gives another {k}")
        out.append(judged.model_copy(update={"gate": g.gate, "stage": STAGE}))
    every_gate(view, again.ran())
    rp.all_claimed()
    return again, out


def rebuild(view: AttemptView) -> Record:
    """The quality record rebuilt from the signed copies and the gates judged again from the
    kept exchanges (`view.judged`)."""
    c = view.candidate
    if c is None:
        raise NotKept("the run signed no candidate copy to build the tasks' requests from")
    sealed = Record.model_validate(view.sealed)
    strict = same_code(view, sealed.check_code, sealed.declared_gate_files, STAGE)
    again, judged = _judged(view, sealed, strict)
    view.judged = judged
    gates, _ = pick(list(again.tasks.values()), c.stages.quality.tasks, "tasks", STAGE)
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
    record = summarised(ran, gates, judged, view.attempt, again.plan)
    out = record.model_dump(mode="json")
    return Record.model_validate({k: v for k, v in out.items() if k in view.sealed})
