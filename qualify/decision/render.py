"""`qualify render RUN`: the decision document again, from the evidence alone.

A recorded decision is rendered from its `decision.json`. A run without one is previewed with
the same builder `conclude` uses (`derive`), waivers included, under the house given (or the
built-in defaults); nothing is written and no ticket changes. `publish` copies a signed decision
with the evidence its document links, so the published copy is the signed file and its links
resolve where it is published.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from qualify.decision import document
from qualify.decision.conclude import Setup, copy_path, latest, prepare
from qualify.decision.derive import derive
from qualify.errors import BadInput
from qualify.evidence.listing import evidence_listing
from qualify.evidence.store import RunDir
from qualify.present.reading import DECISION, RunView, read_run, run_view
from qualify.present.record import DecisionRecord


def preview(run: RunDir, s: Setup, view: RunView | None = None) -> DecisionRecord:
    """What the policy concludes from the evidence now (from `view`, else the run read now)."""
    view = view or read_run(run, evidence_listing(run), copy_path(run, None))
    basis, _ = prepare(view, s, len(run.attempt_dirs(DECISION)) + 1)
    basis.decided_at = "not decided (preview from evidence)"
    return derive(view, basis)


def render_run(run: RunDir, s: Setup, attempt: int | None = None) -> str:
    """The markdown of a recorded decision (the latest by default), or a preview if none."""
    record = latest(run, attempt)
    if record is None and attempt is not None:
        raise BadInput(
            f"run {run.run_id} has no decision attempt {attempt}",
            [f"--attempt: expected one of {[d.name for d in run.attempt_dirs(DECISION)]}"],
        )
    if record is not None:
        return document.render(run_view(run, record), record)
    view = read_run(run, evidence_listing(run), copy_path(run, None))
    record = preview(run, s, view)
    return document.render(view.count(record), record)


_LINK = re.compile(r"\]\(([^)\s#]+)\)")


def publish(run: RunDir, attempt: int, dest: Path) -> Path:
    """Publish a signed decision where its links work: the decision attempt (its document,
    plots, record and statement, byte for byte), its envelope, and every evidence file the
    document links, each at its place inside the run, under `dest/<run id>/`. The published
    `decision.md` is the signed one, and each of its relative links resolves there.
    Refused (BadInput) for an unsigned attempt or a link that leaves the run or is missing."""
    here = run.path / DECISION / f"attempt-{attempt:03d}"
    envelope = here.with_name(f"{here.name}.dsse.json")
    if not envelope.is_file():
        raise BadInput(
            f"decision attempt {attempt} of run {run.run_id} is not signed",
            [f"{envelope}: expected the DSSE envelope (qualify sign)"],
        )
    doc = here / "decision.md"
    files = {p for p in here.iterdir() if p.is_file()} | {envelope}
    root = run.path.resolve()
    for target in _LINK.findall(doc.read_text()):
        path = (here / target).resolve()
        if root not in path.parents or not path.is_file():
            raise BadInput(
                f"{doc} links {target}, which is not a file of the run",
                [f"{target}: expected a path inside {run.path}"],
            )
        files.add(path)
    out = dest / run.run_id
    for path in sorted(files):
        rel = path.resolve().relative_to(root)
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, out / rel)
    return out / DECISION / here.name / "decision.md"
