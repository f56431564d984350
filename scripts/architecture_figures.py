"""Figures on the code of `qualify/`, from its syntax tree (`ast`; qualify is not imported):
a Markdown table, or JSON with `--json`. `python scripts/architecture_figures.py [SRC] [--json]`,
SRC the package's folder (default: this repository's `qualify/`).

1. modules and their lines as `wc -l` counts them, of `SRC/**/*.py`; modules over 300 lines.
2. functions (`def`, `async def`, methods, nested ones) over 40, 60, 80 lines, `def` line to last
   line (decorators not counted); those over 60 listed.
3. distinct lines holding `dict[str, Any]` (in their text) or a bare `Any` annotation (an
   argument's, a return's or an annotated assignment's, exactly the name `Any`), and each part.
4. package imports: a package is the first name under `qualify.` (`qualify/ab/drive.py`: `ab`,
   `qualify/pipeline.py`: `pipeline`, `qualify/__init__.py`: `qualify`). Every `import` and
   `from ... import` of the package (relative ones resolved, in functions too; not `importlib`)
   is an edge, type-checking-only under `if TYPE_CHECKING:`, runtime otherwise. Runtime cycles:
   strongly connected components of more than one package (Tarjan).
5. imports up the layers of `LAYERS`, runtime and type-checking-only; packages the map lacks.
6. the run walk: depth first from `pipeline.execute`, calls in the order they appear, each
   function once, until `decision.statement.sign_attempt` (it writes the signed envelope). A step
   enters a function not walked yet: a "stay" in the caller's file, a "return" into a file walked
   before that is not the caller's. Result.json parses reached: statements of walked functions
   calling `json.loads`, `model_validate_json`, `read_json` or `read_text` that name `RESULT` or
   "result.json", or whose call names a variable the function assigned (`=` or `:=`) from such an
   expression.

Calls resolve statically, best effort, by these rules only. A name: a function or class of the
module, a function nested in the caller (or in one enclosing it), or an import (module level or
in the function; re-exports and module-level aliases `x = mod.f` followed). `m.f`: `m` an
imported module. `self.f`, `cls.f`: a method of the class or of a base class in the package.
`v.f`: `v`'s class `C` known from a parameter's annotation (`C`, `C | None`), a local `v = C(...)`
or `v = g(...)` with `g` annotated `-> C`, or for `self.v` such an assignment in a method or an
annotation in the class body. `C(...)`: `C.__init__` when the class or a base defines one.
Nothing else is followed: not a function taken from a dict or a registry (the stages' are:
`STAGES.get(name)`), a callback, `super()`.
"""

from __future__ import annotations

import argparse
import ast
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The layers, bottom (0) to top: a package imports its own layer and lower ones; an import of a
# higher layer is "up". `qualify` is `qualify/__init__.py`.
LAYERS: dict[str, int] = {
    **dict.fromkeys(["qualify", "_version", "errors", "records", "redact", "progress"], 0),
    **dict.fromkeys(["assets", "shown"], 0),
    **dict.fromkeys(["httpclient"], 1),
    **dict.fromkeys(["evidence", "gates", "serving", "registry", "assembled"], 2),
    **dict.fromkeys(["candidate", "candidate_settings"], 2),
    **dict.fromkeys(["present", "trust", "stage", "plan"], 3),
    **dict.fromkeys(["identity", "preflight", "quality", "context", "ab", "capacity", "vram"], 4),
    **dict.fromkeys(["decision", "diff", "export", "tickets", "alias"], 5),
    **dict.fromkeys(["cli", "pipeline", "init_candidate", "__main__"], 6),
}
START, TARGET = "pipeline.execute", "decision.statement.sign_attempt"  # under the package
PARSERS = ("model_validate_json", "read_json", "read_text")  # and `json.loads`
TYPE_CHECKING = ("TYPE_CHECKING", "typing.TYPE_CHECKING")  # an `if` on either
Func = ast.FunctionDef | ast.AsyncFunctionDef
Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


@dataclass
class Module:
    name: str  # dotted: `qualify.ab.drive`
    rel: str  # `qualify/ab/drive.py`
    text: str
    tree: ast.Module
    is_pkg: bool  # an `__init__.py`


def load(src: Path) -> dict[str, Module]:
    mods: dict[str, Module] = {}
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src.parent).as_posix()
        parts = rel.removesuffix(".py").split("/")
        is_pkg = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_pkg else parts)
        text = path.read_text(encoding="utf-8")
        mods[name] = Module(name, rel, text, ast.parse(text, rel), is_pkg)
    return mods


