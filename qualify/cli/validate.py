"""`qualify validate CANDIDATE`: check the file and what it names; send nothing.

Each problem is printed once, with where it is (file, field path, and for a gate file its line
and column), whatever number of checks came upon it."""

from __future__ import annotations

import argparse
import sys
import traceback


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("validate", help="check a candidate file and its gate files")
    p.add_argument("candidate", nargs="+", help="candidate TOML file(s)")
    p.set_defaults(func=_validate)


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
