"""`qualify verify ENVELOPE --key PUB`: the signature, every digest it names, then the verdict
derived again from the signed evidence under the signed policy (0 or 1). An offline check with
the key given; `qualify alias set` verifies with the keys the house pins instead."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("verify", help="verify a signed decision against the files on disk")
    p.add_argument("envelope", type=Path, help="decision envelope (decision/attempt-NNN.dsse.json)")
    p.add_argument("--key", type=Path, required=True, help="ed25519 public key")
    p.add_argument("--run", type=Path, help="run directory (default: the envelope's run)")
    p.set_defaults(func=_verify)


def _verify(args: argparse.Namespace) -> int:
    from qualify.decision.signing import load_public
    from qualify.decision.verify import verify

    report = verify(args.envelope, load_public(args.key), args.run)
    for note in report.notes:
        print(f"  note: {note}")
    if not report.ok:
        print(f"qualify: {args.envelope} does NOT verify", file=sys.stderr)
        for problem in report.problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    pred = report.predicate
    print(
        f"{args.envelope}: verified: {pred.get('headline')} for {pred.get('candidate')} "
        f"(run {pred.get('run_id')}), {report.subjects} subjects unchanged, the verdict "
        "derived again from them"
    )
    return 0
