"""Each preflight gate passes a correct answer and fails a wrong one, in each engine's shape."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from preflight_fakes import (
    body_of,
    call,
    chat,
    delta,
    json_response,
    run,
    sse,
    stream_response,
    usage_chunk,
)

from qualify.records import Verdict


def answer(obj: dict[str, Any]) -> Any:
    return lambda request: json_response(obj)


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_smoke_passes_visible_answer_and_names_reasoning_only(field: str) -> None:
    """A visible answer passes; an answer that is all reasoning is named reasoning-only and left
    inconclusive (not a wrong answer: soft-empty is the gate that fails it), in vLLM and SGLang
    names; an empty answer with no reasoning fails."""
    ok = run("smoke", answer(chat("Paris is the capital.", reasoning="think", field=field)))
    assert ok.verdict is Verdict.PASS, ok.reasons
    only = run("smoke", answer(chat("", reasoning="The capital is Paris.", field=field)))
    assert only.verdict is Verdict.INCONCLUSIVE
    assert "reasoning-only completion" in only.reasons[0]
    assert only.metrics["reasoning_only"] is True
    empty = run("smoke", answer(chat("", field=field)))
    assert empty.verdict is Verdict.FAIL and "no visible answer" in empty.reasons[0]


def test_smoke_without_usage_fails() -> None:
    """An answer without usage.completion_tokens fails: tokens are counted from usage only."""
    body = chat("Paris.")
    del body["usage"]
    result = run("smoke", answer(body))
    assert result.verdict is Verdict.FAIL
    assert result.reasons == ["the response carries no usage.completion_tokens"]


def test_level_fields_are_merged_into_requests() -> None:
    """The reasoning level's fields go into every request the gate sends."""
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(body_of(request))
        return json_response(chat("Paris."))

    run("smoke", handler, level_fields={"reasoning_effort": "none", "thinking_budget_tokens": 8})
    assert seen[0]["reasoning_effort"] == "none" and seen[0]["thinking_budget_tokens"] == 8


def test_json_schema_pass_and_specific_fail() -> None:
    """Valid JSON passes; a wrong type fails naming the field, the value and the expectation."""
    good = '{"city": "Paris", "country": "France", "population": 2100000}'
    assert run("json", answer(chat(good))).verdict is Verdict.PASS
    bad = run("json", answer(chat('{"city": "Paris", "country": "France", "population": "many"}')))
    assert bad.verdict is Verdict.FAIL
    assert bad.reasons == ["content.population 'many' is not of type 'integer'"]


def test_json_cut_off_says_so() -> None:
    """Content cut by the token limit fails as not JSON, and says it was cut off."""
    bad = run("json", answer(chat('{"city": "Par', finish="length")))
    assert bad.verdict is Verdict.FAIL
    assert "cut off by finish_reason=length" in bad.reasons[0]


def tool_server(calls: dict[str, dict[str, Any]]) -> Any:
    """Answers each typed-tools request with the call given for the tool its prompt names."""

    def handler(request: httpx.Request) -> httpx.Response:
        prompt = body_of(request)["messages"][0]["content"]
        name = next(n for n in calls if n in prompt)
        return json_response(chat(tool_calls=[call(name, calls[name])], finish="tool_calls"))

    return handler


GOOD_CALLS = {
    "get_weather": {"city": "Paris", "unit": "celsius"},
    "book_table": {
        "restaurant": "Chez Lune",
        "party_size": 4,
        "contact": {"name": "A", "phone": "555"},
    },
    "add_tags": {"doc_id": "doc-42", "tags": ["urgent"]},
}


def test_typed_tools_pass_every_tool() -> None:
    """Three attempts, one per tool (enum, integer and nested object, array): all valid passes."""
    result = run("typed-tools", tool_server(GOOD_CALLS))
    assert result.verdict is Verdict.PASS, result.reasons
    assert [a.metrics["expect_tool"] for a in result.attempts] == [
        "get_weather",
        "book_table",
        "add_tags",
    ]


