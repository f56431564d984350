"""The house policy: validated, its schema exported, tightened and never loosened by a candidate,
and its thresholds reaching every stage of the run."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import git
import house_run as h
import pytest

from qualify.candidate_settings import Policy
from qualify.cli import main
from qualify.errors import BadInput
from qualify.trust.house import SCHEMA_FILE, effective, parse, render_schema

ROOT = Path(__file__).resolve().parents[3]


def test_the_committed_schema_is_current() -> None:
    """gates/schemas/house-policy.schema.json is what the model exports (regenerate with
    `python -m qualify.trust.house gates/schemas/house-policy.schema.json`)."""
    assert (ROOT / SCHEMA_FILE).read_text() == render_schema()


def test_a_bad_house_policy_names_file_and_field_once_per_problem(tmp_path: Path) -> None:
    text = h.HOUSE_POLICY + "\n[thresholds]\nacceptance_floor = 2\nab_max_regresion_pct = 1\n"
    with pytest.raises(BadInput) as bad:
        parse(text, "house/house-policy.toml")
    assert bad.value.problems == [
        "house/house-policy.toml: thresholds.acceptance_floor: Input should be less than or "
        "equal to 1 (got 2)",
        "house/house-policy.toml: thresholds.ab_max_regresion_pct: Extra inputs are not "
        "permitted (got 1)",
    ]


def test_a_candidate_may_tighten_the_house_policy() -> None:
    house = parse(h.HOUSE_POLICY, "x")
    mine = Policy.model_validate(
        {
            "required": ["identity/*", "vram/*", "preflight/*"],
            "thresholds": {"ab_max_regression_pct": 1.0, "acceptance_floor": 0.5},
        }
    )
    rules = effective(house, mine)
    assert rules.required == ["identity/*", "vram/*", "preflight/*"]
    assert (rules.thresholds.ab_max_regression_pct, rules.thresholds.acceptance_floor) == (1.0, 0.5)
    assert rules.thresholds.vram_reserve_gib == house.thresholds.vram_reserve_gib
    assert rules.sha256 != house.rules().sha256


@pytest.mark.parametrize(
    "policy, field",
    [
        ({"required": ["identity/*"]}, "policy.required: drops house pattern 'vram/*'"),
        ({"critical": []}, "policy.critical: drops house pattern 'identity/*'"),
        ({"thresholds": {"ab_max_regression_pct": 10}}, "policy.thresholds.ab_max_regression_pct"),
        ({"thresholds": {"acceptance_floor": 0.1}}, "policy.thresholds.acceptance_floor"),
        ({"thresholds": {"soak_min_ttft_drift_s": 5}}, "policy.thresholds.soak_min_ttft_drift_s"),
        (
            {"thresholds": {"soak_max_acceptance_drop_pct": 50}},
            "policy.thresholds.soak_max_acceptance_drop_pct",
        ),
        ({"vram_reserve_gib": 1.0}, "policy.vram_reserve_gib"),
        (
            {"thresholds": {"unverifiable_pins": ["revision"]}},
            "policy.thresholds.unverifiable_pins",
        ),
    ],
)
def test_a_loosening_is_refused_naming_the_field(policy: dict[str, object], field: str) -> None:
    with pytest.raises(BadInput) as bad:
        effective(parse(h.HOUSE_POLICY, "x"), Policy.model_validate(policy))
    assert any(p.startswith(field) for p in bad.value.problems), bad.value.problems


def test_qualify_run_with_a_loosening_candidate_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`required = ["identity/*"]` in a candidate no longer makes a promote: the run stops
    before anything starts, exit 2, naming the field."""
    house = h.make_house(tmp_path)
    recipes = tmp_path / "recipes"
    shutil.copytree(ROOT / "examples" / "smollm2", recipes)
    cand = recipes / "candidate.toml"
    cand.write_text(cand.read_text().replace("[policy]\n", '[policy]\nrequired = ["identity/*"]\n'))
    code = main(["run", str(cand), "--house", str(house), "--evidence", str(tmp_path / "ev")])
    assert code == 2
    err = capsys.readouterr().err
    assert "loosens the house policy" in err and "policy.required: drops house pattern" in err
    assert not (tmp_path / "ev").exists()


