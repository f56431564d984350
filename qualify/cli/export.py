"""`qualify export RUN [--junit FILE] [--csv DIR] [--pushgateway URL] [--job NAME]`: a signed
run's results for CI test views and dashboards, read from its sealed evidence once its decision
verifies (docs/export.md). Exit 0: written (whatever the verdict); 2: bad input (a run missing,
unsigned or not verifying, an output inside the run, no output asked for); 3: the push failed.
Bad input writes nothing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from urllib.parse import urlsplit

from qualify.cli.common import add_evidence, decision_keys


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def _gateway(url: str) -> str:
    """The Pushgateway address, checked before anything is written."""
    from qualify.errors import BadInput

    full = url if "://" in url else f"http://{url}"
    parts = urlsplit(full)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(
            f"{url} is not a Pushgateway address",
            [f"--pushgateway: expected http(s)://HOST:PORT (got {url!r})"],
        )
    return full


def _check(args: argparse.Namespace) -> None:
    from qualify.errors import BadInput

    if args.junit is None and args.csv is None and args.pushgateway is None:
        raise BadInput(
            "nothing to export",
            ["--junit, --csv, --pushgateway: expected at least one"],
        )
    if args.junit is not None and args.junit.is_dir():
        raise BadInput(
            f"{args.junit} is a directory", [f"--junit: expected a file (got {args.junit})"]
        )
    if args.csv is not None and args.csv.exists() and not args.csv.is_dir():
        raise BadInput(
            f"{args.csv} is not a directory", [f"--csv: expected a directory (got {args.csv})"]
        )


def _export(args: argparse.Namespace) -> int:
    from qualify.export import open_verified, outside_run
    from qualify.export.junit import junit, write_junit
    from qualify.export.metrics import push, samples
    from qualify.export.tables import tables, write_tables

    _check(args)
    url = _gateway(args.pushgateway) if args.pushgateway is not None else None
    side = open_verified(args.run, args.evidence, decision_keys(args.key, args.house))
    for flag, path in (("--junit", args.junit), ("--csv", args.csv)):
        if path is not None:
            outside_run(side, flag, path)
    xml = junit(side) if args.junit is not None else None
    rows = tables(side.view) if args.csv is not None else None
    found = samples(side) if url is not None else None
    rid = side.record.run_id
    if xml is not None:
        write_junit(xml, args.junit)
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
