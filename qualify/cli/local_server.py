"""`qualify local-server build|start|paths`: the real llama-server for the demo and tests."""

from __future__ import annotations

import argparse
import os
import sys


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("local-server", help="build or locate the local llama-server and model")
    p.add_argument("action", choices=["build", "paths"])
    p.add_argument(
        "--flavour", choices=["cpu", "cuda"], default=os.environ.get("QUALIFY_LLAMA_FLAVOUR", "cpu")
    )
    p.set_defaults(func=_local)


def _local(args: argparse.Namespace) -> int:
    from qualify.serving import local as localserver

    if args.action == "build":
        try:
            paths = localserver.ensure(args.flavour)
        except localserver.BuildFailed as exc:
            print(f"qualify local-server: {exc}", file=sys.stderr)
            return 3
    else:
        paths = localserver.LocalPaths(args.flavour)
    for k, v in paths.placeholders().items():
        print(f"{k} = {v}")
    rec = paths.record()
    if rec is not None:
        print(f"variant = {rec.get('variant')}")
        print(f"checked = smoke decode on {rec.get('cpu_model')}")
    elif args.action == "paths":
        print(f"checked = no ({paths.unusable()})")
    return 0
