"""`qualify verify ENVELOPE --key PUB [--house DIR]`: the envelope and its signature, the run
exactly as sealed, then the verdict derived again from the signed evidence under the signed
policy (0 or 1). A waiver the decision counts is judged again with the waiver keys the house
pins (`--house`, or $QUALIFY_HOUSE), never with a key the record carries; without a house such
a decision does not verify. With `--house` and no `--key`, the house's pinned decision keys are
tried. `qualify alias set` verifies with the keys the house pins."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("verify", help="verify a signed decision against the files on disk")
    p.add_argument("envelope", type=Path, help="decision envelope (decision/attempt-NNN.dsse.json)")
    p.add_argument("--key", type=Path, help="ed25519 public key (default: the house's pinned ones)")
    p.add_argument("--run", type=Path, help="run directory (default: the envelope's run)")
    p.add_argument(
        "--house",
        type=Path,
        help="house repository whose pinned waiver keys (at HEAD) judge the waivers again "
        "(default: $QUALIFY_HOUSE)",
    )
    p.set_defaults(func=_verify)


def _verify(args: argparse.Namespace) -> int:
    from qualify.decision.verify import verify
    from qualify.decision.waivers import pinned
    from qualify.errors import BadInput
    from qualify.evidence.signing import load_public
    from qualify.trust.repository import house_dir, snapshot

    root = house_dir(args.house)
    snap = snapshot(root) if root is not None else None
    approvers = pinned(snap, snap.policy.waivers) if snap is not None else None
    if args.key is not None:
        keys = [load_public(args.key)]
    elif snap is not None and snap.keys.get("decision"):
        keys = [k.pub for k in snap.keys["decision"].values()]
    else:
        raise BadInput(
            "no key to verify with",
            ["--key: expected an ed25519 public key (or --house DIR pinning decision keys)"],
        )
    reports = [verify(args.envelope, k, args.run, approvers) for k in keys]
    report = next((r for r in reports if r.statement is not None), reports[0])
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
