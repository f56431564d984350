"""The decision: policy over every verdict, the rendered document, the signature."""

from __future__ import annotations

from dataclasses import dataclass, field

from qualify.evidence import RunDir
from qualify.verdict import Verdict


@dataclass
class Decision:
    promote: bool
    reasons: list[str] = field(default_factory=list)


def conclude(run: RunDir, key: str | None) -> Decision:
    """Promote only if every stage's last attempt passed."""
    reasons = []
    for d in run.stage_dirs():
        last = run.last_result(d.name)
        if last is not None and last.verdict is not Verdict.PASS:
            reasons.append(f"{d.name}: {last.verdict.value}")
    return Decision(promote=not reasons, reasons=reasons)
