"""The code a probe stage's requests and verdicts come from, by digest.

Each preflight and quality attempt records `check_code(stage)` in its record, so `verify` can
tell a run of this installation's check code (every request it sends again must be the one kept)
from a run of other code (`qualify.preflight.rebuild`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path


def check_code(stage: str) -> str:
    """sha256 over the source of the code `stage`'s checks run (its spec's `check_code`: its
    checks, how their requests are built and run, how answers are read), file by file."""
    import qualify
    from qualify.registry import specs

    root = Path(qualify.__file__).resolve().parent
    h = hashlib.sha256()
    for rel in specs()[stage].check_code:
        p = root / rel
        for f in sorted(p.glob("*.py")) if p.is_dir() else [p]:
            h.update(f"{f.relative_to(root).as_posix()}\0".encode())
            h.update(hashlib.sha256(f.read_bytes()).hexdigest().encode())
    return h.hexdigest()
