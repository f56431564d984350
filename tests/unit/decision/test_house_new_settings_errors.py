"""Error paths of the settings added for issue 36: the house's `lossless_min_share`,
`soak_min_requests` and `soak_min_third_requests`, and the candidate's soak rate
(`[stages.capacity.soak]`, where `load.soak.rate_from` comes from). A bad value is one line
naming the file, the field path and what was expected, and the command exits 2 before anything
runs; a candidate that loosens the house's value is refused naming the field."""

from __future__ import annotations

import shutil
from pathlib import Path

import house_run as h
import pytest

from qualify.candidate_settings import Policy
from qualify.cli import main
from qualify.errors import BadInput
from qualify.trust.house import effective, parse

ROOT = Path(__file__).resolve().parents[3]
WHERE = "house/house-policy.toml"


@pytest.mark.parametrize(
    "line, expected",
    [
        ("lossless_min_share = 1.5", "lossless_min_share: Input should be less than or equal to 1"),
        ("lossless_min_share = -0.1", "lossless_min_share: Input should be greater than or equal"),
        ('lossless_min_share = "all"', "lossless_min_share: Input should be a valid number"),
        ("soak_min_requests = 0", "soak_min_requests: Input should be greater than or equal to 1"),
        ("soak_min_requests = 2.5", "soak_min_requests: Input should be a valid integer"),
        ("soak_min_third_requests = 1", "soak_min_third_requests: Input should be greater than"),
    ],
)
def test_a_bad_value_is_one_line_naming_file_field_and_expectation(
    line: str, expected: str
) -> None:
    with pytest.raises(BadInput) as bad:
        parse(h.HOUSE_POLICY + f"\n[thresholds]\n{line}\n", WHERE)
    (problem,) = bad.value.problems
    assert problem.startswith(f"{WHERE}: thresholds.{expected}"), problem
    got = line.split(" = ")[1].replace('"', "'")
    assert problem.endswith(f"(got {got})"), problem


def test_a_bad_house_threshold_stops_a_run_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    house = h.make_house(tmp_path, h.HOUSE_POLICY + "\n[thresholds]\nsoak_min_requests = 0\n")
    recipes = tmp_path / "recipes"
    shutil.copytree(ROOT / "examples" / "smollm2", recipes)
    args = ["run", str(recipes / "candidate.toml"), "--house", str(house)]
    assert main([*args, "--evidence", str(tmp_path / "ev")]) == 2
    err = capsys.readouterr().err
    assert (
        f"{house}/house-policy.toml (at HEAD): thresholds.soak_min_requests: Input should be "
        "greater than or equal to 1 (got 0)"
    ) in err
    assert not (tmp_path / "ev").exists()


@pytest.mark.parametrize(
    "thresholds, field",
    [
        ({"lossless_min_share": 0.5}, "policy.thresholds.lossless_min_share"),
        ({"soak_min_requests": 10}, "policy.thresholds.soak_min_requests"),
        ({"soak_min_third_requests": 5}, "policy.thresholds.soak_min_third_requests"),
        ({"soak_min_third_drafts": 10}, "policy.thresholds.soak_min_third_drafts"),
        ({"context_min_acceptance_ratio": 0.1}, "policy.thresholds.context_min_acceptance_ratio"),
    ],
)
def test_a_candidate_cannot_loosen_the_new_thresholds(
    thresholds: dict[str, object], field: str
) -> None:
    house = parse(h.HOUSE_POLICY, "x")
    with pytest.raises(BadInput) as bad:
        effective(house, Policy.model_validate({"thresholds": thresholds}))
    assert [p for p in bad.value.problems if p.startswith(field)], bad.value.problems
    tighter = {k: (1.0 if isinstance(v, float) else 100) for k, v in thresholds.items()}
    rules = effective(house, Policy.model_validate({"thresholds": tighter}))
    assert rules.thresholds.model_dump(include=set(tighter)) == tighter


@pytest.mark.parametrize(
    "soak, expected",
    [
        ("rate_fraction = 0", "stages.capacity.soak.rate_fraction: Input should be greater than 0"),
        ("rate_fraction = 1.5", "stages.capacity.soak.rate_fraction: Input should be less than"),
        ("rate_rps = -1", "stages.capacity.soak.rate_rps: Input should be greater than 0"),
        ("rate_from = 'knee'", "stages.capacity.soak.rate_from: Extra inputs are not permitted"),
    ],
)
def test_a_bad_soak_rate_in_a_candidate_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], soak: str, expected: str
) -> None:
    """Where the soak's rate comes from is the candidate's `rate_fraction` or `rate_rps` (the
    record's `rate_from` says which); `rate_from` itself is the record's, not a setting."""
    recipes = tmp_path / "recipes"
    shutil.copytree(ROOT / "examples" / "smollm2", recipes)
    cand = recipes / "candidate.toml"
    text = cand.read_text()
    assert "soak = { rate_fraction = 0.75 }\n" in text
    cand.write_text(text.replace("soak = { rate_fraction = 0.75 }", f"soak = {{ {soak} }}"))
    assert main(["validate", str(cand)]) == 2
    err = capsys.readouterr().err
    head, *problems = err.strip().splitlines()
    assert head == f"qualify: {cand} is not a valid candidate", err
    (problem,) = problems
    assert problem.strip().startswith(expected), err