def test_typed_tools_fail_names_the_argument() -> None:
    """An enum value outside the schema fails with the tool, the field path and the choices."""
    calls = {**GOOD_CALLS, "get_weather": {"city": "Paris", "unit": "kelvin"}}
    result = run("typed-tools", tool_server(calls))
    assert result.verdict is Verdict.FAIL
    assert result.reasons == [
        "attempt 1/3: tool get_weather: arguments.unit 'kelvin' is not one of "
        "['celsius', 'fahrenheit']"
    ]


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (
            {"restaurant": "X", "party_size": "four", "contact": {"name": "A", "phone": "555"}},
            "arguments.party_size 'four' is not of type 'integer'",
        ),
        (
            {"restaurant": "X", "party_size": 2, "contact": {"name": "A"}},
            "arguments.contact 'phone' is a required property",
        ),
    ],
)
def test_typed_tools_integer_and_nested_object(args: dict[str, Any], why: str) -> None:
    """Integer and nested-object violations are named by their full path."""
    result = run("typed-tools", tool_server({**GOOD_CALLS, "book_table": args}))
    assert result.verdict is Verdict.FAIL
    assert result.reasons == [f"attempt 2/3: tool book_table: {why}"]


def test_typed_tools_wrong_tool_and_no_call() -> None:
    """Calling an undeclared tool fails; an answer without a call fails and quotes it."""
    result = run(
        "typed-tools-auto", answer(chat(tool_calls=[call("get_time", {})], finish="tool_calls"))
    )
    assert "not a declared tool" in result.reasons[0]
    result = run("typed-tools-auto", answer(chat("I cannot check the weather.")))
    assert result.verdict is Verdict.FAIL
    assert "no tool call" in result.reasons[0] and "I cannot check" in result.reasons[0]


def test_typed_tools_sends_tool_choice() -> None:
    """The gate's tool_choice and tools go in the request."""
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(body_of(request))
        return tool_server(GOOD_CALLS)(request)  # type: ignore[no-any-return]

    run("typed-tools-auto", handler)
    assert seen[0]["tool_choice"] == "auto" and len(seen[0]["tools"]) == 3


def vllm_tool_stream(arguments: list[str]) -> bytes:
    """vLLM's hermes parser: id and name first, then argument fragments by index."""
    first = {
        "tool_calls": [
            {
                "index": 0,
                "id": "chatcmpl-tool-1",
                "type": "function",
                "function": {"name": "book_table"},
            }
        ]
    }
    frags = [delta({"tool_calls": [{"index": 0, "function": {"arguments": a}}]}) for a in arguments]
    return sse(
        delta({"role": "assistant"}),
        delta(first),
        *frags,
        delta({}, finish="tool_calls"),
        usage_chunk(40),
    )


def test_streaming_tools_join_fragments() -> None:
    """Argument fragments joined by index form a valid call: pass."""
    parts = [
        '{"restaurant": "Chez',
        ' Lune", "party_size": 4, ',
        '"contact": {"name": "A", "phone": "555"}}',
    ]
    result = run("streaming-tools", lambda r: stream_response(vllm_tool_stream(parts)))
    assert result.verdict is Verdict.PASS, result.reasons
    assert result.metrics["tool_calls"][0]["arguments"] == "".join(parts)


def test_streaming_tools_invalid_joined_call_fails() -> None:
    """Fragments that join into arguments violating the schema fail, naming the field."""
    parts = ['{"restaurant": "X", "party_size": 0, ', '"contact": {"name": "A", "phone": "555"}}']
    result = run("streaming-tools", lambda r: stream_response(vllm_tool_stream(parts)))
    assert result.verdict is Verdict.FAIL
    assert result.reasons == [
        "tool book_table: arguments.party_size 0 is less than the minimum of 1"
    ]


ARGS = '{"restaurant": "X", "party_size": 2, "contact": {"name": "A", "phone": "555"}}'