def test_waiver_keys_in_a_candidate_say_where_trust_lives() -> None:
    with pytest.raises(ValueError, match="pinned in the house repository"):
        Policy.model_validate({"waiver_keys": ["k.pub"]})


def test_pins_are_logged_and_committed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`house pin` appends to the trust log and commits it with the key; `house show` lists it."""
    house = h.make_house(tmp_path)
    _, pub = h.keypair(tmp_path, "ci")
    args = ["house", "pin", "decision", str(pub), "--name", "ci", "--why", "CI signs"]
    assert main([*args, "--house", str(house)]) == 0
    commit = git.Repo(house).head.commit
    assert set(commit.stats.files) == {"trust/trust.log.jsonl", "trust/decision/ci.pub"}
    assert main(["house", "show", "--house", str(house)]) == 0
    assert "decision keys: ci (" in capsys.readouterr().out
    assert (
        main(["house", "unpin", "decision", "ci", "--why", "rotated", "--house", str(house)]) == 0
    )
    assert main(["house", "show", "--house", str(house)]) == 0
    assert "decision keys: none" in capsys.readouterr().out


def test_the_effective_thresholds_reach_every_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`qualify run --house` hands each stage the house thresholds tightened by the candidate
    (a stand-in stage records what it got; no server starts)."""
    from qualify import stage as stages
    from qualify.pipeline import execute
    from qualify.progress import Progress
    from qualify.records import StageResult, Verdict

    seen = []

    async def probe(ctx: stages.StageContext) -> StageResult:
        seen.append(ctx.thresholds)
        return stages.finish(ctx, [], verdict=Verdict.PASS)

    stages.load_all()
    for name in list(stages.STAGES):  # no stage may reach a server here
        monkeypatch.setitem(stages.STAGES, name, probe)
    monkeypatch.setenv("QUALIFY_TICKETS", str(tmp_path / "tickets"))
    house = h.make_house(tmp_path, h.HOUSE_POLICY + "\n[thresholds]\nab_max_regression_pct = 2.0\n")
    recipes = tmp_path / "recipes"
    shutil.copytree(ROOT / "examples" / "smollm2", recipes)
    cand = recipes / "candidate.toml"
    text = re.sub(r"(?m)^run = \[.*\]$", 'run = ["identity"]', cand.read_text())
    assert 'run = ["identity"]' in text
    cand.write_text(
        text.replace("[policy]\n", "[policy]\nthresholds = { acceptance_floor = 0.6 }\n")
    )
    code = execute(cand, tmp_path / "ev", house=house, progress=Progress(quiet=True))
    assert code == 1  # the house requires vram/*, which did not run
    (t,) = seen
    assert (t.ab_max_regression_pct, t.acceptance_floor) == (2.0, 0.6)


def test_the_example_house_policy_is_valid_and_the_demo_candidate_meets_its_form() -> None:
    """examples/house/house-policy.toml validates, and the demo candidate does not loosen it."""
    from qualify.candidate import load_candidate
    from qualify.trust.house import load

    house = load(ROOT / "examples" / "house" / "house-policy.toml")
    cand = load_candidate(ROOT / "examples" / "smollm2" / "candidate.toml").candidate
    assert effective(house, cand.policy).sha256 == house.rules().sha256
    assert set(house.levels) <= set(cand.reasoning)


def test_every_threshold_has_a_tightening_direction() -> None:
    """A new threshold without a direction would let a candidate loosen it unnoticed."""
    from qualify.gates.thresholds import Thresholds
    from qualify.trust import house

    known = (
        house._HIGHER_IS_STRICTER
        | house._LOWER_IS_STRICTER
        | house._OPTIONAL_LOWER_IS_STRICTER
        | house._OPTIONAL_HIGHER_IS_STRICTER
        | house._BY_KEY
    )
    assert set(Thresholds.model_fields) == known


def test_the_check_codes_a_house_accepts_are_the_houses_alone() -> None:
    """A house's [check_codes] carries into the effective rules; a candidate cannot write one."""
    from pydantic import ValidationError

    digest = "ab" * 32
    text = h.HOUSE_POLICY + f'\n[check_codes]\npreflight = ["{digest}"]\n'
    rules = effective(parse(text, "house-policy.toml"), Policy())
    assert rules.check_codes == {"preflight": [digest]}
    with pytest.raises(ValidationError, match="check_codes"):
        Policy.model_validate({"check_codes": {"preflight": [digest]}})
