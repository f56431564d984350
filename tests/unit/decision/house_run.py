"""A house repository and a run made by hand, decided and signed the way `qualify run` does.

The run has an identity stage that passes and a vram stage judged from a telemetry attempt
written to give the verdict the test asks for, plus its own invocation attempt
(`run/attempt-001`: candidate copy, invocation, outcome), sealed after the decision and before
the signature.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import git
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from qualify.decision.conclude import Setup, conclude, setup, sign_decision
from qualify.evidence.signing import generate, load_private
from qualify.evidence.store import Attempt, RunDir
from qualify.present.record import DecisionRecord
from qualify.records import GateResult, StageResult, Verdict
from qualify.trust.repository import init, pin

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "smollm2" / "candidate.toml"
T = "2026-01-01T00:00:00Z"
HOUSE_POLICY = """\
version = 1
required = ["identity/*", "vram/*"]
critical = ["identity/*"]

[waivers]
approvers = ["*"]
max_days = 14
"""


def commit_policy(root: Path, text: str) -> None:
    (root / "house-policy.toml").write_text(text)
    repo = git.Repo(root)
    repo.git.add("house-policy.toml")
    repo.git.commit("-m", "house: policy")


def make_house(tmp: Path, text: str = HOUSE_POLICY) -> Path:
    root = tmp / "house"
    init(root)
    commit_policy(root, text)
    return root


def keypair(tmp: Path, name: str) -> tuple[Path, Path]:
    return generate(tmp / "keys" / name)


def pinned_house(tmp: Path) -> tuple[Path, tuple[Path, Path]]:
    """A house with the CI decision key pinned; returns the house and that key pair."""
    root = make_house(tmp)
    ci = keypair(tmp, "ci")
    pin(root, "decision", ci[1], "ci", "the CI runner signs decisions")
    return root, ci


def pin_waiver(root: Path, pub: Path, name: str) -> None:
    pin(root, "waiver", pub, name, f"{name} approves waivers")


def snapshot_ok(root: Path) -> bool:
    from qualify.trust.repository import snapshot

    return bool(snapshot(root).keys["decision"])


def candidate(tmp: Path, policy: str = "", name: str = "candidate.toml") -> Path:
    text = EXAMPLE.read_text().replace("[policy]\n", f"[policy]\n{policy}\n")
    path = tmp / "recipes" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def make_run(tmp: Path, cand: Path, vram: Verdict) -> tuple[RunDir, Attempt]:
    """The run, with its invocation attempt still open; returns it and that attempt's path."""
    run = RunDir(tmp / "ev" / "smollm2-135m-ngram" / "20260101T000000Z-000001")
    run.path.mkdir(parents=True)
    info = {
        "run_id": run.run_id,
        "candidate": "smollm2-135m-ngram",
        "candidate_path": str(cand),
        "candidate_sha256": hashlib.sha256(cand.read_bytes()).hexdigest(),
        "stages": ["identity", "vram"],
    }
    (run.path / "run.json").write_text(json.dumps(info))
    for stage, gate, v in (("identity", "model", Verdict.PASS),):
        att = run.new_attempt(stage)
        why = [] if v is Verdict.PASS else ["no telemetry"]
        g = GateResult(gate=gate, stage=stage, verdict=v, reasons=why)
        res = StageResult(
            stage=stage,
            attempt=1,
            status="finished",
            verdict=v,
            gates=[g],
            started_at=T,
            ended_at=T,
        )
        att.write_result(res)
        att.seal()
    _vram(run, vram)
    inv = run.new_attempt("run")
    inv.write_bytes("candidate.toml", cand.read_bytes())
    inv.write_json("invocation.json", {"argv": ["qualify", "run"], "at": T})
    return run, inv


def _vram(run: RunDir, v: Verdict) -> None:
    """The vram attempt, judged as the stage judges it from a telemetry attempt written here (so
    `verify` derives it again): one card whose free memory stays above the reserve (pass), falls
    below it (fail), or whose source named a problem at start (`vram/telemetry` inconclusive)."""
    from qualify.gates.files import default_gates_dir
    from qualify.gates.runner import judge_stage
    from qualify.gates.thresholds import Thresholds
    from qualify.records import worst
    from qualify.vram.series import COLUMNS, read_logs
    from qualify.vram.stage import build_record

    tel = run.new_attempt("telemetry")
    problems = ["no telemetry"] if v is Verdict.INCONCLUSIVE else []
    card = {"gpu": "0", "name": "GPU", "total_mib": 81920.0}
    header = {"version": 1, "columns": COLUMNS, "source": "nvml", "interval_ms": 250}
    tel.write_json(
        "header.json", header | {"t0_utc": T, "cards": [card], "start_problems": problems}
    )
    free = 100.0 if v is Verdict.FAIL else 40000.0
    lines = [{"mark": "identity", "t_s": 0.0}] + [
        [t, "identity", "0", free, 1.0, 90.0] for t in (0.0, 0.25)
    ]
    tel.write_bytes("samples.000.jsonl", "".join(json.dumps(x) + "\n" for x in lines).encode())
    tel.write_json("summary.json", {"missed_scrapes": 0, "missed_examples": [], "failure": None})
    tel.seal()
    t = Thresholds()
    record = build_record(read_logs(run), None, ["identity"], t.vram_reserve_gib)
    gates, _ = judge_stage("vram", default_gates_dir(), record, t)
    att = run.new_attempt("vram")
    data = record.model_dump(mode="json")
    verdict = worst([g.verdict for g in gates])
    att.write_result(
        StageResult(
            stage="vram",
            attempt=1,
            status="finished",
            verdict=verdict,
            gates=gates,
            data=data,
            started_at=T,
            ended_at=T,
        )
    )
    att.seal()


def decide(
    run: RunDir, inv: Attempt, s: Setup, key: Path | None
) -> tuple[DecisionRecord, Path | None]:
    """Conclude with the invocation open, seal it with its outcome, then sign (as `qualify run`)."""
    priv: Ed25519PrivateKey | None = load_private(key) if key else None
    record = conclude(run, s, priv, record_attempt=f"run/{inv.path.name}")
    inv.write_json("outcome.json", {"exit_code": 0 if record.promote else 1})
    inv.seal()
    env = sign_decision(run, record, priv) if priv else None
    return record, env


def decided(
    tmp: Path, vram: Verdict = Verdict.PASS, policy: str = ""
) -> tuple[RunDir, Path, Path, tuple[Path, Path], Path]:
    """A signed run under a pinned house: (run, envelope, house, CI key pair, candidate)."""
    house, ci = pinned_house(tmp)
    cand = candidate(tmp, policy)
    run, inv = make_run(tmp, cand, vram)
    _, env = decide(run, inv, setup(house), ci[0])
    assert env is not None
    return run, env, house, ci, cand
