"""The load results of the capacity record, energy per token per A/B lane, the causes of the
context stage's newer gates and of reasoning-only answers, advisory gates as caveats, and the
hardware from the vram record: each read back from the evidence it comes from."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import decision_contract_run as contract_run
from decision_contract_run import INC, F, P, g

from qualify.decision import causes, document
from qualify.decision.conclude import setup
from qualify.decision.render import preview
from qualify.present.reading import run_view
from qualify.present.record import AttemptRecord, GateOutcome, GateVerdict
from qualify.records import Verdict

UNMEASURED = "unmeasured: no GPU telemetry (nvml: NVML did not initialise)"
SLO = {"ignored": [], "ttft_s": 4.0, "tpot_s": 0.2, "e2e_s": 15.0, "percentile": 95.0}
STATEMENT = (
    "serves 0.566 req/s at goodput 100% (95% interval 65%–100%, 7 requests) under SLO "
    "TTFT ≤ 4 s, TPOT ≤ 0.2 s, E2E ≤ 15 s (p95)"
)


def _cell(name: str, rate: float | None, goodput: float, joules: float | None) -> dict[str, Any]:
    energy = {"joules": joules, "why": None if joules else UNMEASURED, "cards": {}}
    if joules:
        energy["j_per_output_token"] = joules / 256
    return {
        "cell": name,
        "label": f"load-{name}",
        "arrival": "burst" if rate is None else "poisson",
        "rate_rps": rate,
        "offered_rps": rate,
        "achieved_rps": 0.61,
        "requests": 10,
        "failed": 0,
        "cut": 0,
        "unfinished": 4 if goodput < 0.9 else 0,
        "broken": 0,
        "goodput": goodput,
        "goodput_ci95": [goodput / 2, 1.0],
        "goodput_rps": 0.409,
        "completion_tokens": 256,
        "energy": energy,
        "harness_error": None,
    }


def _capacity(joules: float | None) -> tuple[list[Any], dict[str, Any]]:
    soak = {
        "rate_rps": 0.424,
        "duration_s": 30.0,
        "planned": 15,
        "completed": 15,
        "hung": None,
        "progress": {
            "counter": "llamacpp:tokens_predicted_total",
            "generated_delta": 896.0,
            "scrapes": 33,
        },
        "ttft_drift": {"first_p50_s": 3.73, "last_p50_s": 1.79, "drift_pct": -52.1},
        "memory": {"source": "server process RSS (/proc)", "growth_mib": 104.9},
        "error_counters": {},
        "goodput": 0.8,
        "energy": {"joules": None, "why": UNMEASURED},
    }
    knee = {"statement": STATEMENT, "stopped": "saturated: goodput 0.40 < floor 0.9 at 0.8"}
    load = {
        "length": {"target": 256, "planned_tokens": 256},
        "slo": SLO | {"goodput_floor": 0.9},
        "lane": "candidate",
        "kind": "prose",
        "cells": [_cell("poisson-0.8rps", 0.8, 0.4, joules), _cell("burst-4", None, 1.0, None)],
        "knee": knee,
        "requests": 26,
        "wall_s": 56.0,
        "soak": soak,
    }
    matrix = [
        {
            "lane": "candidate",
            "cell": "256-c1",
            "length": 256,
            "concurrency": 1,
            "aggregate_output_tok_s": 53.0,
            "decode_tok_s_p50": 180.1,
            "failed": 0,
            "cut": 0,
            "goodput": 1.0,
            "energy": {"j_per_output_token": joules and 0.529, "why": None},
            "j_per_output_token": joules and 0.529,
            "run_records": [{"degenerate": 1}, {"degenerate": 0}],
        },
    ]
    answers = {
        "judged": 51,
        "broken": 1,
        "cells": [
            {"where": "json@1024", "broken": [{"stream": 1}]},
            {"where": "256-c1", "broken": []},
        ],
    }
    data = {"matrix": matrix, "load": load, "answers": answers, "slo": SLO, "degenerate": []}
    data |= {"engine": {"kv_tokens": 8192, "slots": 1}, "incumbent": {"status": "first"}}
    gates = [
        g("capacity", "goodput", P),
        g("capacity", "soak", P),
        g("capacity", "answers@json@1024", F),
        g("capacity", "answers@256-c1", P),
    ]
    return gates, data


def _render(tmp: Path, joules: float | None = None, lane_energy: bool = False) -> str:
    plain = contract_run._ab

    def ab() -> tuple[list[Any], dict[str, Any]]:
        gates, data = plain()
        energy = {"joules": 120.0, "completion_tokens": 300, "j_per_output_token": 0.4}
        data["lanes"]["candidate"]["energy"] = energy | {"runs": 3}
        window = {"window_s": 2.0, "cards": {"0": {"joules": 300.0}, "1": {"joules": 250.0}}}
        data["lanes"]["candidate"]["runs"] = [{"run": 1, "energy": window}] * 2
        return gates, data

    contract_run._ab = ab if lane_energy else plain
    try:
        run = contract_run.build(tmp)
    finally:
        contract_run._ab = plain
    gates, data = _capacity(joules)
    contract_run._write(run, "capacity", gates, data)
    record = preview(run, setup(None))
    return document.render(run_view(run, record), record)


def _render_with(tmp: Path, change: Any) -> str:
    """The document of the contract run whose capacity record `change` edited first."""
    run = contract_run.build(tmp)
    gates, data = _capacity(None)
    change(data)
    contract_run._write(run, "capacity", gates, data)
    record = preview(run, setup(None))
    return document.render(run_view(run, record), record)


def test_the_capacity_section_shows_the_load_results_of_the_record(tmp_path: Path) -> None:
    text = _render(tmp_path)
    part = text.split("## Capacity", 1)[1].split("\n## ", 1)[0]
    line = next(x for x in part.splitlines() if x.startswith("Load ("))
    assert line.startswith(
        "Load (candidate lane, prose prompts of 256 tokens, 26 requests in 56 s)"
    )
    assert f"**{STATEMENT}**" in line
    assert "the knee search stopped: saturated: goodput 0.40 < floor 0.9 at 0.8" in line
    assert "`capacity/goodput`: pass" in line
    assert "SLOs: TTFT ≤ 4 s, TPOT ≤ 0.2 s, E2E ≤ 15 s at p95, goodput floor 90%" in line
    assert (
        "Soak: pass; 30 s at 0.424 req/s: 15 of 15 completed, goodput 80%; "
        "llamacpp:tokens_predicted_total +896 over 33 scrapes; TTFT p50 drift -52.1% "
        "(3.73 s -> 1.79 s); memory +104.9 MiB (server process RSS (/proc))" in line
    )
    assert (
        "Answers under load: 51 judged, 1 broken (in json@1024); `capacity/answers`: "
        "`capacity/answers@json@1024` fail" in line
    )
    assert f"Energy per output token: {UNMEASURED}" in line
    rows = [x for x in part.splitlines() if x.startswith("| poisson-0.8rps |")]
    assert rows == [
        "| poisson-0.8rps | poisson | 0.800 / 0.610 | 10 (4) | 40% (20%–100%) | 0.409 "
        "| unmeasured |"
    ]
    assert "| burst-4 | burst | burst / 0.610 | 10 | 100% (50%–100%) | 0.409 | unmeasured |" in part
    assert "| 256 | 53.0 (180.1), goodput 100% |" in part
    assert "1 degenerate answer(s) left out of every speed figure (kept as evidence)." in part


def test_energy_per_token_is_shown_where_measured(tmp_path: Path) -> None:
    """Joules over a cell's output tokens, per load cell and per matrix cell; per A/B lane from
    the ab record's lane energy, "unmeasured" with why where the lane has none."""
    text = _render(tmp_path, joules=128.0, lane_energy=True)
    assert (
        "| poisson-0.8rps | poisson | 0.800 / 0.610 | 10 (4) | 40% (20%–100%) | 0.409 | 0.5 J/tok |"
        in text
    )
    assert "| 256 | 53.0 (180.1), goodput 100%, 0.529 J/tok |" in text
    power = next(x for x in text.splitlines() if x.startswith("Mean power per card"))
    assert power == (
        "Mean power per card over each lane's timed runs: `smollm2-135m-ngram` GPU 0 150.0 W, "
        "GPU 1 125.0 W."
    )
    lanes = next(x for x in text.splitlines() if x.startswith("Lanes: "))
    assert (
        "`smollm2-135m-ngram` speculation none, KV not reported, 2 runs, energy 0.4 J/tok" in lanes
    )
    assert (
        "`smollm2-135m-nospec` speculation none, KV not reported, 0 runs, energy unmeasured "
        "(this A/B recorded no energy)" in lanes
    )


