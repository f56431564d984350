"""The gauges `qualify export --pushgateway` pushes, read back in the exposition format (the push
itself, against a real Pushgateway, is tests/integration/test_export.py): the verdict and the
gate counts are the decision record's, every figure names its unit."""

from __future__ import annotations

from collections import Counter

from export_checks import Exported
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from qualify.export.metrics import grouping_key, registry, samples
from qualify.records import Verdict

COUNTS = {"qualify_decision_promote", "qualify_gates", "qualify_quality_attempts"}
UNITS = ("_seconds", "_bytes", "_ratio", "_tokens_per_second", "_tokens", "_tokens_per_draft")


def _scraped(exported: Exported) -> dict[str, list[tuple[dict[str, str], float]]]:
    side = exported.side
    text = generate_latest(registry(side.record.run_id, samples(side))).decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_the_verdict_and_gate_counts_are_the_records(roomy: Exported) -> None:
    record = roomy.side.record
    got = _scraped(roomy)
    ((labels, promote),) = got["qualify_decision_promote"]
    assert promote == (1.0 if record.promote else 0.0)
    assert labels == {"run_id": record.run_id}
    counts = {(lab["stage"], lab["verdict"]): v for lab, v in got["qualify_gates"]}
    want = Counter((g.stage, g.verdict.value) for g in record.evaluation.gates)
    stages = {g.stage for g in record.evaluation.gates}
    assert set(counts) == {(s, v.value) for s in stages for v in Verdict}
    assert all(counts[k] == want.get(k, 0) for k in counts)


def test_every_figure_names_its_unit(roomy: Exported, load_run: Exported) -> None:
    for exported in (roomy, load_run):
        names = set(_scraped(exported))
        figures = names - COUNTS
        assert figures and all(n.endswith(UNITS) for n in figures), figures
    assert {"qualify_ab_decode_tokens_per_second", "qualify_vram_min_free_bytes"} <= set(
        _scraped(roomy)
    )


def test_the_group_is_the_candidate_and_its_alias(roomy: Exported) -> None:
    assert grouping_key(roomy.side) == {
        "candidate": roomy.side.record.candidate,
        "alias": "demo-chat-gpu",
    }
