"""The size check of `make check`: no module over 500 lines, no function over 60, in `qualify/`.

Sizes are read from the syntax tree: a module's lines, and each function's from its `def` line
to its last line (decorators not counted; a nested function is measured on its own too, named
`outer.inner`). The modules and functions over a limit today are listed in
`scripts/size_exceptions.txt`, each with its size when it was listed: the list only shrinks.
The check fails when a module or function goes over a limit and is not listed, when a listed one
grows, and when a listed one got smaller or is gone (lower or drop its entry, so that it cannot
grow back unseen: `python scripts/size_check.py --shrink` does that, and never raises an entry
nor adds one).

    python scripts/size_check.py [--root DIR] [--exceptions FILE] [--shrink]
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

MODULE_MAX = 500
FUNCTION_MAX = 60
HERE = Path(__file__).resolve().parent
DEFAULT_ROOT = HERE.parent
DEFAULT_EXCEPTIONS = HERE / "size_exceptions.txt"
PACKAGE = "qualify"


@dataclass(frozen=True)
class Size:
    key: str  # `qualify/x.py` for a module, `qualify/x.py::Class.function` for a function
    lines: int

    @property
    def limit(self) -> int:
        return FUNCTION_MAX if "::" in self.key else MODULE_MAX

    @property
    def noun(self) -> str:
        return "function" if "::" in self.key else "module"


def _functions(tree: ast.Module) -> list[tuple[str, int]]:
    """Every function and method, `(qualified name, lines)`, nested ones included."""
    found: list[tuple[str, int]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                end = child.end_lineno or child.lineno
                found.append((name, end - child.lineno + 1))
                walk(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(tree, "")
    return found


def measure(root: Path, package: str = PACKAGE) -> list[Size]:
    """Every module of `root/package` and every function in it, with its size in lines."""
    sizes: list[Size] = []
    for path in sorted((root / package).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        sizes.append(Size(rel, len(text.splitlines())))
        tree = ast.parse(text, filename=rel)
        sizes.extend(Size(f"{rel}::{name}", n) for name, n in _functions(tree))
    return sizes


def read_exceptions(path: Path) -> dict[str, int]:
    """`LINES KEY` per line; `#` starts a comment. A malformed line is an error, named."""
    out: dict[str, int] = {}
    if not path.exists():
        return out
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[0].isdigit():
            raise ValueError(f"{path}:{number}: expected 'LINES KEY' (got {raw!r})")
        if parts[1] in out:
            raise ValueError(f"{path}:{number}: {parts[1]} is listed twice")
        out[parts[1]] = int(parts[0])
    return out


def check(sizes: list[Size], listed: dict[str, int]) -> list[str]:
    """One line per problem; none when every size is within its limit or its listed ceiling."""
    problems: list[str] = []
    seen = {s.key: s for s in sizes}
    for s in sizes:
        if s.lines <= s.limit:
            continue
        ceiling = listed.get(s.key)
        if ceiling is None:
            problems.append(
                f"{s.key}: {s.lines} lines, over the {s.limit}-line limit of a {s.noun} "
                "(expected it split; only what scripts/size_exceptions.txt lists may be over)"
            )
        elif s.lines > ceiling:
            problems.append(
                f"{s.key}: grew from {ceiling} to {s.lines} lines, over the {s.limit}-line "
                f"limit of a {s.noun} (the exceptions only shrink)"
            )
    for key, ceiling in listed.items():
        now = seen.get(key)
        if now is None:
            problems.append(f"{key}: listed at {ceiling} lines but gone: drop its entry")
        elif now.lines <= now.limit:
            problems.append(
                f"{key}: {now.lines} lines, within the {now.limit}-line limit now: drop its entry"
            )
        elif now.lines < ceiling:
            problems.append(f"{key}: shrank from {ceiling} to {now.lines} lines: lower its entry")
    return problems


def render(entries: dict[str, int]) -> str:
    head = (
        "# Modules over 500 lines and functions over 60 in qualify/ when the size check came\n"
        "# in, each with its size then: an entry may only be lowered or dropped\n"
        "# (scripts/size_check.py; `--shrink` lowers and drops, never adds).\n"
    )
    modules = sorted((k, n) for k, n in entries.items() if "::" not in k)
    functions = sorted((k, n) for k, n in entries.items() if "::" in k)
    return head + "".join(f"{n} {k}\n" for k, n in [*modules, *functions])


def shrink(sizes: list[Size], listed: dict[str, int]) -> dict[str, int]:
    """The entries lowered to today's sizes, the ones within their limit dropped; none added,
    none raised."""
    seen = {s.key: s for s in sizes}
    out: dict[str, int] = {}
    for key, ceiling in listed.items():
        now = seen.get(key)
        if now is not None and now.lines > now.limit:
            out[key] = min(ceiling, now.lines)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="the project's root")
    ap.add_argument("--exceptions", type=Path, default=DEFAULT_EXCEPTIONS)
    ap.add_argument("--shrink", action="store_true", help="lower and drop entries; add none")
    args = ap.parse_args(argv)
    sizes = measure(args.root)
    try:
        listed = read_exceptions(args.exceptions)
    except ValueError as exc:
        print(f"size check: {exc}", file=sys.stderr)
        return 2
    if args.shrink:
        args.exceptions.write_text(render(shrink(sizes, listed)), encoding="utf-8")
        listed = read_exceptions(args.exceptions)
    problems = check(sizes, listed)
    for line in problems:
        print(f"size check: {line}", file=sys.stderr)
    if problems:
        return 1
    modules = sum(1 for s in sizes if "::" not in s.key)
    print(
        f"size check: {modules} modules, {len(sizes) - modules} functions; "
        f"{len(listed)} listed exceptions, none grew"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
