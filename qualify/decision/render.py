"""`qualify render RUN`: the decision document again, from the evidence alone."""

from __future__ import annotations

from qualify._version import __version__
from qualify.decision import document
from qualify.decision.policy import evaluate
from qualify.decision.reading import (
    DECISION,
    candidate_as_run,
    evidence_listing,
    run_info,
    stage_attempts,
    stage_names,
)
from qualify.decision.record import DecisionRecord
from qualify.decision.settings import Policy
from qualify.decision.signing import canonical, sha256_bytes
from qualify.errors import BadInput
from qualify.evidence.store import RunDir


def _record(run: RunDir, attempt: int | None) -> DecisionRecord | None:
    dirs = run.attempt_dirs(DECISION)
    if attempt is not None:
        dirs = [d for d in dirs if d.name == f"attempt-{attempt:03d}"]
        if not dirs:
            raise BadInput(
                f"run {run.run_id} has no decision attempt {attempt}",
                [f"--attempt: expected one of {[d.name for d in run.attempt_dirs(DECISION)]}"],
            )
    for d in reversed(dirs):
        f = d / "decision.json"
        if f.is_file():
            return DecisionRecord.model_validate_json(f.read_text())
    return None


def preview(run: RunDir) -> DecisionRecord:
    """What the policy concludes from the evidence now; nothing is written, no ticket changes."""
    info = run_info(run)
    cand = candidate_as_run(run, info)
    policy = cand.policy if cand is not None else Policy()
    planned = list(info.get("stages") or (cand.stages.run if cand else stage_names(run)))
    names = list(dict.fromkeys(planned + stage_names(run)))
    ev = evaluate(planned, {s: stage_attempts(run, s) for s in names}, policy)
    listing = evidence_listing(run)
    dump = policy.model_dump(mode="json")
    return DecisionRecord(
        run_id=run.run_id,
        candidate=str(info.get("candidate") or run.candidate_name),
        attempt=len(run.attempt_dirs(DECISION)) + 1,
        decision="promote" if ev.promote and not listing.integrity else "no-promote",
        decided_at="not decided (preview from evidence)",
        tool_version=__version__,
        evaluation=ev,
        policy=dump,
        policy_sha256=sha256_bytes(canonical(dump)),
        candidate_path=info.get("candidate_path"),
        candidate_sha256=info.get("candidate_sha256"),
        evidence_root=listing.root,
        evidence_files=len(listing.files),
        unsealed=listing.unsealed,
        integrity=listing.integrity,
    )


def render_run(run: RunDir, attempt: int | None = None) -> str:
    """The markdown of a recorded decision (the latest by default), or a preview if none."""
    record = _record(run, attempt) or preview(run)
    return document.render(run, record, run_info(run))
