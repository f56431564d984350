"""Budgets that fit thinking models, reasoning-only completions named apart from wrong answers,
and the Responses API's cut answer read as vLLM 0.26 sends it (recorded bodies)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from preflight_fakes import body_of, chat, json_response, run, stream_response

from qualify.preflight.budget import allowance
from qualify.records import Verdict

VLLM = Path(__file__).resolve().parents[2] / "fixtures" / "engines" / "vllm"


OFF = {"chat_template_kwargs": {"enable_thinking": False}}
ON = {"chat_template_kwargs": {"enable_thinking": True}}


@pytest.mark.parametrize(
    ("fields", "level", "by_level", "want"),
    [
        ({"thinking_token_budget": 96}, "think", {}, (96, "the level's thinking_token_budget")),
        ({"reasoning_effort": "none"}, "off", {}, (0, "the level turns reasoning off")),
        (OFF, "off", {"off": 9}, (0, "the level turns reasoning off")),
        ({"reasoning_effort": "high"}, "high", {}, (2048, "stages.preflight.reasoning_tokens")),
        (ON, "think", {"think": 512}, (512, "stages.preflight.reasoning_tokens_at.think")),
        ({}, "default", {}, (0, "the level asks for no reasoning")),
    ],
)  # fmt: skip
def test_allowance_per_level(
    fields: dict[str, Any], level: str, by_level: dict[str, int], want: tuple[int, str]
) -> None:
    assert allowance(fields, 2048, level, by_level) == want


def test_answer_budgets_grow_by_the_allowance_and_cut_budgets_stay() -> None:
    """smoke's answer budget gets the level's reasoning on top; truncation's stays exact."""
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(body_of(request))
        return json_response(chat("Paris.", finish="length", tokens=8))

    run("smoke", handler, reasoning_tokens=1000)
    run("truncation", handler, reasoning_tokens=1000)
    smoke, trunc = sent[0], sent[1]
    assert smoke["max_tokens"] == 64 + 1000  # the context's default answer budget
    assert trunc["max_tokens"] == 8  # the gate's cut, whatever the level


@pytest.mark.parametrize("gate_id", ["smoke", "garble", "json", "tool-result"])
def test_reasoning_only_is_named_not_a_wrong_answer(gate_id: str) -> None:
    """The budget spent in reasoning: inconclusive, named, with the allowance it had."""
    only = chat("", reasoning="Let me think about it " * 20, field="reasoning", finish="length")
    result = run(gate_id, lambda r: json_response(only), reasoning_tokens=128)
    assert result.verdict is Verdict.INCONCLUSIVE, result.reasons
    assert "reasoning-only completion" in result.reasons[0]
    assert "128 of them allowed for reasoning" in result.reasons[0]


def test_reasoning_only_as_vllm_026_sends_it() -> None:
    """Recorded: SmolLM2 at enable_thinking with --reasoning-parser qwen3, all reasoning and
    finish_reason stop: named as ending inside reasoning; soft-empty fails it."""
    recorded = json.loads((VLLM / "chat_completion.json").read_text())
    smoke = run("smoke", lambda r: json_response(recorded))
    assert smoke.verdict is Verdict.INCONCLUSIVE
    assert "ended inside reasoning (finish_reason=stop" in smoke.reasons[0]
    soft = run("soft-empty", lambda r: json_response(recorded))
    assert soft.verdict is Verdict.FAIL


def _responses(plain: str, stream: str) -> Any:
    def handler(request: httpx.Request) -> httpx.Response:
        body = body_of(request)
        if body.get("stream"):
            return stream_response((VLLM / stream).read_bytes())
        if isinstance(body.get("input"), list) or "tools" in body:
            return json_response(json.loads((VLLM / "responses.json").read_text()))
        return json_response(json.loads((VLLM / plain).read_text()))

    return handler


def test_responses_recorded_answer_and_stream_pass() -> None:
    """vLLM 0.26's Responses answer and its stream (recorded) pass the plain and stream parts."""
    result = run("responses", _responses("responses.json", "responses_stream.sse"))
    assert result.metrics["parts"]["plain"] == "pass", result.reasons
    assert result.metrics["parts"]["stream"] == "pass", result.reasons


def test_responses_cut_in_reasoning_is_named() -> None:
    """status incomplete, incomplete_details.reason max_output_tokens, reasoning only (the
    recorded cut answer and stream): reasoning-only, inconclusive, not an order error."""
    result = run(
        "responses", _responses("responses_incomplete.json", "responses_stream_reasoning.sse")
    )
    assert result.metrics["parts"]["plain"] == "inconclusive"
    assert result.metrics["parts"]["stream"] == "inconclusive"
    plain = next(r for r in result.reasons if r.startswith("plain call"))
    assert "incomplete (max_output_tokens)" in plain and "reasoning-only" in plain
