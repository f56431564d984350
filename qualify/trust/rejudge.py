"""Every stage judged again offline, from what its attempts kept, by `verify`.

A stage's parts hold its `rebuild(view)` (`qualify.registry.rebuild_of`): it derives, from the
raw exchanges and samples one sealed attempt kept (`qualify.evidence.kept.AttemptView`), the
record its judges read, or raises `NotKept` when the attempt did not keep what that needs. It is
the function the stage was judged with when it finished (`qualify.stage.finish`): there is one
way of judging a stage, run twice. Here:

- a probe stage's rebuild (preflight, quality) runs the stage's own checks again against the
  kept exchanges and sets the gates they give (`AttemptView.judged`); otherwise the stage's gate
  files, the project's own as this installation ships them (never a copy the run carries),
  judge the rebuilt data under the signed thresholds (`qualify.gates.runner.judge_stage`); a
  gate whose verdict differs from the sealed `result.json`, or that one side has and the other
  lacks, is a refusal naming stage, gate and both verdicts;
- every figure `result.json` records is compared with the one its kept files give; each
  difference is a refusal naming the stage and the field (`lanes.candidate.figure.decode_tok_s`).

What a rebuild cannot take from the kept files (the sandbox run of a quality task's code, which
`verify` never runs) it takes from the sealed record and says so (`view.trusted`): those are
named in the verify report's notes and in docs/trust.md.
"""

from __future__ import annotations

from pathlib import Path

from qualify.candidate import Candidate
from qualify.evidence.kept import AttemptView, NotKept, as_table, differences, short, value_at
from qualify.evidence.store import RESULT
from qualify.gates.thresholds import Thresholds
from qualify.present.reading import RunView
from qualify.registry import rebuild_of, specs, stage_names


def rejudged() -> tuple[str, ...]:
    """The stages whose verdicts `verify` derives again from their kept exchanges: every
    registered stage whose parts hold a `rebuild`, in the registry's order (a stage judged again
    over its whole run, identity, is its parts' `again`)."""
    return tuple(n for n in stage_names() if rebuild_of(n) is not None)


# -- judging again --------------------------------------------------------------------------------


def rejudge_attempt(view: AttemptView, gates_dir: Path, thresholds: Thresholds) -> list[str]:
    """The problems of one sealed attempt judged again from its exchanges (empty: it holds)."""
    from qualify.gates.files import load_gates
    from qualify.gates.runner import judge_stage

    fn = rebuild_of(view.stage)
    where = f"{view.attempt}/{RESULT}"
    if fn is None or view.result.status != "finished":
        return []
    if not view.result.data and not view.result.gates:  # it claims nothing (`finish`)
        return []
    try:
        rebuilt = as_table(fn(view))
    except NotKept as exc:
        return [f"{where}: cannot be judged again from the exchanges it kept: {exc}"]
    problems, most = [], 6
    diff = differences(view.sealed, rebuilt)
    for path in diff[:most]:
        problems.append(
            f"{where}: data.{path} is {short(value_at(view.sealed, path))}, its exchanges give "
            f"{short(value_at(rebuilt, path))}"
        )
    if len(diff) > most:
        problems.append(f"{where}: {len(diff) - most} more fields differ from its exchanges")
    if view.judged is not None:
        again = view.judged
    else:
        again, _load_problems = judge_stage(view.stage, gates_dir, rebuilt, thresholds)
    signed, judged = (  # by each gate's name within its stage, with its level: `garble@off`
        {g.gate + (f"@{g.level}" if g.level else ""): g.verdict.value for g in gates}
        for gates in ([g for g in view.result.gates if g.gate != "gate-files"], again)
    )
    checks = {g.gate.id: g.gate.check for g in load_gates(gates_dir, view.stage)[0]}
    for gate in sorted(set(judged) - set(signed)):
        why = view.earlier.get(checks.get(gate.split("@", 1)[0], ""))
        # The run records no list of the gate files it judged with, so a gate file newer than
        # the run cannot be told from a gate left out of its result: named, not judged.
        view.said.append(
            f"no gate {view.stage}/{gate}: {why}"
            if why is not None
            else f"gate {view.stage}/{gate} is not in the sealed result (judged now: "
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
    view: RunView,
    thresholds: Thresholds,
    signed: dict[str, str],
    accepted: dict[str, list[str]] | None = None,
) -> tuple[list[str], list[str]]:
    """Every registered stage judged again from what it kept, with the project's gate files:
    over the whole run (its parts' `again`: identity), or every finished attempt of a re-judged
    stage from its signed files (`signed`: each file's sha256); a stage that ran with neither is
    a note saying why (its spec's `unjudged`): `(problems, notes)`."""
    from qualify.gates.files import default_gates_dir

    control = control_in_run(view, signed)
    problems: list[str] = []
    notes: list[str] = []
    ran = {a.partition("/")[0] for a in view.listing.attempts()}
    for name, spec in specs().items():
        if spec.loaded.again is not None:
            more, said = spec.loaded.again(view, thresholds)
            problems, notes = problems + more, notes + said
        elif spec.loaded.rebuild is None and name in ran:
            why = spec.unjudged or "its spec states no reason"
            notes.append(f"{name}: not judged again from its kept exchanges: {why}")
    stages = rejudged()
    found = [a for s in stages for a in view.attempts.get(s, []) if a.result is not None]
    for a in sorted(found, key=lambda a: f"{a.stage}/{a.dir.name}"):
        assert a.result is not None
        rel = f"{a.stage}/{a.dir.name}"
        files, cand = view.listing.files, view.candidate
        seen = AttemptView(view.run.path, rel, files, a.result, cand, control, accepted=accepted)
        problems += rejudge_attempt(seen, default_gates_dir(), thresholds)
        if a.result.status == "finished":
            taken = f"; taken as recorded (not kept raw): {'; '.join(seen.trusted)}"
            notes.append(f"{rel}: judged again from its exchanges{taken if seen.trusted else ''}")
            notes += [f"{rel}: {n}" for n in seen.said]
    return problems, notes


def control_in_run(view: RunView, files: dict[str, str]) -> Candidate | None:
    """The control as the run loaded it: its signed copy (`control.toml`, beside the candidate
    copy) applied to the signed candidate copy it extends; None when the run signed none or it
    does not load."""
    from qualify.candidate import load_candidate
    from qualify.errors import BadInput

    run, copy = view.run.path, view.copy
    if copy is None:
        return None
    ctl = f"{Path(copy).parent.as_posix()}/control.toml"
    if ctl not in files or copy not in files:
        return None
    try:
        return load_candidate(run / ctl, base=run / copy).candidate
    except (OSError, ValueError, BadInput):
        return None
