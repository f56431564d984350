"""Answers judged by their structure, never by a keyword alone.

- json_answer: the answer is one JSON object (a ```json fence allowed, nothing else), valid
  under the task's schema, with the fields the task fixes holding exactly the expected values;
- bullets: exactly N bullet lines, each within a word limit, and no other text;
- ordered_steps: a plan (numbered lines or a JSON array of strings) in which each named step
  appears in a step of its own, in the order given (no step does a later thing before an
  earlier thing was first done), and no forbidden step appears.
"""

from __future__ import annotations

import json
import re

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import Field, field_validator

from qualify.gates.registry import Outcome, check
from qualify.preflight.checks.common import schema_errors
from qualify.quality.checks.tool_choice import Scalar, same
from qualify.quality.tasks import QualityContext, TaskParams, ask, fenced, shown
from qualify.records import StrictModel


class JsonAnswerParams(TaskParams):
    schema_: dict[str, object] = Field(alias="schema", description="JSON Schema of the answer")
    expect: dict[str, Scalar | list[Scalar]] = Field(
        default_factory=dict, description="top-level fields that must hold exactly these values"
    )

    @field_validator("schema_")
    @classmethod
    def _valid_schema(cls, v: dict[str, object]) -> dict[str, object]:
        try:
            Draft202012Validator.check_schema(v)
        except SchemaError as exc:
            raise ValueError(f"expected a valid JSON Schema ({exc.message})") from None
        return v


def only_json(answer: str) -> tuple[object, str | None]:
    """The answer as JSON: the whole text, or one fenced block with nothing around it."""
    text = answer.strip()
    block = fenced(text, ("json",))
    if block is not None and text.startswith("```") and text.endswith("```"):
        text = block.strip()
    try:
        return json.loads(text), None
    except ValueError as exc:
        return None, f"the answer is not one JSON document ({exc}): {shown(answer)}"


@check("json_answer", JsonAnswerParams, "quality")
async def json_answer(ctx: QualityContext, p: JsonAnswerParams) -> Outcome:
    """Pass when the answer is only a JSON object, valid, with the expected field values."""
    asked = await ask(ctx, p, "json")
    if asked.outcome is not None:
        return asked.outcome
    doc, bad = only_json(asked.answer)
    if bad is not None:
        return asked.wrong(bad)
    if problems := schema_errors(doc, p.schema_, "answer"):
        return asked.wrong(*problems)
    for key, want in p.expect.items():
        got = doc.get(key) if isinstance(doc, dict) else None
        if not same(got, want):
            return asked.wrong(f"answer.{key} is {got!r}, expected {want!r}")
    return asked.passed()


class BulletParams(TaskParams):
    count: int = Field(ge=1, le=20, description="exactly this many bullet lines")
    max_words: int = Field(ge=1, le=100, description="words allowed in one bullet")


_BULLET = re.compile(r"^\s*[-*•]\s+(\S.*)$")


@check("bullets", BulletParams, "quality")
async def bullets(ctx: QualityContext, p: BulletParams) -> Outcome:
    """Pass when the answer is exactly the asked number of short bullets and nothing else."""
    asked = await ask(ctx, p, "bullets")
    if asked.outcome is not None:
        return asked.outcome
    lines = [ln for ln in asked.answer.strip().splitlines() if ln.strip()]
    found = [m.group(1) for ln in lines if (m := _BULLET.match(ln))]
    others = [ln for ln in lines if not _BULLET.match(ln)]
    if others:
        return asked.wrong(f"{len(others)} line(s) that are not bullets, first {shown(others[0])}")
    if len(found) != p.count:
        return asked.wrong(f"{len(found)} bullets, expected exactly {p.count}")
    for i, b in enumerate(found, 1):
        if (n := len(b.split())) > p.max_words:
            return asked.wrong(f"bullet {i} has {n} words, at most {p.max_words} allowed")
    return asked.passed(bullets=found)


class Step(StrictModel):
    name: str = Field(min_length=1, description="what the step is, in reasons")
    pattern: str = Field(min_length=1, description="a regular expression (case-insensitive)")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"expected a regular expression ({exc})") from None
        return v

    def first(self, steps: list[str], after: int = -1) -> int | None:
        """The first step after index `after` that does this, or None."""
        hits = (i for i, s in enumerate(steps) if i > after and re.search(self.pattern, s, re.I))
        return next(hits, None)


class StepsParams(TaskParams):
    steps: list[Step] = Field(min_length=2, description="must appear in this order")
    forbid: list[Step] = Field(default_factory=list, description="must not appear at all")


_NUMBERED = re.compile(r"^\s*\d+[.)]\s+(\S.*)$")


def plan_steps(answer: str) -> list[str]:
    """The plan's steps: a JSON array of strings, else the numbered lines."""
    doc, bad = only_json(answer)
    if bad is None and isinstance(doc, list) and all(isinstance(s, str) for s in doc):
        return list(doc)
    return [m.group(1) for ln in answer.splitlines() if (m := _NUMBERED.match(ln))]


@check("ordered_steps", StepsParams, "quality")
async def ordered_steps(ctx: QualityContext, p: StepsParams) -> Outcome:
    """Pass when the plan has every named step, each after the one before, and none forbidden."""
    asked = await ask(ctx, p, "plan")
    if asked.outcome is not None:
        return asked.outcome
    steps = plan_steps(asked.answer)
    if not steps:
        return asked.wrong(f"no numbered steps in the answer: {shown(asked.answer)}")
    for bad in p.forbid:
        if (i := bad.first(steps)) is not None:
            return asked.wrong(f"step {i + 1} is forbidden ({bad.name}): {shown(steps[i])}")
    at, prev = -1, None
    for want in p.steps:
        first = want.first(steps)
        if first is None:
            return asked.wrong(f"no step does this: {want.name}", steps=steps)
        if prev is not None and first < prev[1]:
            return asked.wrong(
                f"step {first + 1} does '{want.name}' before step {prev[1] + 1} does "
                f"'{prev[0].name}'",
                steps=steps,
            )
        at_next = want.first(steps, after=at)
        if at_next is None:
            return asked.wrong(
                f"no step after step {at + 1} does '{want.name}': each needs a step of its own",
                steps=steps,
            )
        at, prev = at_next, (want, first)
    return asked.passed(steps=steps)