def test_streaming_tools_without_id_fails() -> None:
    """A streamed call whose deltas never carry an id fails: a client cannot answer it."""
    body = sse(
        delta(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "function": {
                            "name": "book_table",
                            "arguments": ARGS,
                        },
                    }
                ]
            }
        ),
        delta({}, finish="tool_calls"),
        usage_chunk(30),
    )
    result = run("streaming-tools", lambda r: stream_response(body))
    assert result.verdict is Verdict.FAIL
    assert "no id" in result.reasons[0]


def test_tool_result_uses_value() -> None:
    """An answer stating the value only the tool result holds passes; a guess fails."""
    assert run("tool-result", answer(chat("It is 13.4 C in Paris."))).verdict is Verdict.PASS
    bad = run("tool-result", answer(chat("It is about 20 degrees.")))
    assert bad.verdict is Verdict.FAIL
    assert "does not contain '13.4'" in bad.reasons[0]


def test_tool_result_echoed_markup_fails() -> None:
    """Echoing the tool turn's markup is not using the result."""
    bad = run("tool-result", answer(chat('<tool_response>\n{"temperature": "13.4 C"}')))
    assert bad.verdict is Verdict.FAIL
    assert bad.reasons == [
        "the answer echoes tool markup ['<tool_response>'] instead of using the result"
    ]


def test_tool_result_sends_role_tool_turn() -> None:
    """The request carries the assistant's call and the `role: tool` result with its id."""
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(body_of(request))
        return json_response(chat("13.4 C"))

    run("tool-result", handler)
    msgs = seen[0]["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool"]
    assert msgs[2]["tool_call_id"] == msgs[1]["tool_calls"][0]["id"]


def test_truncation_pass_and_fail() -> None:
    """`length` for text and for a started tool call passes; `stop` at the limit fails."""

    def handler(request: httpx.Request) -> httpx.Response:
        if "tools" in body_of(request):
            part = call("book_table", '{"restaurant": "Ch')
            return json_response(chat(tool_calls=[part], finish="length", tokens=14))
        return json_response(chat("Once upon a time", finish="length", tokens=8))

    assert run("truncation", handler).verdict is Verdict.PASS
    bad = run("truncation", answer(chat("Once upon a time", finish="stop", tokens=8)))
    assert bad.verdict is Verdict.FAIL
    assert bad.reasons[0] == (
        "text: finish_reason is 'stop' with max_tokens=8 (8 completion tokens), expected 'length'"
    )


def test_truncation_tool_not_started_is_inconclusive() -> None:
    """When no tool call began, the tool half was not exercised: inconclusive, never pass."""
    result = run("truncation", answer(chat("Sure, here", finish="length", tokens=8)))
    assert result.verdict is Verdict.INCONCLUSIVE
    assert "began no tool call" in result.reasons[0]


LLAMA_OVER = {
    "error": {
        "code": 400,
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 10900,
        "n_ctx": 8192,
        "message": "request (10900 tokens) exceeds the available context size (8192 tokens), "
        "try increasing it",
    }
}
VLLM_OVER = {
    "error": {
        "type": "BadRequestError",
        "param": "input_tokens",
        "code": 400,
        "message": "This model's maximum context length is 8192 tokens. However, your prompt "
        "contains 10900 input tokens, which exceeds this limit even without any output tokens. "
        "Please reduce the length of the input prompt.",
    }
}
SGLANG_OVER = {
    "object": "error",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
    "message": "The input (10900 tokens) is longer than the model's context length (8192 tokens).",
}


def over_server(reject: httpx.Response, after: httpx.Response) -> Any:
    def handler(request: httpx.Request) -> httpx.Response:
        long = len(body_of(request)["messages"][0]["content"]) > 10000
        return reject if long else after

    return handler


@pytest.mark.parametrize(
    "body", [LLAMA_OVER, VLLM_OVER, SGLANG_OVER], ids=["llama", "vllm", "sglang"]
)
def test_over_length_each_engine_passes(body: dict[str, Any]) -> None:
    """Each engine's over-length 400 names the window; with a normal answer after, it passes."""
    result = run("over-length", over_server(json_response(body, 400), json_response(chat("Hello"))))
    assert result.verdict is Verdict.PASS, result.reasons


