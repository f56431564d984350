"""`qualify local-server build|start|paths`: the real llama-server for the demo and tests."""

from __future__ import annotations

import argparse
import os


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("local-server", help="build or locate the local llama-server and model")
    p.add_argument("action", choices=["build", "paths"])
    p.add_argument(
        "--flavour", choices=["cpu", "cuda"], default=os.environ.get("QUALIFY_LLAMA_FLAVOUR", "cpu")
    )
    p.set_defaults(func=_local)


def _local(args: argparse.Namespace) -> int:
    from qualify.serving import local as localserver

    paths = (
        localserver.ensure(args.flavour)
        if args.action == "build"
        else localserver.LocalPaths(args.flavour)
    )
    for k, v in paths.placeholders().items():
        print(f"{k} = {v}")
    return 0