def package(module: str) -> str:
    """`qualify.ab.drive` -> `ab`; `qualify` -> `qualify`."""
    return [*module.split("."), module][1]


def defs(node: ast.AST, prefix: str = "") -> Iterator[tuple[str, Def]]:
    """Every function and class under `node`, nested ones too, by qualified name."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, Def):
            yield f"{prefix}{child.name}", child
        yield from defs(child, f"{prefix}{child.name}." if isinstance(child, Def) else prefix)


def own(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a module's or a function's body, not inside the functions and classes it
    defines (a function's decorators and signature left out)."""
    for child in node.body if isinstance(node, Func) else ast.iter_child_nodes(node):
        yield child
        if not isinstance(child, Def):
            yield from own(child)


def any_lines(mods: dict[str, Module]) -> tuple[set[str], set[str]]:
    """The `rel:line`s holding `dict[str, Any]`, and those holding a bare `Any` annotation."""
    dicts: set[str] = set()
    bare: set[str] = set()
    for m in mods.values():
        lines = enumerate(m.text.splitlines(), 1)
        dicts.update(f"{m.rel}:{i}" for i, text in lines if "dict[str, Any]" in text)
        for node in ast.walk(m.tree):
            note = getattr(node, "returns" if isinstance(node, Func) else "annotation", None)
            if isinstance(note, ast.Name) and note.id == "Any":
                bare.add(f"{m.rel}:{note.lineno}")
    return dicts, bare


def absolute(m: Module, node: ast.ImportFrom) -> str:
    """The module a `from ... import` reads, a relative one resolved."""
    parts = m.name.split(".")
    base = parts[: len(parts) - node.level + m.is_pkg] if node.level else []
    return ".".join([*base, *([node.module] if node.module else [])])


def imports(mods: dict[str, Module]) -> set[tuple[str, str, bool]]:
    """(module, imported module, type-checking-only) of each import of the package; a name
    imported from a package, not a module of it, counts as an import of the package's module."""
    out: set[tuple[str, str, bool]] = set()

    def visit(m: Module, nodes: Iterable[ast.AST], typing: bool) -> None:
        root = m.name.split(".")[0]
        for node in nodes:
            if isinstance(node, ast.If) and ast.unparse(node.test) in TYPE_CHECKING:
                visit(m, node.body, True)
                visit(m, node.orelse, typing)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                base = absolute(m, node) if isinstance(node, ast.ImportFrom) else ""
                for a in node.names:
                    name = f"{base}.{a.name}" if base else a.name
                    name = base if base and name not in mods else name
                    if name == root or name.startswith(f"{root}."):
                        out.add((m.name, name, typing))
            else:
                visit(m, ast.iter_child_nodes(node), typing)

    for m in mods.values():
        visit(m, [m.tree], False)
    return out


def cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    graph: dict[str, list[str]] = {}
    for a, b in sorted(edges):
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
            if w in stack:
                low[v] = min(low[v], low[w])
        if low[v] == index[v]:
            at = stack.index(v)
            scc, stack[at:] = stack[at:], []
            if len(scc) > 1:
                found.append(sorted(scc))

    for v in graph:
        if v not in index:
            strong(v)
    return sorted(found)


@dataclass
class Scope:
    names: dict[str, str]  # what a name is: a module, class or function, by qualified name
    types: dict[str, str] = field(default_factory=dict)  # the class of a variable's value


