"""`qualify tickets list|show|close|waive`: the tickets failing gates open."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("tickets", help="tickets opened by failing required gates")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    ls = verbs.add_parser("list", help="open and closed tickets")
    ls.add_argument("--status", choices=["open", "closed"], help="only these")
    ls.set_defaults(func=_list)
    show = verbs.add_parser("show", help="one ticket, as written")
    show.add_argument("id")
    show.set_defaults(func=_show)
    close = verbs.add_parser("close", help="close a ticket, recording its durable fix")
    close.add_argument("id")
    close.add_argument("--fix", required=True, help="the durable fix, in a sentence or two")
    close.set_defaults(func=_close)
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
    waive.set_defaults(func=_waive)
    for v in (ls, show, close, waive):
        v.add_argument(
            "--dir", type=Path, help="tickets directory (default: tickets/ at the repo root)"
        )


def _store(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from qualify.tickets import TicketStore, default_dir

    return TicketStore(args.dir or default_dir())


def _list(args: argparse.Namespace) -> int:
    tickets = _store(args).all(args.status)
    for t in tickets:
        print(f"{t.status:6}  {t.id}  {t.gate}  ({len(t.attempts)} attempts)")
    if not tickets:
        print("no tickets")
    return 0


def _show(args: argparse.Namespace) -> int:
    print(_store(args).path_of(args.id).read_text(), end="")
    return 0


def _close(args: argparse.Namespace) -> int:
    t = _store(args).close(args.id, args.fix)
    print(f"{t.id}: closed ({t.closed})")
    return 0


def _waive(args: argparse.Namespace) -> int:
    from qualify.decision.conclude import latest
    from qualify.decision.waivers import grant
    from qualify.errors import BadInput
    from qualify.evidence.store import RunDir

    record = latest(RunDir(args.run))
    if record is None or record.candidate_sha256 is None:
        raise BadInput(f"{args.run} has no decision", ["--run: expected a run directory"])
    bound = {"candidate_sha256": record.candidate_sha256, "policy_sha256": record.policy_sha256}
    from qualify.trust.repository import require_house

    house = require_house(args.house)
    out, commit = grant(_store(args), house, args.id, args.reason, args.key, bound, args.days)
    renewal = " (a renewal, beside the earlier one)" if ".renewal-" in out.name else ""
    print(f"{out}: waiver of {args.id} for {args.days} days{renewal} (commit {commit[:12]})")
    print("  it counts only when signed by a waiver key the house pins, not the run's own key")
    return 0
