"""Speculation checked lossless: at temperature 0 a drafter may change speed, never the answer
(beyond the numeric effects of batched verification, which show late in an answer, if at all).

Each paired request (same run, same prompt, both lanes answered) is compared on its visible
answer: identical, or the position of the first divergence, counted in the control's stream
chunks (one token each when the control does not draft), with a few characters of each answer
from there. Computed from the kept exchanges (`qualify.ab.rebuild`), the figures `verify`
derives again.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from qualify.httpclient.chat import ChatOutcome

Answers = dict[tuple[str, int, str], ChatOutcome]  # (lane, run, prompt) -> its answer
SNIPPET = 24


def _divergence(run: int, prompt: str, cand: ChatOutcome, ctrl: ChatOutcome) -> dict[str, Any]:
    a, b = cand.content, ctrl.content
    at = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    return {
        "run": run,
        "prompt": prompt,
        "token": bisect_right(ctrl.content_ends, at),
        "of": len(ctrl.content_ends),
        "control": ctrl.content[at : at + SNIPPET],
        "candidate": cand.content[at : at + SNIPPET],
    }


def compare(answers: Answers, runs: dict[str, list[dict[str, Any]]], temperature: float) -> Any:
    """The `lossless` block of the A/B record: pairs, identical ones, control tokens compared
    and those before each pair's first divergence, and every divergent pair."""
    if temperature != 0:
        return {"why": f"sampled at temperature {temperature}: answers may differ by sampling"}
    answered = {
        (lane, r["run"], q["prompt"])
        for lane, rs in runs.items()
        for r in rs
        for q in r["requests"]
        if q["failed"] is None
    }
    out: dict[str, Any] = {"pairs": 0, "identical": 0, "tokens": 0, "tokens_before": 0}
    divergent = []
    for lane, run, prompt in sorted(answered):
        if lane != "candidate" or ("control", run, prompt) not in answered:
            continue
        cand, ctrl = answers[(lane, run, prompt)], answers[("control", run, prompt)]
        out["pairs"] += 1
        out["tokens"] += len(ctrl.content_ends)
        if cand.content == ctrl.content:
            out["identical"] += 1
            out["tokens_before"] += len(ctrl.content_ends)
            continue
        d = _divergence(run, prompt, cand, ctrl)
        out["tokens_before"] += d["token"]
        divergent.append(d)
    return {**out, "divergent": divergent}
