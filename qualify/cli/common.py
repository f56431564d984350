"""Options shared by several subcommands."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def add_evidence(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--evidence",
        type=Path,
        default=Path(os.environ.get("QUALIFY_EVIDENCE", "evidence")),
        help="evidence root (default: ./evidence, or $QUALIFY_EVIDENCE)",
    )