class Index:
    """The package's functions and classes, and calls resolved to them (the module's rules)."""

    def __init__(self, mods: dict[str, Module]) -> None:
        self.mods = mods
        self.fns: dict[str, tuple[Module, Func]] = {}
        self.classes: dict[str, tuple[Module, ast.ClassDef]] = {}
        for m in mods.values():
            for q, n in defs(m.tree):
                if isinstance(n, ast.ClassDef):
                    self.classes[f"{m.name}.{q}"] = (m, n)
                else:
                    self.fns[f"{m.name}.{q}"] = (m, n)
        self.aliases = {  # a module-level `x = value`: what `value` names, `x = mod.f` an alias
            f"{m.name}.{n.targets[0].id}": n.value
            for m in mods.values()
            for n in own(m.tree)
            if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)
        }
        self.names = {name: self.bound(m, m.tree, name, {}) for name, m in mods.items()}
        self.scopes: dict[str, Scope] = {}

    def bound(self, m: Module, node: ast.AST, key: str, names: dict[str, str]) -> dict[str, str]:
        """`names` and what the body of `node` (named `key`) binds: definitions, assignments,
        imports."""
        for n in own(node):
            if isinstance(n, Def):
                names[n.name] = f"{key}.{n.name}"
            elif isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name):
                names[n.targets[0].id] = f"{key}.{n.targets[0].id}"
            elif isinstance(n, ast.Import):
                for a in n.names:
                    top = a.name.split(".")[0]
                    names[a.asname or top] = a.name if a.asname else top
            elif isinstance(n, ast.ImportFrom):
                names.update({a.asname or a.name: f"{absolute(m, n)}.{a.name}" for a in n.names})
        return names

    def canon(self, q: str | None, depth: int = 0) -> str | None:
        """`q` where it is defined: imports and module-level aliases (`x = mod.f`) followed."""
        if q is None or q in self.fns or q in self.classes or q in self.mods:
            return q
        owner, _, attr = q.rpartition(".")
        if owner not in self.mods or depth > 9:
            return None
        names = self.names[owner]
        alias = self.aliases.get(q)
        there = self.resolve(alias, Scope(names)) if alias else names.get(attr)
        return self.canon(there, depth + 1) if there != q else None

    def lookup(self, owner: str | None, attr: str) -> str | None:
        """`owner.attr`: a name of a module, or a method of a class or of its bases."""
        if owner in self.mods:
            return self.canon(f"{owner}.{attr}")
        mro = [owner] if owner in self.classes else []
        for c in mro:
            if f"{c}.{attr}" in self.fns:
                return f"{c}.{attr}"
            m, node = self.classes[c]
            bases = (self.resolve(b, Scope(self.names[m.name])) for b in node.bases)
            mro += [b for b in bases if b in self.classes and b not in mro]
        return None

    def resolve(self, expr: ast.expr | None, scope: Scope) -> str | None:
        """What `expr` names: a module, class or function of the package, or None."""
        if isinstance(expr, ast.Name):
            return self.canon(scope.names.get(expr.id))
        if isinstance(expr, ast.Attribute):
            return self.lookup(self.owner(expr.value, scope), expr.attr)
        return None

    def owner(self, expr: ast.expr, scope: Scope) -> str | None:
        """The module or class holding `expr`'s attributes: the one it names, or its class."""
        if isinstance(expr, ast.Name) and expr.id in scope.types:
            return scope.types[expr.id]
        if isinstance(expr, ast.Attribute) and ast.unparse(expr.value) == "self":
            return self.attribute(scope.names.get("self"), expr.attr)
        return self.resolve(expr, scope)

    def annotation(self, note: ast.expr | None, scope: Scope) -> str | None:
        """The class an annotation names: `C`, `C | None`."""
        if isinstance(note, ast.BinOp):
            return self.annotation(note.left, scope) or self.annotation(note.right, scope)
        q = self.resolve(note, scope)
        return q if q in self.classes else None

    def assigned(self, n: ast.AST, scope: Scope) -> tuple[str, str | None]:
        """An assignment's target and the class of its value (`C(...)`, `g(...)` with `g`
        annotated `-> C`) or of its annotation; ("", None) for anything else."""
        if not isinstance(n, ast.Assign | ast.AnnAssign):
            return "", None
        target = ast.unparse(n.targets[0] if isinstance(n, ast.Assign) else n.target)
        q = self.resolve(n.value.func, scope) if isinstance(n.value, ast.Call) else None
        if q in self.fns:
            m, fn = self.fns[q]
            q = self.annotation(fn.returns, Scope(self.names[m.name]))
        if q not in self.classes and isinstance(n, ast.AnnAssign):
            q = self.annotation(n.annotation, scope)
        return target, q if q in self.classes else None

    def attribute(self, cls: str | None, attr: str) -> str | None:
        """The class of `self.attr` of class `cls`: assigned in a method, annotated in the body."""
        if cls not in self.classes:
            return None
        m, node = self.classes[cls]
        for n in ast.walk(node):
            target, c = self.assigned(n, Scope(self.names[m.name]))
            if c and (target == f"self.{attr}" or (target == attr and n in node.body)):
                return c
        return None

    def scope(self, key: str) -> Scope:
        """The names and the variables' classes function `key` sees (its enclosing ones' too)."""
        if key not in self.scopes:
            m, fn = self.fns[key]
            outer = key.rpartition(".")[0]
            base = self.scope(outer) if outer in self.fns else Scope(self.names[m.name])
            scope = Scope(self.bound(m, fn, key, dict(base.names)), dict(base.types))
            args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
            if outer in self.classes and args and args[0].arg in ("self", "cls"):
                scope.names[args[0].arg] = outer
            for a in args:
                if c := self.annotation(a.annotation, scope):
                    scope.types[a.arg] = c
            for n in own(fn):
                target, c = self.assigned(n, scope)
                if c and target.isidentifier():
                    scope.types[target] = c
            self.scopes[key] = scope
        return self.scopes[key]

    def calls(self, key: str) -> list[str]:
        """The package's functions `key` calls, in the order the calls appear."""
        scope = self.scope(key)
        found = [n for n in own(self.fns[key][1]) if isinstance(n, ast.Call)]
        out: list[str] = []
        for call in sorted(found, key=lambda c: (c.lineno, c.col_offset)):
            q = self.resolve(call.func, scope)
            q = self.lookup(q, "__init__") if q in self.classes else q
            if q is not None and q in self.fns:
                out.append(q)
        return out

    def walk(self, start: str, target: str) -> list[tuple[str | None, str]]:
        """The steps (caller, callee): depth first in call order, each function once, from
        `start` until `target` is reached."""
        steps: list[tuple[str | None, str]] = []
        todo: list[tuple[str | None, str]] = [(None, start)] if start in self.fns else []
        seen: set[str] = set()
        while todo and target not in seen:
            caller, key = todo.pop()
            if key not in seen:
                seen.add(key)
                steps.append((caller, key))
                todo += [(key, c) for c in reversed(self.calls(key))]
        return steps


