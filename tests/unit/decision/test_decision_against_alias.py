"""The decision of a candidate whose alias already points at a qualified recipe shows the diff's
summary against it; one whose alias points at nothing shows no such part."""

from __future__ import annotations

import shutil
import stat
import tarfile
from pathlib import Path

import pytest

from qualify.decision import document
from qualify.decision.alias_view import AliasView, alias_view
from qualify.evidence.signing import generate
from qualify.evidence.store import RunDir, sha256_file
from qualify.present.reading import run_view
from qualify.present.record import DecisionRecord
from qualify.trust.repository import init, pin, unpin

ROOT = Path(__file__).resolve().parents[3]
GPU = ROOT / "docs" / "gpu"
ROOMY = "evidence/smollm2-135m-gpu-roomy/20261203T075044Z-b0366f"
TIGHT = "evidence/smollm2-135m-gpu-tight/20261203T075242Z-97cfa5"
PART = "## Against the alias's current recipe"


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("published")
    with tarfile.open(GPU / "evidence.tgz") as tgz:
        tgz.extractall(base, filter="data")
    return base


def _house(tmp: Path, target: Path | None) -> Path:
    """A house pinning the key the published runs were signed with; its alias `demo-chat-gpu`
    points at `target`'s signed decision (or at nothing)."""
    house = tmp / "house"
    init(house)
    pin(house, "decision", GPU / "gpu.pub", "gpu", "the key that signed the published runs")
    table = "version = 1\n"
    if target is not None:
        env = target / "decision" / "attempt-001.dsse.json"
        table += (
            '\n[aliases."demo-chat-gpu"]\ncandidate = "smollm2-135m-gpu-roomy"\n'
            f'run_id = "{target.name}"\ndecision_sha256 = "{sha256_file(env)}"\n'
        )
    (house / "aliases.toml").write_text(table)
    return house


def _tight(unpacked: Path) -> tuple[RunDir, DecisionRecord]:
    run = RunDir(unpacked / TIGHT)
    rec = DecisionRecord.model_validate_json(
        (run.path / "decision/attempt-001/decision.json").read_text()
    )
    return run, rec


def test_an_alias_on_a_qualified_run_shows_the_diff_summary(unpacked: Path, tmp_path: Path) -> None:
    """Tight decided while its alias serves the roomy run: the part names the roomy run, says it
    regressed, and lists the gates that went from pass to fail."""
    run, rec = _tight(unpacked)
    view = alias_view(
        run_view(run, rec), rec, _house(tmp_path, unpacked / ROOMY), unpacked / "evidence"
    )
    assert view.summary is not None and view.summary["status"] == "compared", view
    assert view.name == "demo-chat-gpu"
    text = document.render(run_view(run, rec), rec, view)
    part = text.split(PART, 1)[1].split("\n## ", 1)[0]
    assert "`demo-chat-gpu` now serves run 20261203T075044Z-b0366f" in part
    assert "(`qualify diff --against-alias demo-chat-gpu`): regressed." in part
    for line in view.summary["lines"]:
        assert f"- {line}" in part
    assert "- regression: gate vram/reserve@0: pass -> fail" in part
    assert "Role: this decision gates `demo-chat-gpu`, which points at smollm2-135m-gpu-roomy" in (
        text
    )


def test_no_alias_target_shows_no_part(unpacked: Path, tmp_path: Path) -> None:
    run, rec = _tight(unpacked)
    view = alias_view(run_view(run, rec), rec, _house(tmp_path, None))
    assert view.summary is None and view.target is None
    text = document.render(run_view(run, rec), rec, view)
    assert PART not in text
    assert "gates `demo-chat-gpu`, which points at nothing yet" in text
    bare = document.render(run_view(run, rec), rec, AliasView())
    assert PART not in bare and "gates no production alias" in bare


def test_an_alias_that_cannot_be_verified_says_why(unpacked: Path, tmp_path: Path) -> None:
    """The alias's envelope is not where the evidence is looked for: the part says why it could
    not compare, and compares nothing."""
    run, rec = _tight(unpacked)
    view = alias_view(
        run_view(run, rec), rec, _house(tmp_path, unpacked / ROOMY), tmp_path / "elsewhere"
    )
    assert view.summary is not None and view.summary["status"] == "unusable"
    part = document.render(run_view(run, rec), rec, view).split(PART, 1)[1]
    assert "Not compared with `demo-chat-gpu`'s current recipe: the qualification behind" in part


def _copied_roomy(unpacked: Path, tmp: Path) -> Path:
    """The roomy run copied under `tmp/evidence/` (writable), to change it."""
    dest = tmp / "evidence" / Path(ROOMY).relative_to("evidence")
    shutil.copytree(unpacked / ROOMY, dest)
    for p in [dest, *dest.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    return dest


def test_an_alias_target_whose_evidence_changed_is_not_compared(
    unpacked: Path, tmp_path: Path
) -> None:
    """The alias view does not judge its target's stages again, but it reads nothing of a target
    whose signed files changed: one result edited after signing makes it unusable, naming it."""
    run, rec = _tight(unpacked)
    roomy = _copied_roomy(unpacked, tmp_path)
    house = _house(tmp_path, roomy)
    f = roomy / "vram" / "attempt-001" / "result.json"
    f.write_text(f.read_text().replace('"pass"', '"fail"', 1))
    view = alias_view(run_view(run, rec), rec, house, tmp_path / "evidence")
    assert view.summary is not None and view.summary["status"] == "unusable", view.summary
    assert "vram/attempt-001/result.json: changed" in view.summary["why"], view.summary["why"]


def test_an_alias_target_signed_by_a_key_the_house_does_not_pin_is_not_compared(
    unpacked: Path, tmp_path: Path
) -> None:
    run, rec = _tight(unpacked)
    house = _house(tmp_path, unpacked / ROOMY)
    other = tmp_path / "other"
    generate(other)
    unpin(house, "decision", "gpu", "the test pins another key instead")
    pin(house, "decision", other.with_suffix(".pub"), "other", "a key that signed nothing here")
    view = alias_view(run_view(run, rec), rec, house, unpacked / "evidence")
    assert view.summary is not None and view.summary["status"] == "unusable", view.summary
    assert "does not verify" in view.summary["why"], view.summary["why"]
