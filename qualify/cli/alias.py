"""`qualify alias set|show|history`: production aliases, gated by a verified promote decision.

Each verb checks that the table is the one its hash-chained log derives, at HEAD and in the
working tree, and refuses (exit 1, naming every break) rather than read or write on top of a
table or log edited outside `alias set`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from qualify.cli.house import house_root


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("alias", help="gated changes to production aliases")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    s = verbs.add_parser("set", help="point NAME at CANDIDATE, backed by a signed decision")
    s.add_argument("name", help="alias name, e.g. prod-chat (the candidate's [alias] name)")
    s.add_argument("candidate", type=Path, help="the candidate file, as it is now")
    s.add_argument("--decision", type=Path, required=True, help="signed decision envelope")
    s.add_argument(
        "--key",
        type=Path,
        help="only this public key, which must be pinned in the house (default: every pinned "
        "decision key)",
    )
    s.set_defaults(func=_set)
    show = verbs.add_parser("show", help="the current target of every alias")
    show.set_defaults(func=_show)
    hist = verbs.add_parser("history", help="every change, with the hash chain checked")
    hist.add_argument("name", nargs="?", help="only this alias")
    hist.set_defaults(func=_history)
    for v in (s, show, hist):
        v.add_argument(
            "--house",
            type=Path,
            help="house repository holding the alias table, the house policy and the pinned "
            "keys (default: $QUALIFY_HOUSE; the current directory is never taken as the house)",
        )


def _set(args: argparse.Namespace) -> int:
    from qualify.alias import set_alias

    change = set_alias(args.name, args.candidate, args.decision, house_root(args), args.key)
    if change.entry is None:
        print(f"{args.name}: already points at {change.new['candidate']} on this decision")
        return 0
    was = change.old["candidate"] if change.old else "nothing"
    print(f"{args.name}: {was} -> {change.new['candidate']} (commit {str(change.commit)[:12]})")
    print(f"  decision sha256 {change.new['decision_sha256']}, signed by {change.new['signer']}")
    print(f"  {change.new['headline']}")
    return 0


def _broken(st) -> int:  # type: ignore[no-untyped-def]
    print(f"qualify: the alias table of {st.root} is not bound to its log", file=sys.stderr)
    for b in st.problems:
        print(f"  {b}", file=sys.stderr)
    return 1


def _show(args: argparse.Namespace) -> int:
    from qualify.alias import state

    st = state(house_root(args))
    if st.problems:
        return _broken(st)
    if not st.aliases:
        print(f"{st.root}: no aliases")
    for name, t in sorted(st.aliases.items()):
        print(f"{name} -> {t.get('candidate')} (run {t.get('run_id')}, set {t.get('set_at')})")
        print(f"  candidate {t.get('candidate_path')} sha256 {t.get('candidate_sha256')}")
        print(f"  decision sha256 {t.get('decision_sha256')}")
    return 0


def _history(args: argparse.Namespace) -> int:
    from qualify.alias import state

    st = state(house_root(args))
    for e in st.entries:
        if args.name and e.get("alias") != args.name:
            continue
        old = (e.get("old") or {}).get("candidate", "nothing")
        new = (e.get("new") or {}).get("candidate")
        print(f"{e.get('seq')}. {e.get('at')} {e.get('alias')}: {old} -> {new}")
        print(f"   decision {e.get('decision_sha256')}  hash {str(e.get('hash'))[:16]}")
    if st.problems:
        return _broken(st)
    print(f"chain intact: {len(st.entries)} entries; the table is the one the log derives")
    return 0
