"""`qualify render RUN`: the decision document again, from the evidence alone (no server)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from qualify.cli.common import add_evidence
from qualify.cli.house import add_house, setup_of


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("render", help="re-render a run's decision document from its evidence")
    p.add_argument("run", help="run directory or run id")
    p.add_argument("--attempt", type=int, help="decision attempt to render (default: the latest)")
    p.add_argument("--out", type=Path, help="write the markdown here instead of stdout")
    add_evidence(p)
    add_house(p, "a preview of a run without a decision is made under")
    p.set_defaults(func=_render)


def _render(args: argparse.Namespace) -> int:
    from qualify.decision.render import render_run
    from qualify.errors import BadInput
    from qualify.evidence.store import EvidenceStore

    run = EvidenceStore(args.evidence).open_run(args.run)
    text = render_run(run, setup_of(args), args.attempt)
    if args.out is None:
        sys.stdout.write(text)
        return 0
    try:
        with args.out.open("x") as fh:  # a rendering never replaces a file
            fh.write(text)
    except FileExistsError:
        raise BadInput(
            f"{args.out} exists",
            [f"--out: expected a path that does not exist (got {args.out}, which does)"],
        ) from None
    print(f"{args.out}: decision document of run {run.run_id}")
    return 0
