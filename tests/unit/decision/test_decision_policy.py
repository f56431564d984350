"""Policy over verdicts: required gates pass, critical ones veto, worst-of, every reason listed."""

from __future__ import annotations

from pathlib import Path

from qualify.decision.policy import StageAttempts, evaluate
from qualify.present.reading import StageView
from qualify.records import GateResult, StageResult, Verdict
from qualify.trust.house import PolicyRules as Policy

T = "2026-01-01T00:00:00Z"


def gate(stage: str, name: str, v: Verdict, level: str | None = None, **kw: object) -> GateResult:
    return GateResult(
        gate=name, stage=stage, level=level, verdict=v, reasons=[f"{name} said {v.value}"], **kw
    )


def result(stage: str, n: int, gates: list[GateResult], status: str = "finished") -> StageResult:
    verdicts = [g.verdict for g in gates]
    worst = max(verdicts, key=list(Verdict).index) if verdicts else Verdict.SKIPPED
    return StageResult(
        stage=stage,
        attempt=n,
        status=status,  # type: ignore[arg-type]
        verdict=worst if status == "finished" else Verdict.ERROR,
        reasons=[] if status == "finished" else ["server died"],
        gates=gates,
        started_at=T,
        ended_at=T,
    )


def at(n: int, res: StageResult) -> StageView:
    """Attempt `n` of `res`'s stage, as the decision reads it."""
    return StageView(res.stage, n, Path(f"{res.stage}/attempt-{n:03d}"), res)


def one(stage: str, *gates: GateResult) -> dict[str, StageAttempts]:
    return {stage: [at(1, result(stage, 1, list(gates)))]}


POLICY = Policy(required=["identity/*", "preflight/*"], critical=["identity/*"])


def test_all_required_pass_promotes() -> None:
    """Every required gate passing, and nothing missing, is promote with verdict pass."""
    att = one("identity", gate("identity", "model", Verdict.PASS))
    att |= one("preflight", gate("preflight", "smoke", Verdict.PASS, "off"))
    ev = evaluate(["identity", "preflight"], att, POLICY)
    assert ev.promote and ev.verdict is Verdict.PASS and ev.reasons == []


def test_critical_fail_vetoes_and_every_reason_is_listed() -> None:
    """A critical failure vetoes; a second failing gate is listed too, not only the first."""
    att = one("identity", gate("identity", "quantization", Verdict.FAIL))
    att |= one(
        "preflight",
        gate("preflight", "json", Verdict.FAIL, "think"),
        gate("preflight", "smoke", Verdict.PASS, "think"),
    )
    ev = evaluate(["identity", "preflight"], att, POLICY)
    assert not ev.promote
    status = {g.key: g.status for g in ev.gates}
    assert status == {
        "identity/quantization": "vetoes",
        "preflight/json@think": "blocks",
        "preflight/smoke@think": "pass",
    }
    assert any("identity/quantization: critical gate vetoes" in r for r in ev.reasons)
    assert any(r.startswith("preflight/json@think: required gate: fail") for r in ev.reasons)


def test_inconclusive_blocks_unless_waived() -> None:
    """An inconclusive required gate blocks; a waiver for that gate key turns it into waived."""
    att = one("identity", gate("identity", "model", Verdict.PASS))
    att |= one("preflight", gate("preflight", "tools", Verdict.INCONCLUSIVE, "off"))
    plain = evaluate(["identity", "preflight"], att, POLICY)
    assert not plain.promote and plain.verdict is Verdict.INCONCLUSIVE
    waived = evaluate(["identity", "preflight"], att, POLICY, {"preflight/tools@off": "w.json"})
    assert waived.promote and waived.verdict is Verdict.PASS
    assert waived.gates[1].status == "waived" and waived.gates[1].waiver == "w.json"
    assert waived.waived == ["preflight/tools@off"], "a waived gate is named, never a silent pass"


def test_waived_gates_alone_never_promote() -> None:
    """Waived is left out of the worst-of, not counted as pass: with every required gate
    waived nothing passed, so the verdict is skipped and the decision no-promote."""
    att = one("preflight", gate("preflight", "tools", Verdict.INCONCLUSIVE, "off"))
    ev = evaluate(
        ["preflight"],
        att,
        Policy(required=["preflight/*"], critical=[]),
        {"preflight/tools@off": "w.json"},
    )
    assert ev.gates[0].status == "waived" and not ev.promote and ev.verdict is Verdict.SKIPPED


