"""Stage sections read their typed records: a stage without one presents its empty form, and
the figures shown are the record's attributes."""

from __future__ import annotations

import importlib

import pytest

from qualify.capacity import section as capacity_section
from qualify.capacity.loads import Load, Soak
from qualify.capacity.record import Record as CapacityRecord
from qualify.quality import section as quality_section
from qualify.quality.record import Record as QualityRecord
from qualify.quality.record import TaskBudget
from qualify.vram import section as vram_section
from qualify.vram.record import Card, StageFigures
from qualify.vram.record import Record as VramRecord

TYPED = ("identity", "preflight", "quality", "capacity", "vram")


@pytest.mark.parametrize("stage", TYPED)
def test_a_stage_without_a_record_presents_its_empty_form(stage: str) -> None:
    module = importlib.import_module(f"qualify.{stage}.section")
    shown = module.section(None, [])
    assert shown and all(v in (None, [], {}) or isinstance(v, dict) for v in shown.values())


def test_capacity_without_a_record_is_not_recorded() -> None:
    got = capacity_section.section(None, [])
    assert got["load"] is None
    assert got["capacity"]["incumbent"]["status"] == "not recorded"
    assert got["capacity"]["grid"] == {"heads": [], "rows": [], "slots": None}
    assert capacity_section.best(None) is None


def test_a_load_without_a_soak_says_not_run() -> None:
    record = CapacityRecord(load=Load(requests=3))
    load = capacity_section.load(record, [])
    assert load is not None and load["soak"] == "not run"
    assert load["statement"] == "no knee stated"
    assert capacity_section.soak_text(Soak(), "pass") == "not run"


def test_a_scaled_budget_shows_the_declared_one_beside_it() -> None:
    budget = TaskBudget(
        task="t",
        check="json",
        description="a task",
        attempts=3,
        visible_tokens=1000,
        reasoning_tokens=2000,
        visible_budget=500,
        reasoning_budget=1000,
        max_tokens=1500,
    )
    got = quality_section.section(QualityRecord(budgets=[budget], budget_scale=0.5), [])["quality"]
    assert quality_section.declared(budget) == "1,000 / 2,000"
    assert got["budget_scale"] == 0.5


def test_each_card_is_held_to_the_reserve_at_every_stage() -> None:
    cards = [
        Card(gpu="0", name="H200", stages={"ab": StageFigures(min_free_mib=900.0)}),
        Card(gpu="1", stages={"ab": StageFigures(min_free_mib=4096.0)}),
    ]
    record = VramRecord(reserve_gib=1.0, cards=cards)
    rows = vram_section.section(record, [])["vram"]
    assert [c["label"] for c in rows["cards"]] == ["GPU 0 (H200)", "GPU 1"]
    assert rows["rows"][0]["reserve"] == "fail on 1 of 2"
    assert rows["overall"] == "fails: ab fail on 1 of 2"
    lows = vram_section.card_minimums(record)
    assert [(c["min_free_mib"], c["verdict"]) for c in lows] == [(900.0, "fail"), (4096.0, "pass")]
