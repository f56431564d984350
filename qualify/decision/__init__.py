"""The decision: policy over every verdict, the rendered document, the signature.

`conclude(run, key)` is what `qualify run` calls after the stages; `render_run` re-renders a
decision from evidence alone; `verify` checks a signed decision against the files on disk.
"""

from __future__ import annotations

from qualify.decision.conclude import conclude, latest, sign
from qualify.decision.model import DecisionRecord, Evaluation, GateOutcome
from qualify.decision.render import preview, render_run
from qualify.decision.verify import VerifyReport, verify

Decision = DecisionRecord

__all__ = [
    "Decision",
    "DecisionRecord",
    "Evaluation",
    "GateOutcome",
    "VerifyReport",
    "conclude",
    "latest",
    "preview",
    "render_run",
    "sign",
    "verify",
]
