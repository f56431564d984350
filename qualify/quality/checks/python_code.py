"""python_code: the answer's Python, saved as a module, passes the task's assertions when run
in the sandbox (time limit, no network, scratch directory only)."""

from __future__ import annotations

import ast
import asyncio
import re
import tempfile
from pathlib import Path

from pydantic import Field

from qualify.gates.registry import Outcome, check
from qualify.quality import tasks
from qualify.quality.tasks import Asked, QualityContext, TaskParams


class PythonParams(TaskParams):
    module: str = Field(
        default="solution",
        pattern=r"^[a-z_][a-z0-9_]*$",
        description="the answer is saved as <module>.py; the assertions import it",
    )
    given: str | None = Field(default=None, description="code shown to the model, if any")
    assertions: str = Field(min_length=1, description="Python that imports the module and asserts")
    time_limit_s: float = Field(default=10.0, gt=0, le=120)


def extract_code(answer: str) -> str | None:
    """The answer's Python: a ```python block, else the whole answer if it parses."""
    block = tasks.fenced(answer, ("python", "py", "python3"))
    if block is not None:
        return block
    text = answer.strip()
    try:
        ast.parse(text)
    except SyntaxError:
        return None
    return text if re.search(r"^\s*(def|class|import|from)\s", text, re.MULTILINE) else None


def judge_code(asked: Asked, p: PythonParams, run_code: tasks.RunCode) -> Outcome:
    """Save the code, run the assertions against it; pass only when they ran to their end."""
    code = extract_code(asked.answer)
    if code is None:
        return asked.wrong(f"no Python code in the answer: {tasks.shown(asked.answer)}")
    try:
        ast.parse(code)
    except SyntaxError as exc:
        return asked.wrong(f"the code does not parse: {exc.msg} (line {exc.lineno})", code=code)
    with tempfile.TemporaryDirectory(prefix="qualify-py-") as tmp:
        scratch = Path(tmp)
        (scratch / f"{p.module}.py").write_text(code)
        (scratch / "_quality_check.py").write_text(p.assertions)
        run = run_code(scratch / "_quality_check.py", scratch, p.time_limit_s)
    if why := run.why_not(p.time_limit_s):
        return asked.wrong(why, code=code, run=run.as_dict())
    return asked.passed(code=code, run=run.as_dict())


@check("python_code", PythonParams, "quality")
async def python_code(ctx: QualityContext, p: PythonParams) -> Outcome:
    """Pass when the answer's code passes the task's assertions inside the sandbox."""
    extra = f"```python\n{p.given}```" if p.given else ""
    asked = await tasks.ask(ctx, p, "python", extra=extra)
    if asked.outcome is not None:
        return asked.outcome
    return await asyncio.to_thread(judge_code, asked, p, ctx.run_code)
