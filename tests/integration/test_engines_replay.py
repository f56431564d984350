"""The pipeline against vLLM and SGLang replays (tests/replay/): real HTTP on loopback, serving
the recorded outputs under tests/fixtures/engines/. No llama-server is started.

Each engine gets one candidate (speculative decoding on, reasoning split) attached to one replay
and a control (speculation off) attached to a second; identity, preflight, context and ab run
once and every gate is held to the verdict the recordings imply. Smaller runs then turn one
recorded switch each: spec counters absent, reasoning not split.

Preflight runs the gates the replay can answer truthfully (its answers are fixed text, so the
gates that judge JSON or tool-call content are left out); over-length's overshoot is 2.0 because
the replay counts one token per word, about six characters of the gate's prose.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from replay.server import Profile, Replay, Spec, recall_answer, sglang_profile, vllm_profile
from stage_runs import StageRunner

from qualify.evidence.store import EvidenceStore
from qualify.pipeline import plan
from qualify.preflight.stage import DEFAULT_GATES
from qualify.records import StageResult, Verdict
from qualify.serving.engine import adapter

pytestmark = [
    pytest.mark.integration,
    pytest.mark.serverless,
    pytest.mark.slow,
    pytest.mark.timeout(900),
]

PROFILES: dict[str, Callable[..., Profile]] = {"vllm": vllm_profile, "sglang": sglang_profile}
# What the candidate pins, as each recording describes the server (SGLang's /server_info
# recording is a TP=2 deployment; `auto` KV dtype).
PINS = {
    "vllm": {"method": "mtp", "tensor": 1},
    "sglang": {"method": "eagle", "tensor": 2},
}
PREFLIGHT = ("smoke", "garble", "soft-empty", "over-length")

CANDIDATE = """schema_version = 1
name = "replay-{engine}"
[identity]
model = "{model}"
revision = "main"
engine = "{engine}"
engine_build = "{version}"
quantization = "fp8"
kv_dtype = "auto"
context_length = {window}
max_num_seqs = 256
parallelism = {{ tensor = {tensor} }}
speculation = {{ method = "{method}", draft_tokens = {draft} }}
[server]
base_url = "{url}"
attach = true
request_timeout_s = 30
[stages]
run = ["identity", "preflight", "context", "ab"]
[stages.preflight]
gates_dir = "gates"
max_tokens = 64
timeout_s = 20
[stages.context]
targets = [1024, 2048]
completion_margin = 256
max_tokens = 96
warmups = 2
timeout_s = 30
idle_wait_s = 5
[stages.ab]
control = "control.toml"
runs = 2
max_tokens = 32
warmups = 0
idle_wait_s = 5
timeout_s = 30
"""
CONTROL = """schema_version = 1
extends = "candidate.toml"
name = "replay-{engine}-nospec"
variable = "speculative decoding off"
[overrides]
"identity.speculation" = {{ method = "none", draft_tokens = 0 }}
"server.base_url" = "{url}"
"""


def _write(d: Path, engine: str, cand: Replay, ctrl: Replay) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    gates = d / "gates"
    gates.mkdir()
    for gid in PREFLIGHT:
        doc = yaml.safe_load((DEFAULT_GATES / "preflight" / f"{gid}.yaml").read_text())
        if gid == "over-length":
            doc["params"]["overshoot"] = 2.0
        (gates / f"{gid}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    p = cand.engine.profile
    spec = p.spec.num_speculative_tokens if p.spec else 2
    (d / "candidate.toml").write_text(
        CANDIDATE.format(
            engine=engine,
            model=p.served_model,
            version=p.version,
            window=p.max_model_len,
            url=cand.base_url,
            draft=spec,
            **PINS[engine],
        )
    )
    (d / "control.toml").write_text(CONTROL.format(engine=engine, url=ctrl.base_url))
    return d / "candidate.toml"


def _run(d: Path, engine: str, cand: Profile, stages: list[str]) -> dict[str, StageResult]:
    """Start a candidate replay and a control replay (speculation off), run `stages` in order."""
    ctrl = PROFILES[engine](answer=recall_answer)
    with Replay(cand) as c, Replay(ctrl) as k:
        p = plan(_write(d, engine, c, k))
        run = EvidenceStore(d / "evidence").new_run(p.loaded.candidate.name)
        (run.path / "run.json").write_text("{}")
        runner = StageRunner(p, run)
        return {s: runner.stage(s) for s in stages}


def _gates(result: StageResult) -> dict[str, Verdict]:
    return {g.gate: g.verdict for g in result.gates}


def _gate(result: StageResult, key: str) -> Any:
    return next(g for g in result.gates if g.gate == key)


@pytest.fixture(scope="module", params=["vllm", "sglang"])
def full(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One whole run per engine: spec on (k=2, acceptance 0.7 and 0.4), reasoning split."""
    engine = request.param
    profile = PROFILES[engine](spec=Spec(), answer=recall_answer)
    d = tmp_path_factory.mktemp(f"full-{engine}")
    yield engine, _run(d, engine, profile, ["identity", "preflight", "context", "ab"])


