"""A probe gate declared `critical: true` carries the flag into its result, so its failure
vetoes the decision on its own (judges always did; probes dropped it)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from qualify.decision.policy import gate_outcome
from qualify.gates.files import LoadedGate, load_gates
from qualify.gates.probe import GateContext
from qualify.gates.runner import run_gate
from qualify.httpclient.client import Client
from qualify.records import GateResult, Verdict
from qualify.trust.house import PolicyRules

SMOKE = """\
schema_version: 1
id: smoke-critical
check: smoke
stage: preflight
severity: required
critical: {critical}
params:
  prompt: What is the capital of France?
"""


def no_usage(request: httpx.Request) -> httpx.Response:
    """A server that answers but reports no `usage`: a smoke failure no real server gives on
    demand."""
    msg = {"role": "assistant", "content": "Paris."}
    return httpx.Response(
        200,
        json={
            "id": "c1",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}],
        },
    )


def one_gate(tmp: Path, critical: bool) -> LoadedGate:
    (tmp / "preflight").mkdir()
    (tmp / "preflight" / "smoke.yaml").write_text(SMOKE.format(critical=str(critical).lower()))
    gates, problems = load_gates(tmp, "preflight")
    assert problems == [] and len(gates) == 1
    return gates[0]


def run(gate: LoadedGate) -> GateResult:
    async def go() -> GateResult:
        client = Client("http://mock", transport=httpx.MockTransport(no_usage))
        kept: list[Any] = []
        ctx = GateContext(
            client=client,
            keep=lambda label, ex: kept.append(label) or [f"{label}.json"],
            write=lambda name, obj: [name],
            model="m",
            level="off",
        )
        try:
            return await run_gate(gate, ctx)
        finally:
            await client.aclose()

    return asyncio.run(go())


def test_critical_probe_failure_vetoes(tmp_path: Path) -> None:
    result = run(one_gate(tmp_path, critical=True))
    assert result.verdict is Verdict.FAIL
    assert result.critical is True
    # No policy pattern names it critical: the gate file alone makes it veto.
    outcome = gate_outcome(result, 1, [], PolicyRules(critical=[]), None)
    assert outcome.status == "vetoes", outcome


def test_non_critical_probe_failure_only_blocks(tmp_path: Path) -> None:
    result = run(one_gate(tmp_path, critical=False))
    assert result.verdict is Verdict.FAIL and result.critical is False
    outcome = gate_outcome(result, 1, [], PolicyRules(critical=[]), None)
    assert outcome.status == "blocks", outcome