def mentions_result(node: ast.AST) -> bool:
    """`node` names `RESULT` or holds the string "result.json"."""
    return any(
        getattr(n, "id", getattr(n, "attr", None)) == "RESULT"
        or (isinstance(n, ast.Constant) and "result.json" in str(n.value))
        for n in ast.walk(node)
    )


def parses(call: ast.Call) -> bool:
    """A call of `json.loads`, `model_validate_json`, `read_json` or `read_text`."""
    name = ast.unparse(call.func)
    return name == "json.loads" or name.rpartition(".")[2] in PARSERS


def parse_sites(m: Module, fn: Func) -> set[str]:
    """The `rel:line` of each statement of `fn` parsing a stage's result.json (module doc)."""
    nodes = list(own(fn))
    tainted: set[str] = set()
    for n in nodes:
        assigns = isinstance(n, ast.Assign | ast.AnnAssign | ast.NamedExpr)
        if assigns and n.value and mentions_result(n.value):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            tainted |= {t.id for t in targets if isinstance(t, ast.Name)}
    sites: set[str] = set()
    for stmt in (n for n in nodes if isinstance(n, ast.stmt) and not isinstance(n, Def)):
        skip = ast.stmt | ast.excepthandler | ast.match_case  # the statements inside it
        parts = [c for c in ast.iter_child_nodes(stmt) if not isinstance(c, skip)]
        calls = [n for p in parts for n in ast.walk(p) if isinstance(n, ast.Call) and parses(n)]
        names = {n.id for c in calls for n in ast.walk(c) if isinstance(n, ast.Name)}
        if calls and (any(map(mentions_result, parts)) or names & tainted):
            sites.add(f"{m.rel}:{stmt.lineno}")
    return sites


def walk_figures(mods: dict[str, Module], start: str, target: str) -> dict[str, Any]:
    index = Index(mods)
    steps = index.walk(start, target)
    file = {key: index.fns[key][0].rel for _, key in steps}
    visited: set[str] = set()
    stays = returns = 0
    for caller, key in steps:
        here = file.get(caller or "")
        stays += here == file[key]
        returns += here not in (None, file[key]) and file[key] in visited
        visited.add(file[key])
    sites = {key: parse_sites(*index.fns[key]) for key in index.fns}
    reached: set[str] = set().union(*(sites[key] for key in file))
    return {
        "from": start,
        "to": target,
        "reached": target in file,
        "functions": len(steps),
        "files": len(visited),
        "stays": stays,
        "returns": returns,
        "result_parses_reached": sorted(reached),
        "result_parses_total": len(set().union(*sites.values())),
        "order": list(file),
    }


