"""`qualify init --attach URL`: a commented candidate for a server that is already running.

It reads the server as the identity stage does (`qualify.init_candidate`), writes the candidate
(and, with `--control-url`, its control), and checks them with `qualify validate`'s own code
before anything is written: a file that would not validate is never left behind."""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

from qualify.errors import BadInput


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("init", help="write a commented candidate for a running server")
    p.add_argument(
        "--attach",
        required=True,
        metavar="URL",
        help="the running server (vLLM, SGLang, llama-server)",
    )
    p.add_argument(
        "--control-url",
        metavar="URL",
        help="a second server, the same recipe with one thing changed: written as its control",
    )
    p.add_argument(
        "--out", type=Path, default=Path("candidate.toml"), help="default: candidate.toml"
    )
    p.add_argument("--name", help="the candidate's name (default: from the model and engine)")
    p.add_argument(
        "--api-key-env", metavar="VAR", help="environment variable holding the servers' API key"
    )
    p.add_argument("--force", action="store_true", help="overwrite files that exist")
    p.set_defaults(func=_init)


def control_path(out: Path) -> Path:
    """`control.toml` beside `candidate.toml`; `<stem>-control.toml` beside any other name."""
    return out.with_name(
        "control.toml" if out.name == "candidate.toml" else f"{out.stem}-control.toml"
    )


def _paths(args: argparse.Namespace) -> list[Path]:
    """The files to write; refused when one exists and --force is not given."""
    paths: list[Path] = [args.out] + ([control_path(args.out)] if args.control_url else [])
    for path in paths:
        if path.exists() and not args.force:
            raise BadInput(f"{path} exists: pass --force to overwrite it")
    return paths


def _check_url(url: str) -> None:
    import httpx

    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise BadInput(f"{url}: not a URL ({exc})") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise BadInput(f"{url}: expected a server's base URL, such as http://host:8000")


def _render(args: argparse.Namespace, paths: list[Path]) -> dict[Path, str]:
    from qualify.init_candidate import read_server, render_candidate, render_control, slug

    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    if args.api_key_env and not key:
        raise BadInput(f"--api-key-env {args.api_key_env}: that environment variable is not set")
    for url in filter(None, (args.attach, args.control_url)):
        _check_url(url)
    server = asyncio.run(read_server(args.attach, key))
    name = args.name or f"{slug(server.model)}-{slug(server.engine.name)}"
    control = paths[1] if len(paths) > 1 else None
    text = render_candidate(server, name, control.name if control else None, args.api_key_env)
    files = {paths[0]: text}
    if control is not None:
        other = asyncio.run(read_server(args.control_url, key))
        files[control] = render_control(server, other, paths[0].name, f"{name}-control")
    return files


def check(files: dict[Path, str]) -> str:
    """`qualify validate`'s own check of the files, written to a scratch folder under their own
    names; the line `validate` prints, or BadInput naming the real path."""
    from qualify.pipeline import plan

    first = next(iter(files))
    with tempfile.TemporaryDirectory(prefix="qualify-init-") as tmp:
        for path, text in files.items():
            (Path(tmp) / path.name).write_text(text)
        try:
            p = plan(Path(tmp) / first.name)
        except BadInput as bad:
            problems = [x.replace(tmp + os.sep, str(first.parent) + os.sep) for x in bad.problems]
            raise BadInput(
                f"{first} would not be a valid candidate (nothing written)", problems
            ) from None
    extra = f" (control {p.control.candidate.name})" if p.control else ""
    return f"{first}: valid candidate {p.loaded.candidate.name}{extra}"


def _init(args: argparse.Namespace) -> int:
    from qualify.pipeline import plan

    paths = _paths(args)
    files = _render(args, paths)
    shown = check(files)
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with path.open("w" if args.force else "x", encoding="utf-8") as fh:
                fh.write(text)
        except FileExistsError:
            raise BadInput(f"{path} exists: pass --force to overwrite it") from None
    plan(paths[0])  # the written files, checked once more where they lie
    print(f"wrote {', '.join(map(str, paths))}")
    print(shown)
    print(f"next: qualify run {paths[0]}")
    return 0
