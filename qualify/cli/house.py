"""`qualify house init|show|pin|unpin`: the house repository that owns production.

The house holds the alias table, the house policy (`house-policy.toml`) and the public keys it
trusts to sign decisions and waivers. Keys change only through `pin` and `unpin`, which log
the change in `trust/trust.log.jsonl` and commit it, on top of a trust folder that is exactly
HEAD's and a house that reads consistently (else they refuse, naming what is in the way).
`show` refuses what a decision or an alias change would refuse.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("house", help="the house repository: policy and pinned keys")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    init = verbs.add_parser("init", help="create a house repository with the default policy")
    init.add_argument("dir", type=Path)
    init.add_argument(
        "--policy",
        type=Path,
        help="start from this house policy file ('example': the example policy qualify ships)",
    )
    init.set_defaults(func=_init)
    show = verbs.add_parser("show", help="the house policy and the pinned keys, at HEAD")
    show.set_defaults(func=_show)
    pin = verbs.add_parser("pin", help="trust a public key for a role (logged, committed)")
    pin.add_argument("role", choices=["decision", "waiver"])
    pin.add_argument("pub", type=Path, help="ed25519 public key (PEM)")
    pin.add_argument("--name", required=True, help="a name for the key, e.g. ci or alice")
    pin.add_argument("--why", required=True, help="why this key is trusted (in the log)")
    pin.set_defaults(func=_pin)
    unpin = verbs.add_parser("unpin", help="stop trusting a key (logged, committed)")
    unpin.add_argument("role", choices=["decision", "waiver"])
    unpin.add_argument("name")
    unpin.add_argument("--why", required=True)
    unpin.set_defaults(func=_unpin)
    codes = verbs.add_parser(
        "check-codes",
        help="this installation's check code digests, as the house policy's [check_codes] table",
    )
    codes.set_defaults(func=_check_codes)
    for v in (show, pin, unpin):
        v.add_argument(
            "--house",
            type=Path,
            help="house repository (default: $QUALIFY_HOUSE; the current directory is never "
            "taken as the house)",
        )


def add_house(p: argparse.ArgumentParser, what: str) -> None:
    """`--house DIR` for commands that decide: the policy and waiver approvers at its HEAD."""
    p.add_argument(
        "--house",
        type=Path,
        help=f"house repository whose policy (at HEAD) {what} (default: $QUALIFY_HOUSE; "
        "without either, the built-in default policy and no waiver approvers)",
    )


def setup_of(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from qualify.decision.conclude import setup
    from qualify.trust.repository import house_dir

    return setup(house_dir(args.house))


def house_root(args: argparse.Namespace) -> Path:
    from qualify.trust.repository import require_house

    return require_house(args.house)


def _init(args: argparse.Namespace) -> int:
    from qualify import assets
    from qualify.trust.repository import init

    start = assets.example_house_policy() if str(args.policy) == "example" else args.policy
    policy, commit = init(args.dir, start)
    state = f"committed {commit[:12]}" if commit else "already committed"
    print(f"{policy}: house policy ({state})")
    print(f"next: qualify house pin decision KEY.pub --name NAME --why WHY --house {args.dir}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from qualify.trust.repository import repo_of, snapshot, uncommitted

    root = house_root(args)
    snap = snapshot(root)  # refuses whatever the house would refuse (exit 1, naming it)
    rules = snap.policy.rules()
    print(f"house {snap.root} at {str(snap.commit)[:12]}: policy sha256 {rules.sha256}")
    for line in rules.lines():
        print(f"  {line}")
    for d in snap.policy.accept:
        print(f"  also accepts decisions made under {d}")
    for role, keys in snap.keys.items():
        names = ", ".join(f"{k.name} ({k.keyid[:16]})" for k in keys.values()) or "none"
        print(f"{role} keys: {names}")
    for path in uncommitted(repo_of(root), ["."]):
        print(f"  note: {path} is not committed and counts for nothing (trust is read at HEAD)")
    return 0


def _check_codes(args: argparse.Namespace) -> int:
    """The digests a house lists to accept records of this installation's check code."""
    from qualify.preflight.code import check_code, coded

    print("# qualify's check code by stage; add earlier digests a house still accepts")
    print("[check_codes]")
    for stage in coded():
        print(f'{stage} = ["{check_code(stage)}"]')
    return 0


def _pin(args: argparse.Namespace) -> int:
    from qualify.trust.repository import pin

    kid, commit = pin(house_root(args), args.role, args.pub, args.name, args.why)
    print(f"pinned {args.role} key {args.name} ({kid[:16]}), commit {commit[:12]}")
    return 0


def _unpin(args: argparse.Namespace) -> int:
    from qualify.trust.repository import unpin

    commit = unpin(house_root(args), args.role, args.name, args.why)
    print(f"unpinned {args.role} key {args.name}, commit {commit[:12]}")
    return 0
