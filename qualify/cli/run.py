"""`qualify run CANDIDATE`: the whole pipeline."""

from __future__ import annotations

import argparse

from qualify.cli.common import add_evidence


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("run", help="qualify a candidate: every stage, evidence, decision")
    p.add_argument("candidate", help="candidate TOML file")
    p.add_argument(
        "--plan",
        action="store_true",
        help="dry run: print every request each stage would send, send none, write no evidence",
    )
    p.add_argument("--resume", metavar="RUN", help="continue RUN, skipping finished stages")
    p.add_argument("--key", help="ed25519 private key to sign the decision with")
    p.add_argument(
        "--house",
        help="house repository whose policy (at HEAD) the run is judged and decided under "
        "(default: $QUALIFY_HOUSE; without either, the built-in default policy)",
    )
    add_evidence(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from qualify.pipeline import execute

    if args.plan:
        import sys

        from qualify.pipeline import plan
        from qualify.plan import print_plan

        p = plan(args.candidate)
        print_plan(p.loaded, p.control, p.stages, sys.stdout)
        return 0

    return execute(
        args.candidate, args.evidence, resume=args.resume, key=args.key, house=args.house
    )
