"""streaming tools: the same typed tool calls, streamed, reassembled from their deltas."""

from __future__ import annotations

from qualify.gates.registry import Outcome, check
from qualify.preflight.checks.tool_calls import ToolCallParams, run_case
from qualify.preflight.probe import GateContext


@check("tool_calls_stream", params=ToolCallParams)
async def tool_calls_stream(ctx: GateContext, p: ToolCallParams) -> Outcome:
    """Pass when the deltas, joined by index, id and argument fragments, form a valid call."""
    outcome, o = await run_case(ctx, p, stream=True)
    outcome.metrics["sse_chunks"] = o.chunks
    if outcome.verdict.value != "pass":
        return outcome
    problems = [
        f"tool call {c.index} ({c.name}): no id in any of its deltas"
        for c in o.tool_calls
        if not c.id
    ]
    if problems:
        return Outcome.failed(*problems, metrics=outcome.metrics)
    return outcome
