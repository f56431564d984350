"""GPU telemetry: a background sampler of free memory and power, through every stage."""

from __future__ import annotations

from typing import Any

from qualify.candidate import LoadedCandidate
from qualify.evidence import RunDir


def start_sampler(loaded: LoadedCandidate, run: RunDir) -> Any:
    """The sampler for this candidate's telemetry source, started; None when there is none."""
    return None
