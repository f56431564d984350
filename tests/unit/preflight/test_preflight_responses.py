"""The Responses API gate: plain call, function call, continuation and streamed event order."""

from __future__ import annotations

from typing import Any

import httpx
from preflight_fakes import body_of, json_response, named_sse, run, stream_response

from qualify.records import Verdict

ARGS = '{"city": "Paris", "unit": "celsius"}'


def message(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def response(*items: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "output": list(items),
        "usage": {"input_tokens": 20, "output_tokens": 8, "total_tokens": 28},
    }


def events(text: str, order: list[str] | None = None) -> list[dict[str, Any]]:
    """The llama-server event sequence (no sequence_number), or a reordering of it."""
    item = message(text)
    evs = {
        "response.created": {"type": "response.created", "response": {"id": "resp_1"}},
        "response.in_progress": {"type": "response.in_progress", "response": {"id": "resp_1"}},
        "response.output_item.added": {"type": "response.output_item.added", "item": item},
        "response.output_text.delta": {"type": "response.output_text.delta", "delta": text},
        "response.output_text.done": {"type": "response.output_text.done", "text": text},
        "response.output_item.done": {"type": "response.output_item.done", "item": item},
        "response.completed": {"type": "response.completed", "response": response(item)},
    }
    return [evs[t] for t in (order or list(evs))]


def server(
    call_item: dict[str, Any] | None = None,
    continuation: str = "It is 13.4 C.",
    stream: list[dict[str, Any]] | None = None,
) -> Any:
    def handler(request: httpx.Request) -> httpx.Response:
        body = body_of(request)
        if body.get("stream"):
            data = named_sse(stream if stream is not None else events("Paris."))
            return stream_response(data)
        if isinstance(body["input"], list):
            return json_response(response(message(continuation)))
        if "tools" in body:
            item = call_item or {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": ARGS,
            }
            return json_response(response(item))
        return json_response(response(message("Paris is the capital of France.")))

    return handler


def test_responses_all_parts_pass() -> None:
    """All four parts answered as documented: pass."""
    result = run("responses", server())
    assert result.verdict is Verdict.PASS, result.reasons
    assert result.metrics["parts"] == {
        "plain": "pass",
        "function_call": "pass",
        "continuation": "pass",
        "stream": "pass",
    }


def test_responses_tools_are_flat_and_continuation_carries_call_id() -> None:
    """Tools go flat (no `function` key); the continuation sends the call and its output."""
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(body_of(request))
        return server()(request)  # type: ignore[no-any-return]

    run("responses", handler)
    call_req = next(b for b in seen if "tools" in b and isinstance(b["input"], str))
    assert call_req["tools"][0]["name"] == "get_weather" and "function" not in call_req["tools"][0]
    cont = next(b for b in seen if isinstance(b["input"], list))
    kinds = [i.get("type", "message") for i in cont["input"]]
    assert kinds == ["message", "function_call", "function_call_output"]
    assert cont["input"][1]["call_id"] == cont["input"][2]["call_id"]


def test_responses_bad_function_call_fails_with_field() -> None:
    """A function call whose arguments break the schema fails, naming the part and the field."""
    bad = {
        "type": "function_call",
        "call_id": "c",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
    }
    result = run("responses", server(call_item=bad))
    assert result.verdict is Verdict.FAIL
    assert result.reasons == [
        "function call: tool get_weather: arguments 'unit' is a required property"
    ]


def test_responses_stream_out_of_order_fails() -> None:
    """A stream that does not end with response.completed, or puts deltas first, fails."""
    order = [
        "response.created",
        "response.output_text.delta",
        "response.output_item.added",
        "response.output_item.done",
    ]
    result = run("responses", server(stream=events("Paris.", order)))
    assert result.verdict is Verdict.FAIL
    assert "streamed call: the last event is 'response.output_item.done'" in result.reasons[0]
    assert any("before response.output_item.added" in r for r in result.reasons)


def test_responses_continuation_without_value_fails() -> None:
    """A continuation that ignores the function_call_output fails."""
    result = run("responses", server(continuation="I do not know."))
    assert result.verdict is Verdict.FAIL
    assert result.reasons[0].startswith("function_call_output continuation: the answer does not")


def test_responses_reasoning_effort_maps_to_reasoning_object() -> None:
    """A level's reasoning_effort is sent as `reasoning.effort` on the Responses API."""
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(body_of(request))
        return server()(request)  # type: ignore[no-any-return]

    run("responses", handler, level_fields={"reasoning_effort": "none"})
    assert all(b["reasoning"] == {"effort": "none"} and "reasoning_effort" not in b for b in seen)
