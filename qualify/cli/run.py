"""`qualify run|validate|show|render`: run a candidate, check one, read a run from its evidence.

`validate` sends nothing and prints each problem once, with where it is (file, field path, and
for a gate file its line and column), whatever number of checks came upon it. `render` draws the
decision document again from the evidence alone (no server)."""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

from qualify.cli import add_evidence
from qualify.cli.house import add_house, setup_of


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
    p = sub.add_parser("validate", help="check a candidate file and its gate files")
    p.add_argument("candidate", nargs="+", help="candidate TOML file(s)")
    p.set_defaults(func=_validate)
    p = sub.add_parser("show", help="summarise a run from its evidence")
    p.add_argument("run", help="run directory or run id")
    add_evidence(p)
    p.set_defaults(func=_show)
    p = sub.add_parser("render", help="re-render a run's decision document from its evidence")
    p.add_argument("run", help="run directory or run id")
    p.add_argument("--attempt", type=int, help="decision attempt to render (default: the latest)")
    p.add_argument("--out", type=Path, help="write the markdown here instead of stdout")
    add_evidence(p)
    add_house(p, "a preview of a run without a decision is made under")
    p.set_defaults(func=_render)


def _run(args: argparse.Namespace) -> int:
    from qualify.pipeline import execute, plan
    from qualify.plan import print_plan

    if args.plan:
        p = plan(args.candidate)
        print_plan(p.loaded, p.control, p.stages, sys.stdout)
        return 0
    return execute(
        args.candidate, args.evidence, resume=args.resume, key=args.key, house=args.house
    )


def _validate(args: argparse.Namespace) -> int:
    from qualify.errors import BadInput
    from qualify.pipeline import plan

    failed: list[BadInput] = []
    for path in args.candidate:
        try:
            p = plan(path)
        except BadInput as problem:
            failed.append(problem)
            continue
        extra = f" (control {p.control.candidate.name})" if p.control else ""
        print(f"{path}: valid candidate {p.loaded.candidate.name}{extra}")
    for bad in failed:
        if args.debug:
            traceback.print_exception(bad)
        once = BadInput(bad.headline, list(dict.fromkeys(bad.problems)))
        print(once.render(), file=sys.stderr)
    return 2 if failed else 0


def _show(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from qualify.evidence.store import EvidenceStore

    run = EvidenceStore(args.evidence).open_run(args.run)
    info = json.loads((run.path / "run.json").read_text())
    con = Console()
    con.print(f"run {info['run_id']} of {info['candidate']} (qualify {info['tool_version']})")
    table = Table("stage", "attempts", "verdict", "reasons")
    for name in info["stages"]:
        results = run.results(name)
        last = results[-1] if results else None
        verdict = last.verdict.value if last else "not run"
        reasons = "\n".join(last.reasons[:6]) if last else ""
        table.add_row(name, str(len(run.attempt_dirs(name))), verdict, reasons)
    con.print(table)
    return 0


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