def test_required_reasoning_level_not_covered_blocks() -> None:
    """A level the policy requires that the levelled stage has no gate at is no-promote."""
    att = one("identity", gate("identity", "model", Verdict.PASS))
    att |= one("preflight", gate("preflight", "tools", Verdict.PASS, "off"))
    rules = Policy(required=["identity/*", "preflight/*"], levels=["off", "high"])
    ev = evaluate(["identity", "preflight"], att, rules)
    assert not ev.promote and ev.missing == ["preflight/*@high"]
    assert "reasoning level high is required by the policy" in ev.reasons[0]
    covered = evaluate(["identity", "preflight"], att, rules.model_copy(update={"levels": ["off"]}))
    assert covered.promote


def test_waiver_never_rescues_fail_or_error() -> None:
    """A waiver only applies to inconclusive: a fail or an error still blocks."""
    for v in (Verdict.FAIL, Verdict.ERROR):
        att = one("identity", gate("identity", "model", Verdict.PASS))
        att |= one("preflight", gate("preflight", "tools", v, "off"))
        ev = evaluate(["identity", "preflight"], att, POLICY, {"preflight/tools@off": "w.json"})
        assert not ev.promote and ev.gates[1].status == "blocks" and ev.verdict is v


def test_required_skipped_is_no_promote_and_listed() -> None:
    """A required gate that was skipped is not a pass: no-promote, with the gate named."""
    att = one("identity", gate("identity", "model", Verdict.PASS))
    att |= one("preflight", gate("preflight", "responses", Verdict.SKIPPED, "off"))
    ev = evaluate(["identity", "preflight"], att, POLICY)
    assert not ev.promote and ev.verdict is Verdict.SKIPPED
    assert any(r.startswith("preflight/responses@off: required gate: skipped") for r in ev.reasons)


def test_missing_required_stage_is_listed_with_why() -> None:
    """A required pattern with no gate is no-promote; the reason says the stage did not run."""
    att = one("identity", gate("identity", "model", Verdict.PASS))
    ev = evaluate(["identity"], att, POLICY)
    assert not ev.promote and ev.missing == ["preflight/*"]
    assert ev.reasons == [
        "preflight/*: required, but no gate matches (preflight: not listed in stages.run)"
    ]


def test_error_never_passes_even_with_no_gates() -> None:
    """A required stage that ran and ended in error without gates blocks with its reasons."""
    res = StageResult(
        stage="preflight",
        attempt=1,
        status="finished",
        verdict=Verdict.ERROR,
        reasons=["connection refused"],
        started_at=T,
        ended_at=T,
    )
    att = one("identity", gate("identity", "model", Verdict.PASS)) | {"preflight": [at(1, res)]}
    ev = evaluate(["identity", "preflight"], att, POLICY)
    assert not ev.promote and ev.verdict is Verdict.ERROR
    assert "preflight: error: connection refused" in ev.reasons


def test_advisory_failure_is_a_note_not_a_block() -> None:
    """A gate outside the required patterns is advisory: its failure is noted, not blocking."""
    att = one("identity", gate("identity", "model", Verdict.PASS))
    att |= one("preflight", gate("preflight", "smoke", Verdict.PASS, "off"))
    att |= one("ab", gate("ab", "acceptance", Verdict.FAIL))
    ev = evaluate(["identity", "preflight", "ab"], att, POLICY)
    assert ev.promote
    assert ev.notes == ["ab/acceptance: advisory: fail: acceptance said fail"]


def test_advisory_severity_inside_required_pattern() -> None:
    """A gate declared advisory stays advisory even when a required pattern covers its stage."""
    att = one("identity", gate("identity", "model", Verdict.PASS))
    att |= one(
        "preflight",
        gate("preflight", "smoke", Verdict.PASS, "off"),
        gate("preflight", "garble", Verdict.FAIL, "off", severity="advisory"),
    )
    ev = evaluate(["identity", "preflight"], att, POLICY)
    assert ev.promote and ev.gates[2].status == "advisory"


