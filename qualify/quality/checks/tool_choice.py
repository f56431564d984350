"""tool_choice: a request in plain words, several typed tools offered, no call shown; the model
must pick the one right tool and fill its arguments, each of the right type and value."""

from __future__ import annotations

from pydantic import Field

from qualify.gates.registry import Outcome, check
from qualify.preflight.checks.common import judge_call, tool_schemas
from qualify.quality.tasks import QualityContext, TaskParams, ask, shown

Scalar = str | int | float | bool


class ToolChoiceParams(TaskParams):
    tools: str = Field(description="a JSON list of chat tools, relative to the gates directory")
    expect_tool: str = Field(min_length=1, description="the tool the call must name")
    expect_args: dict[str, Scalar | list[Scalar]] = Field(
        min_length=1,
        description="argument values the call must carry (strings compared case-insensitively)",
    )

    def files(self) -> list[str]:
        return [self.tools]


def same(got: object, want: object) -> bool:
    if isinstance(want, bool) or isinstance(got, bool):
        return got is want
    if isinstance(want, str):
        return isinstance(got, str) and got.strip().casefold() == want.casefold()
    if isinstance(want, list):
        return isinstance(got, list) and sorted(map(str, got)) == sorted(map(str, want))
    return isinstance(got, int | float) and got == want


@check("tool_choice", ToolChoiceParams, "quality")
async def tool_choice(ctx: QualityContext, p: ToolChoiceParams) -> Outcome:
    """Pass when a plain-words request gets the right tool with the right typed arguments."""
    tools = ctx.load_json(p.tools)
    label = f"tool-{p.expect_tool}"
    asked = await ask(ctx, p, label, visible=False, tools=tools, tool_choice="auto")
    if asked.outcome is not None:
        return asked.outcome
    calls = asked.reply.tool_calls
    if not calls:
        said = shown(asked.answer, 80) if asked.answer.strip() else "nothing visible"
        return asked.wrong(f"no tool call (the answer was {said})")
    shown_calls = [c.as_dict() for c in calls]
    if len(calls) > 1:
        names = [c.name for c in calls]
        return asked.wrong(f"{len(calls)} tool calls {names}, expected one", calls=shown_calls)
    call = calls[0]
    problems = judge_call(call, tool_schemas(tools), p.expect_tool)
    if problems:
        return asked.wrong(*problems, calls=shown_calls)
    args, _ = call.parsed_arguments()
    for key, want in p.expect_args.items():
        got = args.get(key) if isinstance(args, dict) else None
        if not same(got, want):
            return asked.wrong(
                f"tool {call.name}: argument {key} is {got!r}, expected {want!r}",
                calls=shown_calls,
            )
    return asked.passed(calls=shown_calls)
