"""`qualify show RUN`: a run summarised from its evidence alone."""

from __future__ import annotations

import argparse
import json

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
