"""Preflight judged again from the exchanges an attempt kept (`verify`, `qualify.trust.rejudge`).

Every gate of the sealed result runs again offline with this installation's gate file of its id
and the stage's own check and `gate_context`, each request answered by the exchange its attempt
kept. A run of this check code (`check_code`) is held to every request, reason and figure; a
run of other code has each gate whose requests do not match taken as recorded, named
(docs/trust.md, "What this does not stop").
"""

from __future__ import annotations

from collections.abc import Callable

from qualify.evidence.kept import AttemptView, NotKept, differences
from qualify.gates.files import LoadedGate, default_gates_dir, load_gates
from qualify.gates.probe import GateContext
from qualify.preflight.code import check_code
from qualify.preflight.record import Record
from qualify.records import GateResult
from qualify.trust.replay import Replay, Unmatched, replay_gate

STAGE = "preflight"


def gate_files(stage: str) -> dict[str, LoadedGate]:
    """This installation's gate files of `stage`, by id (never a copy the run carries)."""
    gates, problems = load_gates(default_gates_dir(), stage)
    if problems:
        raise NotKept(f"this installation's {stage} gate files do not load: {problems[0]}")
    return {g.gate.id: g for g in gates}


def same_code(view: AttemptView, code: str | None, declared: dict[str, str], stage: str) -> bool:
    """True when the run names the check code this installation has (a gate that cannot be
    judged again is then a refusal); otherwise a note says which, and such a gate is taken as
    recorded. The gate files the run says the project declared must be this installation's (a
    refusal for a run of this check code; named in the notes for a run of other code)."""
    now = check_code(stage)
    strict = code == now
    if not strict:
        view.other_code(code, stage, now)
        if code is None:
            view.said.append("the record names no check_code (a run of earlier check code)")
        else:
            view.said.append(f"check_code {code[:12]}, this installation's {now[:12]}")
    files = {g: f.sha256 for g, f in gate_files(stage).items()}
    differ = sorted(g for g in set(files) | set(declared) if files.get(g) != declared.get(g))
    if differ and strict:
        raise NotKept(f"declared_gate_files differ from this installation's for {differ}")
    if differ:
        view.said.append(f"declared gate files other than this installation's: {differ}")
    return strict


class OtherGateFile(Unmatched):
    """The run judged the gate with another gate file than this installation's (its own
    `gates_dir`, or an earlier version of the file): taken as recorded, and named; the decision
    counts the stage only when every gate file it ran is the one the project declares."""


def every_gate(view: AttemptView, ran: set[tuple[str, str]]) -> None:
    """Every gate the record says ran (its gate files, at each level) has its result: a gate
    left out of a finished result is a refusal (`NotKept`)."""
    if any(g.gate == "gate-files" for g in view.result.gates):
        return  # stopped at its gate files: nothing ran
    have = {(g.gate, g.level or "") for g in view.result.gates}
    missing = sorted(f"{g}@{lv}" for g, lv in ran - have)
    if missing:
        raise NotKept(f"gates its record says ran have no result: {missing[:4]}")


def _same_attempts(sealed: GateResult, again: GateResult) -> None:
    """A run of this check code gives the same reasons and figures again (its time aside)."""
    for a, b in zip(sealed.attempts, again.attempts, strict=False):
        ma = {k: v for k, v in a.metrics.items() if k != "wall_s"}
        mb = {k: v for k, v in b.metrics.items() if k != "wall_s"}
        # Arrival times are kept to the microsecond: a time computed from them again may differ
        # in its last digits (`rejudge.differences` holds figures to the same tolerance).
        moved = differences(ma, mb) + sorted(set(mb) - set(ma))
        if a.reasons != b.reasons or moved:
            what = "reasons" if a.reasons != b.reasons else f"figures ({', '.join(moved[:3])})"
            raise Unmatched(f"attempt {a.number}'s {what} differ from the ones its check gives")


def regate(
    view: AttemptView,
    sealed: GateResult,
    run: Callable[[], GateResult],
    strict: bool,
    key: str | None = None,
) -> GateResult:
    """`sealed` judged again (`run`); a gate that cannot be is a refusal (`strict`: a run of
    this check code) or the sealed gate, named (`key`, else its own) as taken from the record."""
    key = key or sealed.key
    try:
        again = run()
        if strict:
            _same_attempts(sealed, again)
        return again
    except OtherGateFile as exc:
        view.trust(f"gate {key} ({exc})")
        return sealed
    except Unmatched as exc:
        if strict:
            raise NotKept(f"gate {key}: {exc}") from None
        view.trust(f"gate {key} (not judged again: {exc})")
        return sealed


def replayer(
    gate: LoadedGate | None, recorded: str | None, ctx: GateContext, sealed: GateResult, rp: Replay
) -> Callable[[], GateResult]:
    """The gate run again over its kept exchanges; `Unmatched` when the run judged it with
    another gate file than this installation's (`recorded`: the sha256 the run recorded)."""

    def run() -> GateResult:
        if gate is None or recorded != gate.sha256:
            raise OtherGateFile(
                f"judged with another gate file than this installation's {sealed.gate}"
            )
        return replay_gate(gate, ctx, sealed, rp)

    return run


def rebuild(view: AttemptView) -> Record:
    """The preflight record rebuilt from the signed candidate copy, its gates judged again from
    the kept exchanges (`view.judged`)."""
    from qualify.preflight.stage import allowances, gate_context

    c = view.candidate
    if c is None:
        raise NotKept("the run signed no candidate copy to build the gates' requests from")
    sealed = Record.model_validate(view.sealed)
    strict = same_code(view, sealed.check_code, sealed.declared_gate_files, STAGE)
    files = gate_files(STAGE)
    rp = Replay(view)
    judged: list[GateResult] = []
    for g in view.result.gates:
        if g.gate == "gate-files":
            continue
        if g.level not in c.reasoning:
            raise NotKept(f"gate {g.key}: level {g.level!r} is not one of the candidate's")
        rp.claim(g, "", g.gate)
        ctx = gate_context(c, g.level, rp, rp.keep(), rp.write, default_gates_dir())
        run = replayer(files.get(g.gate), sealed.gate_files.get(g.gate), ctx, g, rp)
        judged.append(regate(view, g, run, strict))
    every_gate(view, {(g, lv) for g in sealed.gate_files for lv in c.reasoning})
    rp.all_claimed()
    view.judged = judged
    update: dict[str, object] = {"levels": list(c.reasoning)}
    if "reasoning_allowance" in view.sealed:  # a record of an earlier form has none
        update["reasoning_allowance"] = allowances(c)
    return sealed.model_copy(update=update)