def test_identity_reads_each_engine_in_its_own_words(full: Any) -> None:
    """vLLM attached, no dev mode: model card, /version, max_model_len and the KV dtype of
    vllm:cache_config_info pass; speculation drafts 2 tokens as pinned (2 position labels) but
    its method is not reported; revision, quantization, TP and max_num_seqs are nowhere but
    /server_info. SGLang: /server_info resolves kv dtype, TP, and EAGLE with 3 tokens per
    verify call (2 drafted)."""
    engine, res = full
    got = _gates(res["identity"])
    passed = {"pin@model", "pin@engine", "pin@engine_build", "pin@context_length", "reachable"}
    passed |= {"pin@image_digest"}  # not pinned: nothing claimed, nothing to verify
    if engine == "vllm":
        passed |= {"pin@kv_dtype"}
        unknown = {"revision", "quantization", "parallelism", "max_num_seqs"}
        unknown |= {"speculation"}
        spec = _gate(res["identity"], "pin@speculation")
        assert "drafts 2 tokens, as pinned, but reports no method" in spec.reasons[0]
        kv = _gate(res["identity"], "pin@kv_dtype")
        assert kv.metrics["proved_by"] == "server"
        assert "cache_config_info" in kv.metrics["source"]
    else:
        passed |= {"pin@kv_dtype", "pin@parallelism", "pin@speculation"}
        unknown = {"revision", "quantization", "max_num_seqs"}
    assert {k for k, v in got.items() if v is Verdict.PASS} == passed, got
    assert {k for k, v in got.items() if v is Verdict.INCONCLUSIVE} == {
        f"pin@{p}" for p in unknown
    }, got


def test_preflight_reasoning_split_and_overlength_400(full: Any) -> None:
    """Reasoning arrives in the engine's own field, so nothing leaks into the visible answer;
    a prompt over the window gets the engine's 400 naming the window, then a normal answer."""
    _, res = full
    got = _gates(res["preflight"])
    assert got == dict.fromkeys(PREFLIGHT, Verdict.PASS), res["preflight"].reasons
    over = _gate(res["preflight"], "over-length")
    assert (over.metrics["http_status"], over.metrics["follow_up_status"]) == (400, 200)


def test_context_sizes_by_tokenize_and_reads_queue_gauges(full: Any) -> None:
    """/tokenize sizes every rung; idle and cold-cache read the engine's gauges and prefix
    counters (vLLM summed over {engine, model_name}, SGLang over ranks). Fidelity: the replay
    moves vLLM's latency histograms, so its cells are held against the server's figures (how
    near they agree is a matter of timing, not asserted); SGLang sends no per-request timings,
    so it is inconclusive, never a pass."""
    engine, res = full
    ctx = res["context"]
    assert ctx.data["sizing_method"] == "tokenize"
    got = _gates(ctx)
    for key in ("idle", "cold-cache@1024", "cold-cache@2048", "needles@1024", "needles@2048"):
        assert got[key] is Verdict.PASS, (key, ctx.reasons)
    fidelity = _gate(ctx, "fidelity@c=1")
    if engine == "vllm":  # judged against the server's figures; the verdict rests on timing
        assert fidelity.verdict in (Verdict.PASS, Verdict.FAIL), fidelity.reasons
        assert fidelity.metrics["n_decode"] > 0 and fidelity.metrics["n_ttft"] > 0
    else:
        assert fidelity.verdict is Verdict.INCONCLUSIVE
        assert "no decode rate" in " ".join(fidelity.reasons)