def _outcome(key: str, verdict: Verdict, metrics: dict[str, Any] | None = None) -> GateOutcome:
    stage, gate = key.split("/", 1)
    name, _, level = gate.partition("@")
    return GateOutcome(
        key=key,
        stage=stage,
        gate=gate,
        level=level if stage in ("preflight", "quality") and level else None,
        verdict=verdict,
        required=True,
        critical=False,
        status="pass" if verdict is Verdict.PASS else "blocks",
        reasons=[] if verdict is Verdict.PASS else [f"{name} said why"],
        metrics=metrics or {},
        authoritative=GateVerdict(attempt=1, verdict=verdict),
        tries=[AttemptRecord(number=1, verdict=verdict, files=[])],
    )


def _group(outcomes: list[GateOutcome]) -> list[causes.Cause]:
    record = contract_run_record(outcomes)
    return causes.group(record, "speculation method=ngram")


def contract_run_record(outcomes: list[GateOutcome]) -> Any:
    from qualify.present.record import DecisionRecord, Evaluation

    base = DecisionRecord.model_construct()
    return base.model_copy(
        update={
            "evaluation": Evaluation.model_construct(gates=outcomes, missing=[], reasons=[]),
            "integrity": [],
        }
    )


def test_reasoning_only_answers_are_their_own_cause() -> None:
    """A preflight gate whose answer ended inside reasoning (metrics `reasoning_only`) is not
    "cannot call tools": it is its own cause, against the control like the tool gates."""
    only = {"reasoning_only": True, "finish_reason": "stop"}
    groups = _group(
        [
            _outcome("preflight/garble@think", Verdict.INCONCLUSIVE, only),
            _outcome("preflight/smoke@think", Verdict.INCONCLUSIVE, only),
            _outcome("preflight/typed-tools@think", Verdict.FAIL),
            _outcome("quality/control-preflight-garble@think", Verdict.PASS),
            _outcome("quality/control-preflight-smoke@think", Verdict.PASS),
        ]
    )
    by = {c.family: c for c in groups}
    assert by["reasoning-only"].keys == ["preflight/garble@think", "preflight/smoke@think"]
    assert (
        by["reasoning-only"].title
        == "the answer ends inside reasoning, with nothing visible to judge"
    )
    assert by["reasoning-only"].tag == "differs"
    assert by["fitness"].keys == ["preflight/typed-tools@think"]