@pytest.mark.parametrize(
    ("reject", "after", "why"),
    [
        (json_response(chat("ok")), json_response(chat("Hello")), "was accepted"),
        (
            json_response({"error": {"message": "boom"}}, 500),
            json_response(chat("Hi")),
            "got HTTP 500",
        ),
        (
            json_response({"error": {"message": "bad request"}}, 400),
            json_response(chat("Hi")),
            "does not name the 8192-token limit",
        ),
        (
            json_response(LLAMA_OVER, 400),
            json_response({"error": {"message": "dead"}}, 503),
            "did not stay healthy",
        ),
    ],
    ids=["accepted", "5xx", "unnamed-limit", "unhealthy-after"],
)
def test_over_length_failures(reject: httpx.Response, after: httpx.Response, why: str) -> None:
    """Accepting, a 5xx, a 4xx that hides the limit, or a sick server afterwards: all fail."""
    result = run("over-length", over_server(reject, after))
    assert result.verdict is Verdict.FAIL
    assert why in result.reasons[0], result.reasons


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_soft_empty_fails_when_reasoning_takes_the_budget(field: str) -> None:
    """Reasoning up to the limit with nothing visible fails and says the budget was used."""
    body = chat("", reasoning="Let me think. " * 20, field=field, finish="length", tokens=128)
    result = run("soft-empty", answer(body))
    assert result.verdict is Verdict.FAIL
    assert result.reasons[0].startswith("soft-empty: reasoning used the whole budget")
    assert "128 completion tokens" in result.reasons[0]


def test_soft_empty_passes_with_visible_answer_and_flags_stop_inside_reasoning() -> None:
    """Visible content after reasoning passes; ending inside reasoning fails, saying so."""
    ok = run("soft-empty", answer(chat("Ice is less dense.", reasoning="Density...")))
    assert ok.verdict is Verdict.PASS
    bad = run("soft-empty", answer(chat("", reasoning="Ice floats.", finish="stop")))
    assert bad.verdict is Verdict.FAIL
    assert "ended inside reasoning" in bad.reasons[0]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("<think>hmm</think> The forest is red.", "leaked reasoning or tool markup"),
        ("The forest<|im_start|> is quiet and golden today.", "special tokens"),
        ("Leaves fall" + "!" * 18, "repeated 18 times"),
        ("Осенний лес золотой и тихий, листья падают", "drift into another script"),
    ],
)
def test_garble_fails_each_kind(text: str, why: str) -> None:
    """Each kind of garble fails with its own reason."""
    result = run("garble", answer(chat(text)))
    assert result.verdict is Verdict.FAIL
    assert why in result.reasons[0], result.reasons


def test_garble_clean_passes_and_empty_is_inconclusive() -> None:
    """Clean prose passes (17 repeats are allowed); no visible text is inconclusive."""
    clean = "Golden leaves drift down the quiet path" + "." * 17
    assert run("garble", answer(chat(clean))).verdict is Verdict.PASS
    assert run("garble", answer(chat("", reasoning="..."))).verdict is Verdict.INCONCLUSIVE


def test_truncated_call_reported_complete_fails() -> None:
    """A cut-off call reported as `tool_calls` fails: a client would run broken arguments."""

    def handler(request: httpx.Request) -> httpx.Response:
        if "tools" in body_of(request):
            part = call("book_table", '{"restaurant": "Ch')
            return json_response(chat(tool_calls=[part], finish="tool_calls", tokens=14))
        return json_response(chat("Once upon a time", finish="length", tokens=8))

    result = run("truncation", handler)
    assert result.verdict is Verdict.FAIL
    assert any(
        "tool call book_table: reported complete but arguments are not JSON" in r
        for r in result.reasons
    ), result.reasons
