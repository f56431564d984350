"""diff_edit: the answer is a unified diff that `git apply --check` accepts on the files shown,
and once applied, the task's test passes in the sandbox."""

from __future__ import annotations

import asyncio
import re
import tempfile
from pathlib import Path

import git
from pydantic import Field, field_validator

from qualify.gates.registry import Outcome, check
from qualify.quality import tasks
from qualify.quality.tasks import Asked, QualityContext, TaskParams

_DIFF_START = re.compile(r"^(diff --git |--- )", re.MULTILINE)


class DiffParams(TaskParams):
    tree: dict[str, str] = Field(min_length=1, description="path -> content, shown to the model")
    test: str = Field(min_length=1, description="Python run in the patched tree; must exit 0")
    time_limit_s: float = Field(default=10.0, gt=0, le=120)

    @field_validator("tree")
    @classmethod
    def _relative(cls, v: dict[str, str]) -> dict[str, str]:
        for path in v:
            if path.startswith("/") or ".." in Path(path).parts:
                raise ValueError(f"expected relative paths inside the tree (got {path!r})")
        return v


def extract_diff(answer: str) -> str | None:
    """The diff in the answer: a ```diff block, else the text from its first `---` line."""
    block = tasks.fenced(answer, ("diff", "patch", "udiff"))
    text = block if block is not None and _DIFF_START.search(block) else answer
    m = _DIFF_START.search(text)
    if m is None:
        return None
    diff = text[m.start() :]
    diff = diff.split("\n```", 1)[0]
    return diff if diff.endswith("\n") else diff + "\n"


def apply_diff(tree: Path, diff: str) -> str | None:
    """Apply the diff with `git apply` (checked first, -p1 then -p0); why not, or None."""
    patch = tree.parent / "answer.patch"
    patch.write_text(diff)
    repo = git.Repo.init(tree)
    errors = []
    for strip in ("-p1", "-p0"):
        try:
            repo.git.apply("--check", strip, str(patch))
        except git.GitCommandError as exc:
            errors.append(str(exc.stderr).strip().removeprefix("stderr: ").strip("'\n "))
            continue
        repo.git.apply(strip, str(patch))
        return None
    return f"the diff does not apply (git apply --check): {errors[0][:300]}"


def judge_diff(asked: Asked, p: DiffParams, run_code: tasks.RunCode) -> Outcome:
    """Apply the answer's diff to a fresh copy of the files, then run the task's test."""
    diff = extract_diff(asked.answer)
    if diff is None:
        return asked.wrong(f"no unified diff in the answer: {tasks.shown(asked.answer)}")
    with tempfile.TemporaryDirectory(prefix="qualify-diff-") as tmp:
        tree = Path(tmp) / "tree"
        for rel, text in p.tree.items():
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            (tree / rel).write_text(text)
        if why := apply_diff(tree, diff):
            return asked.wrong(why, diff=diff)
        (tree / "_quality_test.py").write_text(p.test)
        run = run_code(tree / "_quality_test.py", tree, p.time_limit_s)
    if why := run.why_not(p.time_limit_s):
        return asked.wrong(f"the diff applies, but {why}", diff=diff, run=run.as_dict())
    return asked.passed(diff=diff, run=run.as_dict())


@check("diff_edit", DiffParams, "quality")
async def diff_edit(ctx: QualityContext, p: DiffParams) -> Outcome:
    """Pass when the answer's diff applies to the files shown and their test then passes."""
    shown = "\n\n".join(f"File `{path}`:\n```\n{text}```" for path, text in p.tree.items())
    asked = await tasks.ask(ctx, p, "diff", extra=shown)
    if asked.outcome is not None:
        return asked.outcome
    return await asyncio.to_thread(judge_diff, asked, p, ctx.run_code)