def test_the_context_stages_newer_gates_group_by_what_they_audit() -> None:
    groups = _group(
        [
            _outcome("context/ruler@1024", Verdict.FAIL),
            _outcome("context/ruler@4096", Verdict.FAIL),
            _outcome("context/deep-typed-tools@4096", Verdict.FAIL),
            _outcome("context/deep-streaming-tools@4096", Verdict.FAIL),
            _outcome("context/deep-tool-result@4096", Verdict.FAIL),
            _outcome("context/garble@4096", Verdict.FAIL),
            _outcome("capacity/answers@json@1024", Verdict.FAIL),
            _outcome("vram/telemetry", Verdict.INCONCLUSIVE),
            _outcome("vram/reserve", Verdict.INCONCLUSIVE),
        ]
    )
    by = {c.family: c.keys for c in groups}
    assert by["ruler"] == ["context/ruler@1024", "context/ruler@4096"]
    assert len(by["deep-tools"]) == 3
    assert by["garble"] == ["context/garble@4096"]
    assert by["load-answers"] == ["capacity/answers@json@1024"]
    assert by["vram-reserve"] == ["vram/telemetry", "vram/reserve"]
    assert len(groups) == 5


def test_no_verdict_the_gates_do_not_declare(tmp_path: Path) -> None:
    """The document judges nothing itself: no "Implausible" flag outside the gate files;
    advisory gates that did not pass are its caveats, parts that said the same thing once."""
    run = contract_run.build(tmp_path)
    gates, data = _capacity(None)
    for c in ("256-c1", "256-c2", "soak"):
        gate = g("capacity", f"energy@{c}", INC)
        gates.append(gate.model_copy(update={"reasons": [UNMEASURED]}))
    contract_run._write(run, "capacity", gates, data)
    record = preview(run, setup(None))
    assert {x.key for x in record.evaluation.gates if x.status == "advisory"} >= {
        "capacity/energy@soak"
    }, "energy is advisory in the gate files"
    text = document.render(run_view(run, record), record)
    assert "Implausible" not in text
    lines = [x for x in text.splitlines() if "capacity/energy" in x]
    assert len(lines) == 1, lines
    assert re.match(
        r"^- Advisory `capacity/energy@\*` inconclusive at 3 parts \(256-c1, 256-c2, soak\): ",
        lines[0],
    )


