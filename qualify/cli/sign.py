"""`qualify sign RUN --key K`: sign a run's decision (deciding anew if the evidence grew).

The envelope covers the decision attempt and every evidence file of the run, the in-run
candidate copy included, so a signed promote can move the alias its candidate names (`qualify
alias set`, with a key the house pins). A decision is signed once: when the latest decision
still covers the run and is already signed by another key, nothing is signed and the command
says so, naming both keys (exit 2)."""

from __future__ import annotations

import argparse
from pathlib import Path

from qualify.cli.common import add_evidence
from qualify.cli.house import add_house, setup_of


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "sign",
        help="sign the decision of a finished run (once; a decision already signed by another "
        "key is refused)",
    )
    p.add_argument("run", help="run directory or run id")
    p.add_argument("--key", type=Path, required=True, help="ed25519 private key")
    add_evidence(p)
    add_house(p, "a new decision is made under, when the evidence grew")
    p.set_defaults(func=_sign)


def _sign(args: argparse.Namespace) -> int:
    from qualify.decision.conclude import sign
    from qualify.evidence.store import EvidenceStore

    run = EvidenceStore(args.evidence).open_run(args.run)
    envelope, record = sign(run, args.key, setup_of(args))
    print(f"{envelope}: {record.headline} (decision attempt {record.attempt})")
    return 0
