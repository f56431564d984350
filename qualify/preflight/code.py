"""The code a probe stage's requests and verdicts come from, by digest.

Each preflight and quality attempt records `check_code(stage)` in its record, so `verify` can
tell a run of this installation's check code (every request it sends again must be the one kept)
from a run of other code (`qualify.preflight.rebuild`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

# The code a probe stage's requests and verdicts come from: its checks, how their requests are
# built and run, how answers are read. `check_code(stage)` is their digest, which each attempt
# records, so `verify` can tell a run of this code (every request must match) from an earlier one.
CHECK_CODE = {
    "preflight": (
        "preflight/checks",
        "preflight/budget.py",
        "gates/probe.py",
        "gates/runner.py",
        "httpclient/chat.py",
    ),
    "quality": (
        "quality/checks",
        "quality/tasks.py",
        "preflight/checks",
        "preflight/budget.py",
        "gates/probe.py",
        "gates/runner.py",
        "httpclient/chat.py",
    ),
    # How capacity judges each answer under load (degenerate, garble, JSON, tool calls).
    "capacity": (
        "capacity/answers.py",
        "httpclient/degenerate.py",
        "preflight/checks/text.py",
    ),
}


def check_code(stage: str) -> str:
    """sha256 over the source of the code `stage`'s checks run (`CHECK_CODE`), file by file."""
    import qualify

    root = Path(qualify.__file__).resolve().parent
    h = hashlib.sha256()
    for rel in CHECK_CODE[stage]:
        p = root / rel
        for f in sorted(p.glob("*.py")) if p.is_dir() else [p]:
            h.update(f"{f.relative_to(root).as_posix()}\0".encode())
            h.update(hashlib.sha256(f.read_bytes()).hexdigest().encode())
    return h.hexdigest()
