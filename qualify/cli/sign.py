"""`qualify keygen|sign|verify`: the ed25519 key pair, the signed decision, its verification.

`sign` signs a run's decision (deciding anew if the evidence grew). The envelope covers the
decision attempt and every evidence file of the run, the in-run candidate copy included, so a
signed promote can move the alias its candidate names (`qualify alias set`, with a key the house
pins). A decision is signed once: when the latest decision still covers the run and is already
signed by another key, nothing is signed and the command says so, naming both keys (exit 2).

`verify` checks the envelope and its signature, the run exactly as sealed, then derives the
verdict again from the signed evidence under the signed policy (0 or 1). A waiver the decision
counts is judged again with the waiver keys the house pins (`--house`, or $QUALIFY_HOUSE), never
with a key the record carries; without a house such a decision does not verify. With `--house`
and no `--key`, the house's pinned decision keys are tried."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from qualify.cli import add_evidence
from qualify.cli.house import add_house, setup_of
from qualify.evidence.signing import DEFAULT_KEY


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("keygen", help="create an ed25519 key pair for signing decisions")
    p.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_KEY,
        help=f"path stem: writes STEM.key (0600) and STEM.pub (default {DEFAULT_KEY})",
    )
    p.add_argument("--force", action="store_true", help="replace an existing key pair")
    p.set_defaults(func=_keygen)
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


def _keygen(args: argparse.Namespace) -> int:
    from qualify.evidence.signing import generate, keyid, load_public

    key, pub = generate(args.out.expanduser(), force=args.force)
    print(f"private key: {key} (mode 0600; keep it out of evidence and git)")
    print(f"public key:  {pub} (keyid {keyid(load_public(pub))[:16]})")
    return 0


def _sign(args: argparse.Namespace) -> int:
    from qualify.decision.conclude import sign
    from qualify.evidence.store import EvidenceStore

    run = EvidenceStore(args.evidence).open_run(args.run)
    envelope, record = sign(run, args.key, setup_of(args))
    print(f"{envelope}: {record.headline} (decision attempt {record.attempt})")
    return 0


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
