"""`qualify alias`, `qualify house` and `qualify tickets` (the tickets failing gates open).

The house repository owns production: it holds the alias table, the house policy
(`house-policy.toml`) and the public keys it trusts to sign decisions and waivers. Keys change
only through `pin` and `unpin`, which log the change in `trust/trust.log.jsonl` and commit it,
on top of a trust folder that is exactly HEAD's and a house that reads consistently (else they
refuse, naming what is in the way). `house show` refuses what a decision or an alias change
would refuse.

Aliases move only with a verified promote decision. Each alias verb checks that the table is
the one its hash-chained log derives, at HEAD and in the working tree, and refuses (exit 1,
naming every break) rather than read or write on top of a table or log edited outside
`alias set`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    _register_alias(sub)
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
    _register_tickets(sub)


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
    from qualify.preflight.code import check_code
    from qualify.registry import specs

    print("# qualify's check code by stage; add earlier digests a house still accepts")
    print("[check_codes]")
    for stage in (n for n, s in specs().items() if s.check_code):
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


def _register_alias(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    s.set_defaults(func=_alias_set)
    show = verbs.add_parser("show", help="the current target of every alias")
    show.set_defaults(func=_alias_show)
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


def _alias_set(args: argparse.Namespace) -> int:
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


def _alias_show(args: argparse.Namespace) -> int:
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


def _register_tickets(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("tickets", help="tickets opened by failing required gates")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    ls = verbs.add_parser("list", help="open and closed tickets")
    ls.add_argument("--status", choices=["open", "closed"], help="only these")
    ls.set_defaults(func=_tickets_list)
    show = verbs.add_parser("show", help="one ticket, as written")
    show.add_argument("id")
    show.set_defaults(func=_tickets_show)
    close = verbs.add_parser("close", help="close a ticket, recording its durable fix")
    close.add_argument("id")
    close.add_argument("--fix", required=True, help="the durable fix, in a sentence or two")
    close.set_defaults(func=_tickets_close)
    waive = verbs.add_parser("waive", help="sign a waiver of an open ticket's inconclusive gate")
    waive.add_argument("id")
    waive.add_argument("--reason", required=True)
    waive.add_argument("--key", type=Path, required=True, help="ed25519 private key")
    waive.add_argument(
        "--house",
        type=Path,
        help="house repository to commit the waiver to, under waivers/<candidate>/ "
        "(default: $QUALIFY_HOUSE; the current directory is never taken as the house); "
        "waiving the same ticket again commits a renewal beside the earlier waiver",
    )
    waive.add_argument(
        "--run",
        type=Path,
        required=True,
        help="the run whose decision opened the ticket: the waiver binds its candidate's sha256 "
        "and its effective policy's digest",
    )
    waive.add_argument("--days", type=int, default=7, help="days until it expires (default 7)")
    waive.set_defaults(func=_tickets_waive)
    for v in (ls, show, close, waive):
        v.add_argument(
            "--dir", type=Path, help="tickets directory (default: tickets/ at the repo root)"
        )


def _tickets_store(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from qualify.tickets import TicketStore, default_dir

    return TicketStore(args.dir or default_dir())


def _tickets_list(args: argparse.Namespace) -> int:
    tickets = _tickets_store(args).all(args.status)
    for t in tickets:
        print(f"{t.status:6}  {t.id}  {t.gate}  ({len(t.attempts)} attempts)")
    if not tickets:
        print("no tickets")
    return 0


def _tickets_show(args: argparse.Namespace) -> int:
    print(_tickets_store(args).path_of(args.id).read_text(), end="")
    return 0


def _tickets_close(args: argparse.Namespace) -> int:
    t = _tickets_store(args).close(args.id, args.fix)
    print(f"{t.id}: closed ({t.closed})")
    return 0


def _tickets_waive(args: argparse.Namespace) -> int:
    from qualify.decision.conclude import latest
    from qualify.decision.waivers import grant
    from qualify.errors import BadInput
    from qualify.evidence.store import RunDir

    record = latest(RunDir(args.run))
    if record is None or record.candidate_sha256 is None:
        raise BadInput(f"{args.run} has no decision", ["--run: expected a run directory"])
    bound = {"candidate_sha256": record.candidate_sha256, "policy_sha256": record.policy_sha256}
    house, store = house_root(args), _tickets_store(args)
    out, commit = grant(store, house, args.id, args.reason, args.key, bound, args.days)
    renewal = " (a renewal, beside the earlier one)" if ".renewal-" in out.name else ""
    print(f"{out}: waiver of {args.id} for {args.days} days{renewal} (commit {commit[:12]})")
    print("  it counts only when signed by a waiver key the house pins, not the run's own key")
    return 0
