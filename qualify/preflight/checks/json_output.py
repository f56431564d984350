"""json: `response_format` json_schema; the content parses and validates with jsonschema."""

from __future__ import annotations

import json

from pydantic import Field

from qualify.gates.files import JsonFile, Params
from qualify.gates.probe import GateContext
from qualify.gates.registry import Outcome, check
from qualify.preflight.budget import answer_budget, reasoning_only
from qualify.preflight.checks.common import answer_metrics, chat_problem, clip, schema_errors, user


class JsonParams(Params):
    prompt: str = Field(min_length=1)
    schema_file: JsonFile = Field(description="a JSON Schema, relative to the gates directory")
    name: str = "answer"
    max_tokens: int | None = Field(default=None, gt=0)


@check("json_schema", params=JsonParams)
async def json_schema(ctx: GateContext, p: JsonParams) -> Outcome:
    """Pass when the content is JSON that validates against the requested schema."""
    schema = ctx.load_json(p.schema_file)
    fmt = {"type": "json_schema", "json_schema": {"name": p.name, "schema": schema, "strict": True}}
    body = ctx.body(
        [user(p.prompt)], max_tokens=answer_budget(ctx, p.max_tokens), response_format=fmt
    )
    o = await ctx.chat("json", body)
    if bad := chat_problem(o, "json request") or reasoning_only(o, ctx, "json"):
        return bad
    m = answer_metrics(o)
    if not o.content.strip():
        return Outcome.failed(f"no visible content (finish_reason={o.finish_reason})", metrics=m)
    try:
        doc = json.loads(o.content)
    except ValueError as exc:
        cut = " (cut off by finish_reason=length)" if o.finish_reason == "length" else ""
        return Outcome.failed(
            f"content is not JSON{cut}: {exc}: {clip(o.content, 80)!r}", metrics=m
        )
    problems = schema_errors(doc, schema, "content")
    return Outcome.failed(*problems[:5], metrics=m) if problems else Outcome.passed(m)
