"""`qualify show RUN`: a run summarised from its evidence alone."""

from __future__ import annotations

import argparse

from qualify.cli.common import add_evidence


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("show", help="summarise a run from its evidence")
    p.add_argument("run", help="run directory or run id")
    add_evidence(p)
    p.set_defaults(func=_show)


def _show(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from qualify.evidence.store import EvidenceStore
    from qualify.pipeline import summary

    run = EvidenceStore(args.evidence).open_run(args.run)
    s = summary(run)
    info = s["run"]
    con = Console()
    con.print(f"run {info['run_id']} of {info['candidate']} (qualify {info['tool_version']})")
    table = Table("stage", "attempts", "verdict", "reasons")
    for st in s["stages"]:
        table.add_row(st["stage"], str(st["attempts"]), st["verdict"], "\n".join(st["reasons"][:6]))
    con.print(table)
    return 0
