"""The decision document: `templates/decision.md.j2` rendered from evidence alone.

The first screen answers the reviewer: the verdict, the alias it gates, the hardware, the
headline figures, every blocking reason in one line with a link to the evidence file that shows
it, and what must change for the answer to change. The detail follows in seed 002's order.
Each failure is written once (`Once`) and referenced by its gate key after that; a table cell
never holds more than `CELL_MAX` characters. Links are relative to `decision/attempt-NNN/`,
where `decision.md` and its plots are written.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import jinja2

from qualify import assets
from qualify.ab.record import Record as AbRecord
from qualify.decision import blockers, causes, caveats, hardware, headline
from qualify.decision.alias_view import AliasView, alias_view
from qualify.present import plots
from qualify.present.reading import DECISION, RunView, record_of
from qualify.present.record import DecisionRecord, GateOutcome, StageOutcome
from qualify.present.wording import UP, Once, duration, number, quantity, table_cell
from qualify.records import StageRecord, Verdict
from qualify.registry import specs, stage_names

TEMPLATE = "decision.md.j2"


def _partial(name: str) -> str | None:
    """The source of a `stage/<name>` partial: the stage spec's `partial` file."""
    stage, _, rest = name.partition("/")
    spec = specs().get(rest) if stage == "stage" else None
    return spec.partial.read_text() if spec and spec.partial else None


def gate_summary(record: DecisionRecord) -> list[dict[str, str]]:
    """Per stage: how many gates passed, and the keys of the others with their status."""
    out = []
    for stage in dict.fromkeys(g.stage for g in record.evaluation.gates):
        mine = [g for g in record.evaluation.gates if g.stage == stage]
        passed = [
            g.status == "pass" or (g.status, g.verdict) == ("advisory", Verdict.PASS) for g in mine
        ]
        other = [
            f"{g.key.partition('/')[2]} ({g.status}"
            + (f" {g.verdict.value})" if g.status == "advisory" else ")")
            for g, p in zip(mine, passed, strict=True)
            if not p
        ]
        ok = sum(passed)
        if len(other) > 6:
            n = sum(g.status in ("blocks", "vetoes") for g in mine)
            rest = len(other) - n
            text = f"{n} block (listed by cause above)" + (f", {rest} other" if rest else "")
        else:
            text = ", ".join(other)
        out.append({"stage": stage, "passed": f"{ok}/{len(mine)}", "other": text})
    return out


def context(
    view: RunView, record: DecisionRecord, alias: AliasView | None = None
) -> dict[str, object]:
    """Everything the template shows, computed from the run as `record` counted it, the record
    and the alias it gates (read from the house when not given)."""
    run, records = view.run, view.records()
    stages = {s.stage: s for s in record.evaluation.stages}
    for name in stage_names():  # every registered stage: one never planned says why it is absent
        why = "not listed in stages.run"
        stages.setdefault(name, StageOutcome(stage=name, planned=False, ran=False, why_not=why))
    results = [v.result for v in view.stages.values() if v.result]
    times = [t for r in results for t in (r.started_at, r.ended_at)]
    once = Once()
    ab = record_of(records, "ab", AbRecord)
    groups = causes.group(record, causes.variable_of(ab.lanes if ab is not None else {}))
    rows = blockers.cause_rows(run, record, groups, once)  # each failure said once, first here
    here = run.path / DECISION / f"attempt-{record.attempt:03d}"  # decision.md and its plots
    gated = alias_view(view, record) if alias is None else alias
    aborted = "the run stopped before it finished; the cause is under Failed attempts"
    tickets = Counter(t.action for t in record.tickets)
    return (
        stage_sections(records, record.evaluation.gates)
        | headline.context(view, record, gated, stages, ab, groups)
        | hardware.context(view, record)
        | {
            "r": record,
            "up": UP,
            "stage": stages,
            "partials": [f"stage/{name}" for name, spec in specs().items() if spec.partial],
            # why a stage did not run, a stop reason shortened to its cause (said once above)
            "why_not": {
                k: aborted if "aborted" in (v.why_not or "") else v.why_not or "not run"
                for k, v in stages.items()
            },
            "window": (min(times), max(times)) if times else None,
            "causes": rows,
            "first_screen_causes": blockers.FIRST_SCREEN_CAUSES,
            "exit": blockers.exit_text(record, groups),
            "plot": {  # each plot by its template name: drawn into the decision attempt, or why not
                p.name.removesuffix(".png").replace("-", "_"): {
                    "name": p.name,
                    "title": p.title,
                    "drawn": (here / p.name).is_file(),
                    "missing": p.missing if p.empty else "not drawn: a preview draws no plots",
                }
                for p in plots.plan(run, records, view.stages)
            },
            "failed": blockers.failed_attempts(record, once),
            "caveats": caveats.caveats(view, record, once),
            "gate_summary": gate_summary(record),
            # the tickets as a table when few, else counted by what this decision did to them
            "tickets": {
                "table": len(record.tickets) <= blockers.FIRST_SCREEN_CAUSES,
                "summary": ", ".join(f"{n} {a}" for a, n in tickets.items()),
            },
            "record_written": (here / "decision.json").is_file(),
        }
    )


def stage_sections(
    records: Mapping[str, StageRecord], gates: list[GateOutcome]
) -> dict[str, object]:
    """What each registered stage's `section` (its spec's parts) gives the template, given the
    stage's typed record (None when it has none) and the decision's gates."""
    out: dict[str, object] = {}
    for name, spec in specs().items():
        if spec.loaded.section is not None:
            out |= spec.loaded.section(records.get(name), gates)
    return out


def environment() -> jinja2.Environment:
    """The template's environment: `QUALIFY_TEMPLATES` (else the installed templates), then each
    stage's partial as `stage/<name>`."""
    where = os.environ.get("QUALIFY_TEMPLATES")
    loader = jinja2.FileSystemLoader(Path(where) if where else assets.templates_dir())
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader([loader, jinja2.FunctionLoader(_partial)]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # markdown, not HTML
    )
    env.filters.update(num=number, dur=duration, value=quantity, cell=table_cell)
    return env


def render(view: RunView, record: DecisionRecord, alias: AliasView | None = None) -> str:
    """`decision.md` of `record`, from the run as it counted it (`view`)."""
    return environment().get_template(TEMPLATE).render(**context(view, record, alias))
