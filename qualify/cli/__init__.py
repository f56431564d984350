"""The command line: each module registers its subcommands (`register(subparsers)`), in order."""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from collections.abc import Sequence

from qualify._version import __version__
from qualify.errors import QualifyError

COMMANDS = ("init", "run", "sign", "diff", "export", "alias", "house", "tickets", "local_server")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="qualify", description="Qualify an LLM serving recipe for production."
    )
    p.add_argument("--version", action="version", version=f"qualify {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"qualify.cli.{name}").register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except QualifyError as exc:
        if args.debug:
            traceback.print_exc()
        print(str(exc), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("qualify: interrupted", file=sys.stderr)
        return 3