def test_driver_and_cuda_come_from_the_vram_records_hardware(tmp_path: Path) -> None:
    run = contract_run.build(tmp_path)
    text = document.render(run_view(run, rec := preview(run, setup(None))), rec)
    gpu = next(x for x in text.splitlines() if x.startswith("- GPU: "))
    assert "driver 580.159.04, CUDA 13.0" in gpu


# --- the incumbent at the candidate's edge (qualify.capacity.edge) ---------------------------


def test_the_decision_sets_both_lanes_side_by_side(tmp_path: Path) -> None:
    def add_edge(data: dict[str, Any]) -> None:
        cand = {**data["load"]["cells"][0], "step": 1, "pace": 0.62}
        data["load"]["cells"][0] = cand
        inc = {**cand, "cell": "incumbent-poisson-0.8rps", "goodput": 1.0, "pace": 0.97}
        inc["unfinished"] = 0
        data["load"]["incumbent"] = {"status": "measured", "why": None, "cells": [inc]}

    text = _render_with(tmp_path, add_edge)
    assert "The incumbent at the candidate's edge: the same arrivals" in text
    assert (
        "| 0.8 | 40%, pace 0.62, not held | 100%, pace 0.97, held | unmeasured / unmeasured |"
        in text
    )
    assert "At 0.8 req/s the incumbent held a rate the candidate did not." in text


def test_an_edge_not_run_says_why(tmp_path: Path) -> None:
    def not_run(data: dict[str, Any]) -> None:
        why = "the incumbent's window (512 tokens) cannot repeat the candidate's prompts"
        data["load"]["incumbent"] = {"status": "not run", "why": why, "cells": []}

    text = _render_with(tmp_path, not_run)
    assert (
        "The incumbent at the candidate's edge: not run (the incumbent's window (512 tokens) "
        "cannot repeat the candidate's prompts)." in text
    )


def test_no_incumbent_adds_nothing(tmp_path: Path) -> None:
    assert "candidate's edge" not in _render_with(tmp_path, lambda data: None)
