"""The context record reads every context `result.json` the repository holds, and its JSON
form is the data as written (plus `record_version`); a record built from a ladder's cells
round-trips exactly."""

from __future__ import annotations

import asyncio
import json
import random
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from context_fake import FakeLlama, Kept  # type: ignore[import-not-found]
from pydantic import ValidationError

from qualify.context.corpus import Needles, Source, document, messages, new_nonce
from qualify.context.ladder import Cell, run_cell
from qualify.context.rebuild import (
    audit_summary,
    degenerate_streams,
    fidelity_summary,
    speed_summary,
)
from qualify.context.record import Content, Record, Row
from qualify.context.stage import plan_targets
from qualify.httpclient.client import Client
from qualify.httpclient.timing import RequestTiming
from qualify.registry import parse_record
from qualify.serving.dialects import LLAMACPP
from qualify.serving.sender import Sender

ROOT = Path(__file__).resolve().parents[3]
ARCHIVES = ["docs/gpu/evidence.tgz", "docs/gpu/vllm/evidence.tgz"]


def _published(stage: str) -> list[tuple[str, dict[str, Any]]]:
    """Every result.json of `stage`: loose under docs/ and tests/, and inside the archives."""
    out = []
    for base in ("docs", "tests"):
        for p in sorted((ROOT / base).rglob(f"{stage}/attempt-*/result.json")):
            out.append((str(p.relative_to(ROOT)), json.loads(p.read_text())))
    tars = [ROOT / a for a in ARCHIVES] + sorted((ROOT / "tests/golden/recorded").glob("*.tgz"))
    for tar in tars:
        with tarfile.open(tar) as t:
            for m in t.getmembers():
                if m.isfile() and m.name.endswith("/result.json") and f"/{stage}/" in m.name:
                    f = t.extractfile(m)
                    assert f is not None
                    out.append((f"{tar.name}:{m.name}", json.loads(f.read())))
    return out


PUBLISHED = _published("context")


def test_the_repository_holds_context_results() -> None:
    assert len(PUBLISHED) >= 5
    assert any(d["data"].get("battery") for _, d in PUBLISHED)  # one with the audits


@pytest.mark.parametrize("name,result", PUBLISHED, ids=[n for n, _ in PUBLISHED])
def test_every_published_context_result_reads(name: str, result: dict[str, Any]) -> None:
    record = parse_record("context", result["data"])
    assert isinstance(record, Record)
    assert record.model_dump(mode="json") == {**result["data"], "record_version": 1}
    assert record.rows and all(row.where for row in record.rows)


def _built(fake: FakeLlama, client: Client) -> dict[str, Any]:
    """The data the stage writes, from a warm and a cold cell of one rung (a fake server)."""
    needles = Needles.draw(random.Random(3))
    doc = document(Source("prose", 3), 6000, needles)
    warm = messages(doc, needles, new_nonce())
    body = {"model": "m", "max_tokens": 32, "temperature": 0}
    kept = Kept()
    drv = Sender(client, LLAMACPP, body, 30.0, 3.0, kept.keep)
    timings: dict[int, list[RequestTiming]] = {}

    async def go() -> list[dict[str, Any]]:
        out = []
        for pass_ in ("warm", "cold"):
            prompt = warm if pass_ == "warm" else messages(doc, needles, new_nonce())
            out.append(
                await run_cell(drv, Cell(1500, pass_, "prose", 1500, 1490, [prompt], needles))
            )
        return kept.rows(out, needles, timings)

    rows = asyncio.run(go())
    typed = [Row.model_validate(r) for r in rows]
    [rung] = plan_targets([1500], 8192, 512)
    rung.contents["prose"] = Content(needles=list(needles.pair))
    return {
        "targets": [rung.model_dump(mode="json")],
        "rows": rows,
        "tokenizer_calls": {"1500": 4},
        "cold_tokenizer_calls": {"1500": 2},
        "fidelity": fidelity_summary("llama.cpp", timings).model_dump(mode="json"),
        "degenerate": [d.model_dump(mode="json") for d in degenerate_streams(typed)],
        "speed": speed_summary(typed).model_dump(mode="json"),
        "audits": audit_summary([rung], typed).model_dump(mode="json"),
        "battery": None,
        "level": "off",
        "window": 8192,
        "window_source": "/props default_generation_settings.n_ctx (per slot)",
        "sizing_method": "/tokenize",
        "seed": 3,
        "wall_s": 1.5,
    }


def test_a_freshly_built_record_round_trips_exactly(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    data = json.loads(json.dumps(_built(fake, fake_client())))
    record = Record.model_validate(data)
    assert record.model_dump(mode="json") == {**data, "record_version": 1}
    assert Record.model_validate(record.model_dump(mode="json")) == record
    row = record.rows[0]
    assert row.pass_ == "warm" and row.server_window is not None
    assert row.server_window.why == "the server keeps no latency histograms"
    assert record.fidelity.by_concurrency["1"].requests == 2


def test_a_misspelt_or_mistyped_field_is_refused(
    fake: FakeLlama, fake_client: Callable[[], Client]
) -> None:
    data = json.loads(json.dumps(_built(fake, fake_client())))
    bad = json.loads(json.dumps(data))
    bad["rows"][0]["streams"][0]["decode_toks"] = 1.0
    with pytest.raises(ValidationError, match="decode_toks"):
        Record.model_validate(bad)
    bad = json.loads(json.dumps(data))
    bad["rows"][0]["pass"] = "lukewarm"
    with pytest.raises(ValidationError, match="pass"):
        Record.model_validate(bad)