def test_ab_acceptance_from_each_engines_counters(full: Any) -> None:
    """vLLM: rate from its draft counters, 2 per-position series = the pinned draft length.
    SGLang: rate from verify calls, generated tokens and the draft-width gauge; no per-position
    counters, so the draft length is inconclusive."""
    engine, res = full
    ab = res["ab"]
    got = _gates(ab)
    assert got["paired"] is Verdict.PASS, ab.reasons
    assert got["acceptance"] is Verdict.PASS, ab.reasons
    acc = ab.data["lanes"]["candidate"]["acceptance"]
    # The replay accepts position i with 0.7 and 0.4: (0.7 + 0.4) / 2 of the drafts, less the
    # rounding of each short answer's verify steps up to a whole step (SGLang's figure is
    # generated - verify calls, so that rounding shows in it).
    assert acc["rate"] == pytest.approx(0.55, abs=0.15)
    assert acc["drafts"] > 0
    assert ab.data["lanes"]["control"]["acceptance"] is None
    if engine == "vllm":
        assert got["draft-length@candidate"] is Verdict.PASS
        assert acc["source"].startswith("vllm counters, delta over")
    else:
        assert got["draft-length@candidate"] is Verdict.INCONCLUSIVE
        assert "sglang:spec_verify_calls_total" in acc["source"]
    for lane in ("candidate", "control"):
        fid = ab.data["fidelity"]["lanes"][lane]
        if engine == "vllm":
            # vLLM's histograms, as deltas around each run: the gate has data (its verdict is
            # the loopback's timing, not asserted).
            assert fid["source"] == "vllm histograms (deltas around the cell)", fid
            assert fid["n_decode"] == fid["requests"] > 0
            assert got[f"fidelity@{lane}"] in (Verdict.PASS, Verdict.FAIL)
            runs = ab.data["lanes"][lane]["runs"]
            assert all(r["server_histograms"]["why"] is None for r in runs), runs
        else:
            assert got[f"fidelity@{lane}"] is Verdict.INCONCLUSIVE


def test_vllm_dev_mode_server_info_verifies_the_rest(tmp_path: Path) -> None:
    """With VLLM_SERVER_DEV_MODE=1 the resolved config answers for the pins /metrics cannot:
    TP, max_num_seqs and the speculative method pass from it, and the pinned quantization
    (fp8) fails against the config's (None, unquantized); revision stays unknown (None)."""
    profile = vllm_profile(spec=Spec(), answer=recall_answer, dev_mode=True)
    res = _run(tmp_path, "vllm", profile, ["identity"])["identity"]
    got = _gates(res)
    for pin in ("parallelism", "max_num_seqs", "speculation", "kv_dtype"):
        assert got[f"pin@{pin}"] is Verdict.PASS, res.reasons
        assert "GET /server_info vllm_config" in _gate(res, f"pin@{pin}").metrics["source"]
    assert got["pin@quantization"] is Verdict.FAIL
    assert got["pin@revision"] is Verdict.INCONCLUSIVE


@pytest.mark.parametrize(
    ("engine", "name"), [("vllm", "spec-counters-absent"), ("sglang", "spec-gauges-absent")]
)
def test_spec_pinned_but_no_counters_is_named_inconclusive(
    engine: str, name: str, tmp_path: Path
) -> None:
    """The candidate pins speculation but the server runs without it (vLLM registers the
    counters only with --speculative-config): acceptance is inconclusive, with its name."""
    res = _run(tmp_path, engine, PROFILES[engine](answer=recall_answer), ["ab"])["ab"]
    gate = _gate(res, "acceptance")
    assert gate.verdict is Verdict.INCONCLUSIVE
    assert f"candidate: {name}:" in gate.reasons[0]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_reasoning_not_split_leaks_think_markup(engine: str, tmp_path: Path) -> None:
    """No reasoning parser: the thinking arrives inside `content` and garble fails on it."""
    profile = PROFILES[engine](reasoning_split=False)
    res = _run(tmp_path, engine, profile, ["preflight"])["preflight"]
    gate = _gate(res, "garble")
    assert gate.verdict is Verdict.FAIL
    assert "<think>" in " ".join(gate.reasons)


@pytest.mark.parametrize(("engine", "shape"), [("vllm", "nested"), ("sglang", "flat")])
def test_live_overlength_body_in_each_engines_shape(engine: str, shape: str) -> None:
    """The replay's 400 for a prompt over the window reads, through the adapter, as an
    over-length error naming the window and the prompt size, in the engine's own shape."""
    with Replay(PROFILES[engine]()) as r:
        words = " ".join(["word"] * 9000)
        body = {"model": "m", "messages": [{"role": "user", "content": words}]}
        resp = httpx.post(f"{r.base_url}/v1/chat/completions", json=body, timeout=10)
    err = adapter(engine).quirks.error(resp.json())
    assert resp.status_code == 400 and err is not None
    # vLLM 0.26 names the prompt size only up to the window ("at least 8192", recorded form).
    assert (err.shape, err.kind, err.limit, err.prompt_tokens) == (
        shape,
        "over-length",
        8192,
        8192 if engine == "vllm" else 9004,
    )
