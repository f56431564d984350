"""The parts of the quality stage's record computed from its gates (see docs/quality.md): one
line of totals per lane and level (`quality: 36/36 at low`), a table of tasks by attempts, the
budgets, the suite's scope in one sentence, and the evidence of every failing attempt."""

from __future__ import annotations

from typing import get_args

from qualify.gates.files import LoadedGate
from qualify.quality.record import Failure, Outcome, Record, TaskBudget, TaskRow
from qualify.quality.tasks import TaskParams, budget
from qualify.records import AttemptRecord, GateResult, Verdict

KINDS = {
    "diff_edit": "unified-diff editing",
    "python_code": "Python fixes run in a sandbox",
    "recall": "multi-turn recall",
    "tool_choice": "typed tool choice from plain words",
    "json_answer": "exact JSON answers",
    "bullets": "exact-format lists",
    "ordered_steps": "ordered operational plans",
}
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
SAID: dict[str, str] = {"cut": "cut by the budget"}  # each other outcome as named


def task_budgets(gates: list[LoadedGate], scale: float) -> list[TaskBudget]:
    """Each task's declared budgets and the budgets sent (after the candidate's scale)."""
    rows = []
    for g in gates:
        p = g.params
        assert isinstance(p, TaskParams)
        b = budget(p, scale)
        rows.append(
            TaskBudget(
                task=g.gate.id,
                check=g.gate.check,
                description=g.gate.description,
                attempts=g.gate.attempts,
                visible_tokens=p.visible_tokens,
                reasoning_tokens=p.reasoning_tokens,
                visible_budget=b.visible,
                reasoning_budget=b.reasoning,
                max_tokens=b.max_tokens,
            )
        )
    return rows


def budget_lines(rows: list[TaskBudget], scale: float) -> list[str]:
    head = f"quality budgets (declared, then sent at scale {scale:g}):"
    return [head] + [
        f"  {r.task}: {r.visible_tokens} visible + {r.reasoning_tokens} reasoning "
        f"-> max_tokens {r.max_tokens} ({r.visible_budget} + {r.reasoning_budget}), "
        f"{r.attempts} attempts"
        for r in rows
    ]


def scope(gates: list[LoadedGate], levels: list[str]) -> str:
    kinds = sorted({KINDS.get(g.gate.check, g.gate.check) for g in gates})
    attempts = sorted({g.gate.attempts for g in gates})
    each = "/".join(map(str, attempts))
    return (
        f"{len(gates)} agent-shaped tasks written for this project ({', '.join(kinds)}), "
        f"{each} attempts each at every reasoning level ({', '.join(levels)}), every attempt "
        "must pass; a bounded local slice, not a claim of general benchmark quality."
    )


def outcome_of(a: AttemptRecord) -> Outcome:
    """The outcome the task's probe named (`metrics["outcome"]`), else the one its verdict
    implies."""
    found = a.metrics.get("outcome")
    if found in OUTCOMES:
        return found
    implied: dict[Verdict, Outcome] = {Verdict.PASS: "pass", Verdict.ERROR: "error"}
    return implied.get(a.verdict, "wrong")


def summarise(
    ran: Record,
    results: list[tuple[str, str, GateResult]],
    declared: dict[str, int],
    evidence_prefix: str,
) -> Record:
    """`ran` with its totals, lines, table and failures, from `(lane, task, result)` of the
    quality tasks."""
    table, failures = [], []
    totals: dict[str, dict[str, dict[Outcome, int]]] = {}
    for lane, task, r in results:
        level = r.level or "default"
        outs = [outcome_of(a) for a in r.attempts]
        outs += ["not run"] * (declared[task] - len(outs))
        table.append(TaskRow(task=task, lane=lane, level=level, attempts=outs))
        counts = totals.setdefault(lane, {}).setdefault(level, dict.fromkeys(OUTCOMES, 0))
        for o in outs:
            counts[o] += 1
        failures += [
            Failure(
                task=task,
                lane=lane,
                level=level,
                attempt=a.number,
                outcome=outcome_of(a),
                reasons=a.reasons,
                evidence=[f"{evidence_prefix}/{f}" for f in a.files],
            )
            for a in r.attempts
            if a.verdict is not Verdict.PASS
        ]
    lines = []
    for lane, levels in totals.items():
        for level, c in levels.items():
            n = sum(c.values())
            name = "quality" if lane == "candidate" else f"quality ({lane})"
            rest = ", ".join(f"{c[o]} {SAID.get(o, o)}" for o in OUTCOMES[1:] if c[o])
            lines.append(f"{name}: {c['pass']}/{n} at {level}" + (f" ({rest})" if rest else ""))
    return ran.model_copy(
        update={"totals": totals, "lines": lines, "table": table, "failures": failures}
    )