def figures(src: Path) -> dict[str, Any]:
    mods = load(src)
    fns = {  # `rel::qualified name`: lines, from the `def` line to the last
        f"{m.rel}::{q}": (n.end_lineno or n.lineno) - n.lineno + 1
        for m in mods.values()
        for q, n in defs(m.tree)
        if not isinstance(n, ast.ClassDef)
    }
    dicts, bare = any_lines(mods)
    imps = imports(mods)
    runtime = {(package(a), package(b)) for a, b, typing in imps if not typing}
    present = {package(n) for n in mods} | {package(b) for _, b, _ in imps}

    def up(typing: bool) -> list[str]:
        higher = [(a, b) for a, b, t in imps if t == typing and package(b) in LAYERS]
        return sorted(
            f"{a} -> {b}" for a, b in higher if LAYERS.get(package(a), 99) < LAYERS[package(b)]
        )

    def by_size(kv: tuple[str, int]) -> int:
        return -kv[1]

    return {
        "source": src.as_posix(),
        "modules": len(mods),
        "lines": sum(m.text.count("\n") for m in mods.values()),
        "modules_over_300": sorted(m.rel for m in mods.values() if m.text.count("\n") > 300),
        "functions": len(fns),
        "functions_over": {n: sum(v > n for v in fns.values()) for n in (40, 60, 80)},
        "functions_over_60": dict(sorted(((k, v) for k, v in fns.items() if v > 60), key=by_size)),
        "any_lines": len(dicts | bare),
        "dict_str_any_lines": len(dicts),
        "bare_any_lines": len(bare),
        "packages": sorted({package(n) for n in mods}),
        "runtime_cycles": cycles({(a, b) for a, b in runtime if a != b}),
        "up_runtime": up(False),
        "up_type_checking": up(True),
        "unmapped": sorted(present - LAYERS.keys()),
        "absent": sorted(LAYERS.keys() - present),
        "walk": walk_figures(mods, f"{src.name}.{START}", f"{src.name}.{TARGET}"),
    }


def markdown(f: dict[str, Any]) -> str:
    w, over, n = f["walk"], f["functions_over"], len

    def listed(items: Iterable[str]) -> str:
        return ", ".join(f"`{i}`" for i in items) or "none"

    cycle = "; ".join("{" + ", ".join(c) + "}" for c in f["runtime_cycles"]) or "none"
    over_60 = ", ".join(f"`{k}` ({v})" for k, v in f["functions_over_60"].items()) or "none"
    walk = f"run walk, `{START}` to `{TARGET}`" + ("" if w["reached"] else " (not reached)")
    return f"""\
| figure | value |
| --- | --- |
| modules (`.py` files) | {f["modules"]} |
| lines (`wc -l`) | {f["lines"]} |
| modules over 300 lines | {n(f["modules_over_300"])} |
| functions (`def`, `async def`, methods, nested ones) | {f["functions"]} |
| functions over 40 / 60 / 80 lines | {over[40]} / {over[60]} / {over[80]} |
| lines with `dict[str, Any]` or a bare `Any` annotation | {f["any_lines"]} \
({f["dict_str_any_lines"]} with `dict[str, Any]`, {f["bare_any_lines"]} with a bare `Any`) |
| packages | {n(f["packages"])} |
| packages in a runtime import cycle (each cycle) | {cycle} |
| imports up the layers: runtime / type-checking-only | \
{n(f["up_runtime"])} / {n(f["up_type_checking"])} |
| packages not in the layer map; map entries absent | \
{listed(f["unmapped"])}; {listed(f["absent"])} |
| {walk} | {w["functions"]} functions, {w["files"]} files, {w["stays"]} stays, \
{w["returns"]} returns |
| result.json parses reached on the walk | \
{n(w["result_parses_reached"])} (of {w["result_parses_total"]}) |

Functions over 60 lines: {over_60}.

Imports up the layers, runtime: {listed(f["up_runtime"])}.

Imports up the layers, type-checking-only: {listed(f["up_type_checking"])}.

Result.json parses reached on the walk: {listed(w["result_parses_reached"])}."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Figures on the code of qualify/, in Markdown.")
    here = Path(__file__).resolve().parents[1] / "qualify"
    parser.add_argument("src", nargs="?", type=Path, default=here, help="the package's folder")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    found = figures(args.src)
    print(json.dumps(found, indent=2) if args.json else markdown(found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
