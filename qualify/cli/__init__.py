"""The command line: each module registers its subcommands (`register(subparsers)`), in order."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from qualify._version import __version__
from qualify.errors import QualifyError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

COMMANDS = ("init", "run", "sign", "signed", "house", "local_server")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="qualify", description="Qualify an LLM serving recipe for production."
    )
    p.add_argument("--version", action="version", version=f"qualify {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"qualify.cli.{name}").register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except QualifyError as exc:
        if args.debug:
            traceback.print_exc()
        print(str(exc), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("qualify: interrupted", file=sys.stderr)
        return 3


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
