"""`qualify export --pushgateway` against a real Pushgateway (Debian's `prometheus-pushgateway`).

The Pushgateway runs on loopback, on a free port, with its storage in a temp directory; the
published H200 runs (docs/gpu, verified with the key committed beside them) are pushed through
the command line, the Pushgateway's own `/metrics` page is scraped over HTTP, and every value
read back is compared with the signed decision record and the stage records behind it. The
JUnit of a real run on the local server is checked in tests/integration/test_diff.py, on the runs
that module makes anyway.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "export"))

from export_checks import KEY, ROOMY, TIGHT, unpack_gpu

from qualify.ab.record import Record as AbRecord
from qualify.capacity import section as capacity_section
from qualify.capacity.record import Record as CapacityRecord
from qualify.cli import main
from qualify.context.record import Record as ContextRecord
from qualify.decision.headline import context_reach
from qualify.diff.runs import Side
from qualify.evidence.signing import load_public
from qualify.export import open_verified
from qualify.present.reading import record_of
from qualify.records import Verdict
from qualify.serving.process import free_port
from qualify.vram import section as vram_section
from qualify.vram.record import Record as VramRecord

pytestmark = [pytest.mark.integration, pytest.mark.serverless]
BINARY = shutil.which("prometheus-pushgateway") or (
    "/usr/bin/prometheus-pushgateway" if Path("/usr/bin/prometheus-pushgateway").is_file() else None
)
JOB = "qualify-ci"
Scraped = dict[str, list[tuple[dict[str, str], float]]]


@pytest.fixture
def pushgateway(tmp_path: Path) -> Iterator[str]:
    if BINARY is None:
        pytest.skip(
            "the prometheus-pushgateway binary is absent "
            "(Debian: apt-get install -y prometheus-pushgateway)"
        )
    port = free_port()
    log = (tmp_path / "pushgateway.log").open("wb")
    proc = subprocess.Popen(
        [
            BINARY,
            f"--web.listen-address=127.0.0.1:{port}",
            f"--persistence.file={tmp_path / 'pushgateway.data'}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _until_ready(url, proc)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def _until_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the Pushgateway exited ({proc.returncode}) before it was ready")
        try:
            if httpx.get(f"{url}/-/ready", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    pytest.fail("the Pushgateway never became ready")


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack_gpu(tmp_path_factory.mktemp("gpu"))


def _scrape(url: str, candidate: str) -> Scraped:
    """The Pushgateway's /metrics, over HTTP: the samples of JOB for `candidate`."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    out: Scraped = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.labels.get("job") == JOB and s.labels.get("candidate") == candidate:
                out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def _one(got: Scraped, name: str, **labels: str) -> float:
    hits = [v for lab, v in got.get(name, []) if all(lab.get(k) == x for k, x in labels.items())]
    assert len(hits) == 1, (name, labels, got.get(name))
    return hits[0]


def _push(url: str, run: Path) -> Side:
    args = ["export", str(run), "--key", str(KEY), "--pushgateway", url, "--job", JOB]
    assert main(args) == 0
    return open_verified(str(run), Path("evidence"), [load_public(KEY)])


def _assert_headline(got: Scraped, side: Side) -> None:
    """The headline figures, each in its base unit, as the stage records hold them."""
    records = side.records
    ab = record_of(records, "ab", AbRecord)
    assert ab is not None
    for metric, name in (("decode_tok_s", "decode_tokens_per_second"), ("e2e_s", "e2e_p50")):
        row = ab.row(metric)
        assert row is not None
        for lane in ("candidate", "control"):
            want = getattr(row, lane)
            suffix = "" if name.endswith("second") else "_seconds"
            assert _one(got, f"qualify_ab_{name}{suffix}", lane=lane) == pytest.approx(want)
    ctx = record_of(records, "context", ContextRecord)
    for p, (top, most) in context_reach(ctx).items():
        assert _one(got, "qualify_context_sent_prompt_tokens", **{"pass": p}) == most
        if top is not None:
            assert _one(got, "qualify_context_passed_prompt_tokens", **{"pass": p}) == top
    for card in vram_section.card_minimums(record_of(records, "vram", VramRecord)):
        mib = _one(got, "qualify_vram_min_free_bytes", gpu=str(card["gpu"])) / 1024**2
        assert mib == pytest.approx(card["min_free_mib"])
    best = capacity_section.best(record_of(records, "capacity", CapacityRecord))
    if best is not None:
        name = "qualify_capacity_best_aggregate_output_tokens_per_second"
        assert _one(got, name, cell=best.cell) == pytest.approx(best.aggregate_output_tok_s)


def test_a_published_run_pushed_and_read_back(pushgateway: str, published: Path) -> None:
    """Roomy, pushed and scraped back: the verdict, every stage's count of every verdict and
    the headline figures are the signed record's, labelled with candidate, alias and run."""
    side = _push(pushgateway, published / ROOMY)
    record = side.record
    got = _scrape(pushgateway, record.candidate)
    assert got, "nothing of the push is on the Pushgateway's /metrics"
    labels = {"alias": "demo-chat-gpu", "run_id": record.run_id}
    assert _one(got, "qualify_decision_promote", **labels) == (1.0 if record.promote else 0.0)
    want = Counter((g.stage, g.verdict.value) for g in record.evaluation.gates)
    for stage in {g.stage for g in record.evaluation.gates}:
        for v in Verdict:
            n = _one(got, "qualify_gates", stage=stage, verdict=v.value, run_id=record.run_id)
            assert n == want[(stage, v.value)], (stage, v)
    _assert_headline(got, side)


def test_each_candidate_is_its_own_group(pushgateway: str, published: Path) -> None:
    """Two candidates pushed side by side both stay; pushing one again replaces its group."""
    roomy = _push(pushgateway, published / ROOMY).record
    tight = _push(pushgateway, published / TIGHT).record
    _push(pushgateway, published / ROOMY)
    for rec in (roomy, tight):
        got = _scrape(pushgateway, rec.candidate)
        assert _one(got, "qualify_decision_promote") == (1.0 if rec.promote else 0.0)
        assert {lab["run_id"] for lab, _ in got["qualify_gates"]} == {rec.run_id}
