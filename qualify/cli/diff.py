"""`qualify diff RUN_A RUN_B` (or `qualify diff RUN_B --against-alias NAME`): two signed
qualifications compared, each verified first. Exit 0: no regression beyond the house's margins;
1: a regression; 2: bad input (a run that is missing, unsigned, or does not verify)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from qualify.cli.common import add_evidence, decision_keys


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "diff", help="compare two signed qualifications: gates that changed, figures' deltas"
    )
    p.add_argument(
        "runs",
        nargs="+",
        type=Path,
        metavar="RUN",
        help="RUN_A RUN_B (A the baseline), or RUN_B alone with --against-alias; a run "
        "directory (its newest decision envelope) or a decision envelope",
    )
    p.add_argument(
        "--against-alias",
        metavar="NAME",
        help="A is the qualification the alias NAME points at now (the house's alias table)",
    )
    p.add_argument(
        "--key",
        type=Path,
        action="append",
        help="ed25519 public key to verify with (repeatable; default: the decision keys the "
        "house pins)",
    )
    p.add_argument(
        "--house",
        type=Path,
        help="house repository: pinned decision keys and the alias table (default: "
        "$QUALIFY_HOUSE); needed without --key and with --against-alias, never guessed from "
        "the current directory",
    )
    add_evidence(p)
    p.add_argument("--format", choices=("markdown", "json"), default="markdown")
    p.add_argument("--out", type=Path, help="write the report here instead of stdout")
    p.set_defaults(func=_diff)


def _diff(args: argparse.Namespace) -> int:
    from qualify.decision.alias_view import verified
    from qualify.diff.compare import diff, exit_code
    from qualify.diff.report import markdown
    from qualify.diff.runs import alias_run, alias_target
    from qualify.errors import BadInput
    from qualify.trust.repository import TABLE, require_house

    keys = decision_keys(args.key, args.house)
    if args.against_alias:
        if len(args.runs) != 1:
            raise BadInput(
                "--against-alias compares one run with the alias's qualification",
                [f"RUN: expected one run with --against-alias (got {len(args.runs)})"],
            )
        house = require_house(args.house)
        target = alias_target(house / TABLE, args.against_alias)
        ref_a, ref_b = alias_run(target, args.evidence), args.runs[0]
    else:
        if len(args.runs) != 2:
            raise BadInput(
                "diff compares two runs",
                [
                    "RUN: expected RUN_A RUN_B, or one RUN with --against-alias "
                    f"(got {len(args.runs)})"
                ],
            )
        ref_a, ref_b = args.runs
    a = verified("A", ref_a, keys)
    b = verified("B", ref_b, keys)
    doc = diff(a, b)
    text = markdown(doc) if args.format == "markdown" else json.dumps(doc, indent=1) + "\n"
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text)
        print(f"{args.out}: diff of {a.run.run_id} and {b.run.run_id}", file=sys.stderr)
    return exit_code(doc)
