"""Production-shaped traffic against a real llama-server.

Trace replay: the shipped Mooncake-form trace (lengths and block ids, prompts synthesized) at its
own pace and four times faster, and the shipped agent-task trace (qualify's form, one session
per task), every answer judged; the cells' record judged by `capacity-replay` and measured
again from the kept exchanges as `verify` does. Agent sessions: three concurrent sessions of
three turns each (tool call, tool result, follow-up), every turn judged and kept, measured again
as `verify` does."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import start_llama_server

from qualify.capacity import traffic_judges
from qualify.capacity.loads import ReplayCell, Sessions
from qualify.capacity.record import Record
from qualify.capacity.reload import replay_again
from qualify.capacity.replay import replay_cell
from qualify.capacity.sessions import run_sessions, sessions_again
from qualify.capacity.settings import CapacitySettings, ReplaySettings
from qualify.capacity.slo import SloSettings, effective
from qualify.capacity.trace import KEPT_TRACE, read_trace, trace_sha256
from qualify.evidence.kept import AttemptView, NotKept
from qualify.gates.thresholds import Thresholds
from qualify.httpclient.client import Client
from qualify.records import StageResult, Verdict
from qualify.redact import Redactor
from qualify.serving.dialects import dialect
from qualify.serving.local import LocalPaths
from qualify.serving.sender import Sender

pytestmark = pytest.mark.integration
TRACES = Path(__file__).resolve().parents[2] / "traces"


@pytest.fixture
def server(local_server: LocalPaths) -> Iterator[str]:
    proc, url = start_llama_server(local_server, "-c", "4096", "-np", "2", "-t", "2", "--metrics")
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


SLO = effective(Thresholds(), SloSettings(e2e_s=120.0))
ATTEMPT = "capacity/attempt-001"


class Kept:
    """Keeps each exchange as the stage does (`NNNN-<label>.json` in the attempt)."""

    def __init__(self, run: Path) -> None:
        self.run, self.n = run, 0
        (run / ATTEMPT).mkdir(parents=True)

    def __call__(self, label: str, ex: Any) -> list[str]:
        self.n += 1
        name = f"{self.n:04d}-{label}.json"
        (self.run / ATTEMPT / name).write_text(json.dumps(ex.evidence(Redactor())))
        return [name]

    def view(self, data: dict[str, Any]) -> AttemptView:
        files = {f"{ATTEMPT}/{p.name}": "" for p in (self.run / ATTEMPT).iterdir()}
        now = "2026-01-01T00:00:00Z"
        result = StageResult(
            stage="capacity",
            attempt=1,
            status="finished",
            verdict=Verdict.PASS,
            data=data,
            started_at=now,
            ended_at=now,
        )
        return AttemptView(self.run, ATTEMPT, files, result)


def _replay(url: str, trace: str, scales: list[float], block_tokens: int, kept: Kept) -> list[Any]:
    """The trace replayed at each scale; each cell as the rebuild `verify` runs derives it from
    the kept exchanges (the stage keeps no figure of its own)."""
    text = (TRACES / trace).read_text()
    rows = read_trace(text)
    (kept.run / ATTEMPT / KEPT_TRACE).write_text(text)  # as the stage keeps it
    slo = SLO

    async def go() -> list[dict[str, Any]]:
        async with Client(url) as c:
            body = {"model": "m", "max_tokens": 32, "temperature": 0}
            sender = Sender(c, dialect("llama.cpp"), body, 300.0, 5.0, kept)
            return [
                await replay_cell(
                    sender,
                    rows,
                    scale=s,
                    block_tokens=block_tokens,
                    kind="prose",
                    max_tokens=32,
                    slo=slo,
                    lag_bound_ms=200.0,
                    drain_s=300.0,
                )
                | {"trace": trace, "trace_sha256": trace_sha256(text)}
                for s in scales
            ]

    raw = asyncio.run(go())
    view = kept.view({"load": {"replay": raw}})
    settings = PROSE.model_copy(update={"replay": ReplaySettings(block_tokens=block_tokens)})
    return [replay_again(view, ReplayCell.model_validate(c), settings, SLO) for c in raw]


PROSE = CapacitySettings.model_validate({"load": {"kind": "prose"}, "max_tokens": 32})


def test_a_mooncake_trace_replays_at_two_rates_every_answer_judged(
    server: str, tmp_path: Path
) -> None:
    """Both rates answered and judged, each cell measured from its kept exchanges with the
    function `verify` runs; prose answers judged as the JSON kind are broken there."""
    kept = Kept(tmp_path)
    cells = _replay(server, "mooncake-head.jsonl", [1.0, 4.0], 16, kept)
    slow, fast = cells
    assert [c["requests"] for c in cells] == [4, 4]
    assert [st["planned_s"] for st in slow["streams"]] == [0.0, 0.0, 3.052, 3.052]
    assert [st["planned_s"] for st in fast["streams"]] == [0.0, 0.0, 0.763, 0.763]
    assert slow["completed"] == fast["completed"] == 4
    assert all(st.get("completion_tokens") for st in slow["streams"])
    record = Record.model_validate({"load": {"replay": cells}})
    verdicts = traffic_judges.replay(record, traffic_judges.NoParams(), Thresholds())
    assert all(v.verdict in (Verdict.PASS, Verdict.FAIL) for v in verdicts)
    assert not any(v.reasons and "broken" in v.reasons[0] for v in verdicts), verdicts
    print("replay figures:", [(c["cell"], c["goodput"], c["window_s"], c["pace"]) for c in cells])
    as_json = CapacitySettings.model_validate(
        {"load": {"kind": "json"}, "max_tokens": 32, "replay": {"block_tokens": 16}}
    )
    view = kept.view({"load": {"replay": cells}})
    sealed = ReplayCell.model_validate(slow)
    again = replay_again(view, sealed, as_json, SLO)
    assert again["broken"] == 4  # prose answers judged as the JSON kind: every one broken
    # the send times and prompts come from the kept trace: another block size gives other
    # prompts than the ones sent, another trace another digest; both are refused
    other = as_json.model_copy(update={"replay": ReplaySettings(block_tokens=8)})
    with pytest.raises(NotKept, match="not the request of the trace's row 1"):
        replay_again(view, sealed, other, SLO)
    with pytest.raises(NotKept, match="not the trace"):
        other_trace = sealed.model_copy(update={"trace_sha256": "0" * 64})
        replay_again(view, other_trace, as_json, SLO)


def test_the_agent_task_trace_replays_one_session_per_task(server: str, tmp_path: Path) -> None:
    (cell,) = _replay(server, "agent-tasks.jsonl", [2.0], 16, Kept(tmp_path))
    assert cell["requests"] == 11 and cell["sessions"] == 11
    assert cell["completed"] + cell["cut"] == 11
    print("agent trace:", cell["cell"], cell["goodput"], cell["window_s"], cell["broken"])


def test_agent_sessions_run_each_turn_on_the_previous_answers(server: str, tmp_path: Path) -> None:
    kept = Kept(tmp_path)

    async def go() -> dict[str, Any]:
        async with Client(server) as c:
            body = {"model": "m", "max_tokens": 48, "temperature": 0}
            sender = Sender(c, dialect("llama.cpp"), body, 300.0, 5.0, kept)
            return await run_sessions(sender, 3, 48)

    raw = asyncio.run(go())
    # the figures are the ones `verify` derives from the kept turns (the stage keeps none)
    sealed = Sessions.model_validate(raw)
    out = sessions_again(kept.view({"load": {"sessions": raw}}), sealed, SLO)
    assert out["count"] == 3 and len(out["turns"]) == 9 and out["judged"] == 9
    by_turn = out["prompt_tokens_by_turn"]
    assert by_turn[0] < by_turn[1] < by_turn[2]  # the prefix grows turn by turn
    record = Record.model_validate({"load": {"sessions": out}})
    (verdict,) = traffic_judges.sessions(record, traffic_judges.NoParams(), Thresholds())
    assert verdict.verdict in (Verdict.PASS, Verdict.FAIL)
    assert out["turns"] == raw["turns"]
    print("sessions:", out["ttft_p50_s_by_turn"], by_turn, out["cached_tokens_by_turn"])
    print("sessions verdict:", verdict.verdict.value, verdict.reasons[:4])


def test_the_capacity_stage_replays_a_trace_and_runs_sessions(
    candidate_factory: Callable[..., Path], stage_runner: Any
) -> None:
    """The stage itself, one matrix cell, no knee search nor soak: the trace at twice its pace
    and two sessions, written, derived from the attempt's kept files by the rebuild `verify`
    runs (the stage judges once from those), and judged by `replay` and `sessions`."""
    trace = TRACES / "mooncake-head.jsonl"
    cand = candidate_factory(
        "traffic",
        stages=["capacity"],
        replace={
            "lengths = [256, 2048]": "lengths = [128]",
            "concurrency = [1, 2]": "concurrency = [1]",
            'kinds = ["prose", "code", "json", "list"]': "kinds = []",
            "load = { length = 256,": "load = { enabled = false, length = 128,",
            "soak = { rate_fraction = 0.75 }": (
                "soak = { enabled = false }\n"
                f'replay = {{ trace = "{trace}", scales = [2.0], block_tokens = 16 }}\n'
                "sessions = { count = 2, max_tokens = 32 }"
            ),
        },
    )
    result = stage_runner(cand).stage("capacity")
    assert result.status == "finished", result.reasons
    (cell,) = result.data["load"]["replay"]
    assert cell["cell"] == "replay-2x" and cell["requests"] == 4
    assert cell["trace_sha256"] == trace_sha256(trace.read_text())
    sessions = result.data["load"]["sessions"]
    assert sessions["count"] == 2 and len(sessions["turns"]) == 6
    gates = {g.gate: g.verdict for g in result.gates}
    assert gates["replay@replay-2x"] in (Verdict.PASS, Verdict.FAIL)
    assert gates["sessions"] in (Verdict.PASS, Verdict.FAIL)
    assert gates["soak-acceptance"] is Verdict.SKIPPED
    # the CSV export's rows: one per replayed request, one per turn, the conversation (the
    # tool offered in every turn) growing turn by turn
    from qualify.capacity.record import Record as CapacityRecord
    from qualify.export.requests import capacity_requests

    rows = list(capacity_requests(CapacityRecord.model_validate(result.data), None))
    assert [r.cell for r in rows if r.part == "replay"] == ["replay-2x"] * 4
    turns = {r.cell: r for r in rows if r.part == "sessions"}
    assert sorted(turns) == [f"s{s}-t{t}" for s in (1, 2) for t in (1, 2, 3)]
    for s in (1, 2):
        grown = [turns[f"s{s}-t{t}"].prompt_tokens or 0 for t in (1, 2, 3)]
        assert 0 < grown[0] < grown[1] < grown[2], grown
    print(
        "stage gates:",
        {k: v.value for k, v in gates.items() if k in ("replay@replay-2x", "sessions")},
    )


def test_the_knee_search_can_follow_the_trace_s_arrival_pattern(
    candidate_factory: Callable[..., Path], stage_runner: Any
) -> None:
    """`load.arrival = "trace"`: each knee step sends in the trace's pattern (trains of two,
    then a lull) at the step's rate; the stage keeps the trace, and the rebuild `verify` runs
    derives every step's send times from that kept copy (the stage judges once from it)."""
    trace = TRACES / "mooncake-head.jsonl"
    cand = candidate_factory(
        "trace-knee",
        stages=["capacity"],
        replace={
            "lengths = [256, 2048]": "lengths = [128]",
            "concurrency = [1, 2]": "concurrency = [1]",
            'kinds = ["prose", "code", "json", "list"]': "kinds = []",
            "load = { length = 256, start_rps = 0.2, step_s = 12,": (
                'load = { arrival = "trace", length = 128, start_rps = 0.5, step_s = 8,'
            ),
            "max_steps = 4, refine = 1, burst = 4,": "max_steps = 2, refine = 0, burst = 0,",
            "soak = { rate_fraction = 0.75 }": (
                "soak = { enabled = false }\n"
                f'replay = {{ trace = "{trace}", scales = [4.0], block_tokens = 16 }}'
            ),
        },
    )
    runner = stage_runner(cand)
    result = runner.stage("capacity")
    assert result.status == "finished", result.reasons
    steps = result.data["load"]["cells"]
    assert steps and all(c["arrival"] == "trace" for c in steps)
    first = steps[0]
    assert first["label"] == "load-trace-0.5rps" and first["requests"] == 4
    # the pattern's gaps 0, 3.052 s, 0 and their mean back to the start, scaled to a mean of
    # 2 s: a train of two, 6 s of lull, a train of two
    assert [st["planned_s"] for st in first["streams"]] == [0.0, 0.0, 6.0, 6.0]
    gates = {g.gate: g for g in result.gates}
    assert not any("cannot be judged" in r for g in gates.values() for r in g.reasons), gates
    attempt = runner.run.path / "capacity" / f"attempt-{result.attempt:03d}"
    assert (attempt / KEPT_TRACE).read_text() == trace.read_text()
