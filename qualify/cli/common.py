"""Options shared by several subcommands."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


def add_evidence(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--evidence",
        type=Path,
        default=Path(os.environ.get("QUALIFY_EVIDENCE", "evidence")),
        help="evidence root (default: ./evidence, or $QUALIFY_EVIDENCE)",
    )


def decision_keys(given: list[Path] | None, house_arg: Path | None) -> list[Ed25519PublicKey]:
    """The keys a signed run is verified with: each `--key`, else the decision keys the house
    (`--house`, or $QUALIFY_HOUSE) pins; BadInput when there is none."""
    from qualify.errors import BadInput
    from qualify.evidence.signing import load_public
    from qualify.trust.repository import require_house, snapshot

    if given:
        return [load_public(k) for k in given]
    house = require_house(house_arg)
    try:
        pinned = list(snapshot(house).keys.get("decision", {}).values())
    except BadInput as exc:
        raise BadInput(
            "no key to verify the runs with",
            [
                "--key: expected a public key, or --house with pinned decision keys "
                f"({exc.headline})"
            ],
        ) from None
    if not pinned:
        raise BadInput(
            "no key to verify the runs with",
            [f"--key: expected a public key; the house {house} pins no decision key"],
        )
    return [k.pub for k in pinned]
