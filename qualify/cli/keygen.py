"""`qualify keygen`: an ed25519 key pair for signing decisions (private key mode 0600)."""

from __future__ import annotations

import argparse
from pathlib import Path

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


def _keygen(args: argparse.Namespace) -> int:
    from qualify.evidence.signing import generate, keyid, load_public

    key, pub = generate(args.out.expanduser(), force=args.force)
    print(f"private key: {key} (mode 0600; keep it out of evidence and git)")
    print(f"public key:  {pub} (keyid {keyid(load_public(pub))[:16]})")
    return 0