def test_authoritative_is_last_finished_and_superseded_are_listed() -> None:
    """Attempt 2 (finished) decides; attempt 1 and an aborted attempt 3 are superseded."""
    att: dict[str, StageAttempts] = {
        "identity": [
            at(1, result("identity", 1, [gate("identity", "model", Verdict.FAIL)])),
            at(2, result("identity", 2, [gate("identity", "model", Verdict.PASS)])),
            at(3, result("identity", 3, [], status="aborted")),
        ]
    }
    ev = evaluate(["identity"], att, Policy(required=["identity/*"]))
    assert ev.promote
    g = ev.gates[0]
    assert g.authoritative.attempt == 2 and g.authoritative.verdict is Verdict.PASS
    assert [(s.attempt, s.verdict) for s in g.superseded] == [(1, Verdict.FAIL), (3, None)]
    stage = ev.stages[0]
    assert stage.authoritative is not None and stage.authoritative.attempt == 2
    assert [(a.attempt, a.status) for a in stage.superseded] == [(1, "finished"), (3, "aborted")]


def test_stage_with_only_aborted_attempts_is_not_run() -> None:
    """No finished attempt: the stage did not run, and the reason quotes the aborted attempt."""
    att: dict[str, StageAttempts] = {"identity": [at(1, result("identity", 1, [], "aborted"))]}
    ev = evaluate(["identity"], att, Policy(required=["identity/*"]))
    assert not ev.promote and not ev.stages[0].ran
    assert "attempt 1 aborted: server died" in ev.reasons[0]


def test_pipeline_not_run_result_says_why() -> None:
    """The pipeline's 'not run' record (skipped, no gates) reads as not run, with its reason."""
    res = StageResult(
        stage="context",
        attempt=1,
        status="finished",
        verdict=Verdict.SKIPPED,
        reasons=["not run: the run was aborted earlier (server died)"],
        started_at=T,
        ended_at=T,
    )
    ev = evaluate(["context"], {"context": [at(1, res)]}, Policy(required=["context/*"]))
    s = ev.stages[0]
    assert not s.ran and s.why_not == "the run was aborted earlier (server died)"
    assert "context not run: the run was aborted earlier" in ev.reasons[0]


def _preflight_with(gate_files: dict[str, str]) -> dict[str, StageAttempts]:
    res = result("preflight", 1, [gate("preflight", g, Verdict.PASS, "off") for g in gate_files])
    res.data = {
        "gates_dir": "gates/preflight",
        "gate_files": gate_files,
        "declared_gate_files": {"smoke": "aa", "json": "bb"},
    }
    return {"preflight": [at(1, res)]} | one("identity", gate("identity", "model", Verdict.PASS))


def test_candidate_chosen_subset_of_gates_never_promotes() -> None:
    """A run that skipped a declared gate (the candidate named a subset) is missing it."""
    ev = evaluate(["identity", "preflight"], _preflight_with({"smoke": "aa"}), POLICY)
    assert not ev.promote
    assert any("preflight/json" in r and "not run" in r for r in ev.reasons)


def test_candidate_own_gate_file_never_promotes() -> None:
    """A gate file other than the project's (a candidate's own folder) does not count."""
    ev = evaluate(["identity", "preflight"], _preflight_with({"smoke": "aa", "json": "zz"}), POLICY)
    assert not ev.promote
    assert any("preflight/json" in r and "not the project's" in r for r in ev.reasons)


def test_every_declared_gate_run_unchanged_promotes() -> None:
    ev = evaluate(["identity", "preflight"], _preflight_with({"smoke": "aa", "json": "bb"}), POLICY)
    assert ev.promote, ev.reasons


def test_a_required_stage_whose_record_does_not_read_never_promotes() -> None:
    """Its gate files cannot be held to the project's, so the stage does not count."""
    att = _preflight_with({"smoke": "aa", "json": "bb"})
    res = att["preflight"][0].result
    assert res is not None
    res.data = {"gate_files": {"smoke": "aa", "json": "bb"}}  # no gates_dir: does not read
    ev = evaluate(["identity", "preflight"], att, POLICY)
    assert not ev.promote
    assert "preflight: its record does not read, so its gate files are unknown" in ev.reasons
