"""The capacity record reads every capacity `result.json` the repository holds, and its JSON
form is the data as written (plus `record_version`)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from qualify.capacity.record import Record
from qualify.registry import parse_record

ROOT = Path(__file__).resolve().parents[3]
ARCHIVES = ["docs/gpu/evidence.tgz", "docs/gpu/vllm/evidence.tgz", "tests/golden/recorded"]


def _published() -> list[tuple[str, dict[str, Any]]]:
    """Every capacity result.json: loose under docs/ and tests/, and inside the archives."""
    out = []
    for base in ("docs", "tests"):
        for p in sorted((ROOT / base).rglob("capacity/attempt-*/result.json")):
            out.append((str(p.relative_to(ROOT)), json.loads(p.read_text())))
    tars = [ROOT / a for a in ARCHIVES if a.endswith(".tgz")]
    tars += sorted((ROOT / "tests/golden/recorded").glob("*.tgz"))
    for tar in tars:
        with tarfile.open(tar) as t:
            for m in t.getmembers():
                if m.isfile() and m.name.endswith("result.json") and "/capacity/" in m.name:
                    f = t.extractfile(m)
                    assert f is not None
                    out.append((f"{tar.name}:{m.name}", json.loads(f.read())))
    return out


PUBLISHED = _published()


def test_the_repository_holds_capacity_results() -> None:
    assert len(PUBLISHED) >= 3
    assert any(d["data"].get("load") for _, d in PUBLISHED)  # one with the load and the soak


@pytest.mark.parametrize("name,result", PUBLISHED, ids=[n for n, _ in PUBLISHED])
def test_every_published_capacity_result_reads(name: str, result: dict[str, Any]) -> None:
    record = parse_record("capacity", result["data"])
    assert isinstance(record, Record)
    out = record.model_dump(mode="json")
    assert out.pop("record_version") == 1
    written = dict(result["data"])
    # a record of an earlier build reads its settings with today's defaults filled in
    assert {k: v for k, v in out.items() if k != "settings"} == {
        k: v for k, v in written.items() if k != "settings"
    }
    assert all(out["settings"][k] == v for k, v in written["settings"].items())
    if record.load.knee is not None:
        assert record.load.knee.statement.startswith(("serves", "no "))


def test_a_current_record_round_trips_exactly() -> None:
    current = [d["data"] for _, d in PUBLISHED if d["data"].get("load")]
    for data in current:
        record = Record.model_validate(data)
        assert record.model_dump(mode="json") == {**data, "record_version": 1}
        again = Record.model_validate(record.model_dump(mode="json"))
        assert again == record


def test_a_misspelt_or_mistyped_field_is_refused() -> None:
    data = next(d["data"] for _, d in PUBLISHED if d["data"].get("load"))
    bad = json.loads(json.dumps(data))
    bad["matrix"][0]["goodput_rsp"] = 1.0
    with pytest.raises(ValidationError, match="goodput_rsp"):
        Record.model_validate(bad)
    bad = json.loads(json.dumps(data))
    bad["load"]["knee"]["rate_rps"] = "fast"
    with pytest.raises(ValidationError, match="rate_rps"):
        Record.model_validate(bad)


def test_the_document_reads_the_load_as_attributes() -> None:
    """What the decision shows of the load is typed: the knee's statement, the SLOs, the soak,
    the answers, per-cell goodput and J per token."""
    data = next(d["data"] for _, d in PUBLISHED if d["data"].get("load"))
    r = Record.model_validate(data)
    assert r.load.knee is not None and r.load.slo is not None and r.load.soak is not None
    assert isinstance(r.load.knee.statement, str) and r.load.slo.goodput_floor > 0
    assert r.load.soak.hung is None and r.load.soak.completed > 0
    assert r.answers.judged > 0
    row = r.cells()[0]
    assert row.goodput is not None and row.energy is not None
    assert row.j_per_output_token == row.energy.j_per_output_token


def test_a_plot_that_cannot_be_drawn_is_a_reason_not_a_stopped_stage(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from types import SimpleNamespace

    import structlog

    from qualify.capacity import stage

    def refuse(*_a: object, **_k: object) -> bytes:
        raise ValueError("'yerr' must not contain negative values")

    written: list[str] = []
    ctx = SimpleNamespace(
        candidate=SimpleNamespace(name="c", identity=SimpleNamespace(max_num_seqs=4)),
        attempt=SimpleNamespace(write_bytes=lambda name, _b: written.append(name)),
        log=structlog.get_logger("test"),
    )
    record = Record.model_validate(next(d["data"] for _, d in PUBLISHED if d["data"].get("load")))
    assert stage._plot(ctx, record) == []  # type: ignore[arg-type]
    assert written == [stage.PLOT]
    monkeypatch.setattr(stage, "plot", refuse)
    why = stage._plot(ctx, record)  # type: ignore[arg-type]
    assert why == ["plot not drawn: ValueError: 'yerr' must not contain negative values"]
