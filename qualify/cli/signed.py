"""`qualify diff` and `qualify export`: signed runs, each verified first, compared or exported.

`diff RUN_A RUN_B` (or `diff RUN_B --against-alias NAME`) compares two signed qualifications.
Exit 0: no regression beyond the house's margins; 1: a regression; 2: bad input (a run that is
missing, unsigned, or does not verify).

`export RUN [--junit FILE] [--csv DIR] [--pushgateway URL] [--job NAME]` writes a signed run's
results for CI test views and dashboards, read from its sealed evidence once its decision
verifies (docs/export.md). Exit 0: written (whatever the verdict); 2: bad input (a run missing,
unsigned or not verifying, an output inside the run, no output asked for); 3: the push failed.
Bad input writes nothing."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from urllib.parse import urlsplit

from qualify.cli import add_evidence, decision_keys


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
    _register_export(sub)


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


def _register_export(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "export", help="a signed run's gates, requests and figures: JUnit, CSV, Pushgateway"
    )
    p.add_argument(
        "run", help="run directory, run id (under --evidence) or decision envelope; it must verify"
    )
    p.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML here")
    p.add_argument(
        "--csv", type=Path, metavar="DIR", help="write requests.csv and cells.csv in DIR"
    )
    p.add_argument("--pushgateway", metavar="URL", help="push the verdict and figures here")
    p.add_argument("--job", default="qualify", help="the Pushgateway job (default: qualify)")
    p.add_argument(
        "--key",
        type=Path,
        action="append",
        help="ed25519 public key to verify with (repeatable; default: the house's pinned "
        "decision keys)",
    )
    p.add_argument("--house", type=Path, help="house repository (default: $QUALIFY_HOUSE)")
    add_evidence(p)
    p.set_defaults(func=_export)


def _check(args: argparse.Namespace) -> str | None:
    """The outputs asked for, checked before anything is written; the Pushgateway address."""
    from qualify.errors import BadInput

    url = args.pushgateway
    if args.junit is None and args.csv is None and url is None:
        raise BadInput(
            "nothing to export", ["--junit, --csv, --pushgateway: expected at least one"]
        )
    if args.junit is not None and args.junit.is_dir():
        raise BadInput(
            f"{args.junit} is a directory", [f"--junit: expected a file (got {args.junit})"]
        )
    if args.csv is not None and args.csv.exists() and not args.csv.is_dir():
        raise BadInput(
            f"{args.csv} is not a directory", [f"--csv: expected a directory (got {args.csv})"]
        )
    if url is None:
        return None
    full = url if "://" in url else f"http://{url}"
    parts = urlsplit(full)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(
            f"{url} is not a Pushgateway address",
            [f"--pushgateway: expected http(s)://HOST:PORT (got {url!r})"],
        )
    return full


def _export(args: argparse.Namespace) -> int:
    from qualify.export import open_verified, outside_run, tables, write_tables
    from qualify.export.junit import junit
    from qualify.export.metrics import push, samples

    url = _check(args)
    side = open_verified(args.run, args.evidence, decision_keys(args.key, args.house))
    for flag, path in (("--junit", args.junit), ("--csv", args.csv)):
        if path is not None:
            outside_run(side, flag, path)
    xml = junit(side) if args.junit is not None else None
    rows = tables(side.view) if args.csv is not None else None
    found = samples(side) if url is not None else None
    rid = side.record.run_id
    if xml is not None:
        args.junit.parent.mkdir(parents=True, exist_ok=True)
        xml.write(str(args.junit), pretty=True)
        print(f"{args.junit}: JUnit of run {rid}, {xml.tests} gates ({side.record.decision})")
    if rows is not None:
        counts = write_tables(args.csv, rows)
        said = ", ".join(f"{name} {n} rows" for name, n in counts.items())
        print(f"{args.csv}: {said} (run {rid})")
    if url is not None and found is not None:
        push(url, args.job, side, found)
        print(f"{url}: pushed {len(found)} samples of run {rid} (job {args.job})")
    sys.stdout.flush()
    return 0
