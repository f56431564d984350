"""`qualify render RUN`: the decision document again, from the evidence alone.

A recorded decision is rendered from its `decision.json`. A run without one is previewed with
the same builder `conclude` uses (`derive`), waivers included, under the house given (or the
built-in defaults); nothing is written and no ticket changes.
"""

from __future__ import annotations

from qualify.decision import document
from qualify.decision.conclude import Setup, latest, prepare
from qualify.decision.derive import derive
from qualify.decision.reading import DECISION, evidence_listing, run_info
from qualify.decision.record import DecisionRecord
from qualify.errors import BadInput
from qualify.evidence.store import RunDir


def preview(run: RunDir, s: Setup) -> DecisionRecord:
    """What the policy concludes from the evidence now."""
    n = len(run.attempt_dirs(DECISION)) + 1
    prep = prepare(run, s, n)
    prep.basis.decided_at = "not decided (preview from evidence)"
    record = derive(run, evidence_listing(run), run_info(run), prep.basis)
    return record


def render_run(run: RunDir, s: Setup, attempt: int | None = None) -> str:
    """The markdown of a recorded decision (the latest by default), or a preview if none."""
    record = latest(run, attempt)
    if record is None and attempt is not None:
        raise BadInput(
            f"run {run.run_id} has no decision attempt {attempt}",
            [f"--attempt: expected one of {[d.name for d in run.attempt_dirs(DECISION)]}"],
        )
    return document.render(run, record or preview(run, s), run_info(run))
