"""Identity: every pin judged through the engine adapters, and the commands a launch runs.

Each judge is fed data that should fail it and data that should pass it: the pins judge
(`identity-pins`, gate `identity/pin@<name>`) and the reachability judge.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from stage_records import kept, published

from qualify.candidate import Identity, load_candidate
from qualify.errors import BadInput
from qualify.evidence.store import EvidenceStore
from qualify.gates.files import load_gates
from qualify.gates.thresholds import Thresholds
from qualify.identity.judges import PinsParams, ReachableParams, pins, reachable
from qualify.identity.record import Record
from qualify.identity.stage import gather
from qualify.records import Verdict
from qualify.registry import parse_record
from qualify.serving.engine import adapter
from qualify.serving.engine.llamacpp import llamacpp_quant_names
from qualify.serving.engine.vllm import CHAT_PROBE, fingerprint
from qualify.serving.identity import Launch, flag
from qualify.serving.process import ServerProcess

ROOT = Path(__file__).resolve().parents[3]
SHA = "48518e91cf87dd0c0483c76ff86e81dfc0f46de7e364b46f7a82c481ce08188f"


def _pins(**kw: object) -> Identity:
    base: dict[str, object] = dict(
        model="m",
        revision="r",
        engine="llama.cpp",
        engine_build="b1-0c1e570",
        quantization="Q4_1",
        kv_dtype="f16",
        context_length=8192,
        max_num_seqs=1,
    )
    base.update(kw)
    return Identity.model_validate(base)


def _llama(n_ctx: int = 8192, slots: int = 1, ftype: str = "Q4_1", **props: Any) -> dict[str, Any]:
    return {
        "/v1/models": {"data": [{"id": "x", "aliases": ["m"], "owned_by": "llamacpp"}]},
        "/props": {
            "default_generation_settings": {"n_ctx": n_ctx, "params": {}},
            "total_slots": slots,
            "build_info": "b1-0c1e570",
            "model_ftype": ftype,
            **props,
        },
    }


def _local(*args: str, env: dict[str, str] | None = None) -> Launch:
    return Launch("local", ["llama-server", "-m", "x.gguf", *args], env or {})


def _judge(data: Record, **thresholds: Any) -> dict[str, Any]:
    found = pins(data, PinsParams(), Thresholds(**thresholds))
    return {j.part: j for j in found}


def _verdicts(data: Record, **thresholds: Any) -> dict[str, Verdict]:
    return {k: j.verdict for k, j in _judge(data, **thresholds).items()}


def test_every_pin_is_judged_and_a_matching_llamacpp_launch_passes_all_it_can() -> None:
    """Eleven pins, eleven results; all pass but the revision, which llama-server cannot show."""
    data = gather(_pins(), _llama(), _local())
    got = _verdicts(data)
    assert set(got) == set(Identity.model_fields)
    assert got.pop("revision") is Verdict.INCONCLUSIVE
    assert set(got.values()) == {Verdict.PASS}, got
    assert data.not_reported == ["revision"]


def test_unverifiable_pin_passes_only_when_policy_lists_it() -> None:
    """revision: inconclusive by default; pass, marked unverified, when the house allows it."""
    data = gather(_pins(), _llama(), _local())
    assert "no revision" in _judge(data)["revision"].reasons[0]
    allowed = _judge(data, unverifiable_pins=["revision"])["revision"]
    assert allowed.verdict is Verdict.PASS and allowed.metrics["verified"] is False


@pytest.mark.parametrize(
    ("pin", "ftype", "verdict"),
    [
        ("Q4_K_M", "Q4_K - Medium", Verdict.PASS),
        ("q4_k_m", "Q4_K - Medium", Verdict.PASS),
        ("Q4_K_S", "Q4_K - Medium", Verdict.FAIL),
        ("IQ2_XS", "IQ2_XS - 2.3125 bpw", Verdict.PASS),
        ("Q8_0", "Q4_1", Verdict.FAIL),
        ("F32", "(guessed) all F32", Verdict.PASS),
    ],
)
def test_llamacpp_file_type_names(pin: str, ftype: str, verdict: Verdict) -> None:
    """llama.cpp's file-type names are compared with the names people write, never raw."""
    data = gather(_pins(quantization=pin), _llama(ftype=ftype), _local())
    assert _verdicts(data)["quantization"] is verdict


def test_quant_name_table() -> None:
    assert llamacpp_quant_names("Q4_K - Medium") == ("Q4_K_M", "Q4_K")
    assert llamacpp_quant_names("IQ3_S mix - 3.66 bpw") == ("IQ3_M",)


def test_context_is_judged_per_request_not_over_all_slots() -> None:
    """`-c 32768 -np 4`: /props n_ctx is 8192 per slot; a 32768 pin fails, 8192 passes."""
    bodies = _llama(n_ctx=8192, slots=4)
    launch = _local("-c", "32768", "-np", "4")
    bad = _judge(gather(_pins(context_length=32768, max_num_seqs=4), bodies, launch))
    assert bad["context_length"].verdict is Verdict.FAIL
    assert (
        "8192" in bad["context_length"].reasons[0]
        and "one slot" in bad["context_length"].reasons[0]
    )
    good = _verdicts(gather(_pins(context_length=8192, max_num_seqs=4), bodies, launch))
    assert good["context_length"] is Verdict.PASS and good["max_num_seqs"] is Verdict.PASS


@pytest.mark.parametrize(
    ("pin", "verdict"),
    [
        ("b1-0c1e570", Verdict.PASS),
        ("0c1e570", Verdict.PASS),
        ("b1", Verdict.PASS),
        ("b2", Verdict.FAIL),
        ("deadbeef", Verdict.FAIL),
    ],
)
def test_llamacpp_build(pin: str, verdict: Verdict) -> None:
    """build_info `b1-0c1e570` answers to itself, its build number and its commit."""
    assert _verdicts(gather(_pins(engine_build=pin), _llama(), _local()))["engine_build"] is verdict


def test_llamacpp_speculation_from_launch_flags() -> None:
    """ngram-mod drafts 64 unless --spec-ngram-mod-n-max says otherwise; a 16 pin fails."""
    spec = {"method": "ngram-mod", "draft_tokens": 16}
    bad = _judge(gather(_pins(speculation=spec), _llama(), _local("--spec-type", "ngram-mod")))
    assert bad["speculation"].verdict is Verdict.FAIL
    assert bad["speculation"].metrics["reported"]["draft_tokens"] == 64
    launch = _local("--spec-type", "ngram-mod", "--spec-ngram-mod-n-max", "16")
    assert (
        _verdicts(gather(_pins(speculation=spec), _llama(), launch))["speculation"] is Verdict.PASS
    )
    none = _verdicts(gather(_pins(), _llama(), _local("--spec-type", "ngram-mod")))
    assert none["speculation"] is Verdict.FAIL
    mtp = {"method": "mtp", "draft_tokens": 3}
    launch = _local("--spec-type", "draft-mtp")
    assert (
        _verdicts(gather(_pins(speculation=mtp), _llama(), launch))["speculation"] is Verdict.PASS
    )


def test_llamacpp_slots_confirm_whether_the_server_drafts() -> None:
    """/props shows request defaults ("speculative.types": "none" whatever the launch); /slots
    says whether slots draft: a launch asking for ngram-mod whose slots do not draft fails."""
    spec = {"method": "ngram-mod", "draft_tokens": 64}
    launch = _local("--spec-type", "ngram-mod")
    bodies = _llama() | {"/slots": [{"n_ctx": 8192, "speculative": True}]}
    bodies["/props"]["default_generation_settings"]["params"]["speculative.types"] = "none"
    assert _verdicts(gather(_pins(speculation=spec), bodies, launch))["speculation"] is Verdict.PASS
    bodies["/slots"] = [{"n_ctx": 8192, "speculative": False}]
    assert _verdicts(gather(_pins(speculation=spec), bodies, launch))["speculation"] is Verdict.FAIL


def test_llamacpp_kv_and_parallelism_from_launch_flags() -> None:
    """-ctk/-ctv q8_0 fails an f16 pin; -sm row fails a tensor = 1 pin."""
    launch = _local("-ctk", "q8_0", "-ctv", "q8_0", "-sm", "row")
    got = _verdicts(gather(_pins(), _llama(), launch))
    assert got["kv_dtype"] is Verdict.FAIL and got["parallelism"] is Verdict.FAIL
    ok = _verdicts(gather(_pins(kv_dtype="q8_0", parallelism={"tensor": 2}), _llama(), launch))
    assert ok["kv_dtype"] is Verdict.PASS and ok["parallelism"] is Verdict.PASS


def test_attached_server_leaves_launch_pins_unverifiable() -> None:
    """With no launch, the pins only a launch shows are inconclusive, each saying why."""
    digest = "registry/llama@sha256:" + "b" * 64
    data = gather(_pins(image_digest=digest), _llama(), None)
    got = _judge(data)
    for pin in ("kv_dtype", "parallelism", "speculation", "image_digest"):
        assert got[pin].verdict is Verdict.INCONCLUSIVE, pin
    assert "attached" in got["kv_dtype"].reasons[0]


def test_wrong_model_and_engine_fail() -> None:
    bodies = _llama()
    bodies["/v1/models"]["data"][0]["owned_by"] = "vllm"
    got = _verdicts(gather(_pins(model="other"), bodies, _local()))
    assert got["model"] is Verdict.FAIL and got["engine"] is Verdict.FAIL


def _vllm_pins(**kw: object) -> Identity:
    base: dict[str, object] = dict(
        engine="vllm",
        engine_build="0.33.0",
        quantization="fp8",
        context_length=65536,
        max_num_seqs=8,
        kv_dtype="fp8",
    )
    return _pins(**(base | kw))


def _vllm(version: str = "0.33.0") -> dict[str, Any]:
    return {
        "/v1/models": {"data": [{"id": "m", "owned_by": "vllm", "max_model_len": 65536}]},
        "/version": {"version": version},
    }


VLLM_ARGS = [
    "vllm",
    "serve",
    "/models/m",
    "--served-model-name",
    "m",
    "-tp",
    "2",
    "--max-num-seqs",
    "8",
    "--kv-cache-dtype",
    "fp8",
    "--quantization",
    "fp8",
    "--speculative-config",
    '{"method":"dspark","num_speculative_tokens":5}',
]


def test_vllm_version_against_a_git_sha_pin() -> None:
    """A SHA pin against a release version cannot be told (inconclusive, saying so); against a
    version that carries +g<sha> it is compared."""
    launch = Launch("local", VLLM_ARGS)
    sha = "4ba787ec9"
    got = _judge(gather(_vllm_pins(engine_build=sha), _vllm(), launch))["engine_build"]
    assert got.verdict is Verdict.INCONCLUSIVE and "names no commit" in got.reasons[0]
    dev = _vllm(f"0.33.1.dev4+g{sha}")
    assert (
        _verdicts(gather(_vllm_pins(engine_build=sha), dev, launch))["engine_build"] is Verdict.PASS
    )
    other = _verdicts(gather(_vllm_pins(engine_build="30038602b7"), dev, launch))
    assert other["engine_build"] is Verdict.FAIL
    assert (
        _verdicts(gather(_vllm_pins(engine_build="0.32.0"), _vllm(), launch))["engine_build"]
        is Verdict.FAIL
    )


def test_vllm_launch_flags() -> None:
    """Parallelism, KV dtype, quantization, max_num_seqs and speculation from the flags."""
    spec = {"method": "dspark", "draft_tokens": 5}
    launch = Launch("local", VLLM_ARGS)
    got = _verdicts(
        gather(_vllm_pins(parallelism={"tensor": 2}, speculation=spec), _vllm(), launch)
    )
    for pin in ("parallelism", "kv_dtype", "quantization", "max_num_seqs", "speculation"):
        assert got[pin] is Verdict.PASS, pin
    bad = _verdicts(
        gather(
            _vllm_pins(max_num_seqs=16, speculation={"method": "dspark", "draft_tokens": 3}),
            _vllm(),
            launch,
        )
    )
    assert bad["parallelism"] is Verdict.FAIL and bad["max_num_seqs"] is Verdict.FAIL
    assert bad["speculation"] is Verdict.FAIL


def test_container_image_digest_against_the_runtime() -> None:
    """The runtime's RepoDigests must hold the pinned digest; a local launch of a pinned image
    fails; a runtime that could not say is inconclusive."""
    ref = f"voipmonitor/vllm@sha256:{SHA}"
    ok = Launch(
        "container", VLLM_ARGS, image={"image": ref, "id": "sha256:aa", "repo_digests": [ref]}
    )
    pins_ = _vllm_pins(image_digest=ref)
    assert _verdicts(gather(pins_, _vllm(), ok))["image_digest"] is Verdict.PASS
    other = Launch(
        "container",
        VLLM_ARGS,
        image={"image": ref, "id": "sha256:aa", "repo_digests": [f"x/y@sha256:{'1' * 64}"]},
    )
    assert _verdicts(gather(pins_, _vllm(), other))["image_digest"] is Verdict.FAIL
    assert (
        _verdicts(gather(pins_, _vllm(), Launch("local", VLLM_ARGS)))["image_digest"]
        is Verdict.FAIL
    )
    broken = Launch("container", VLLM_ARGS, image={"image": ref, "error": "docker: not found"})
    assert _verdicts(gather(pins_, _vllm(), broken))["image_digest"] is Verdict.INCONCLUSIVE


def test_sglang_reads_its_resolved_server_args() -> None:
    bodies = {
        "/v1/models": {"data": [{"id": "m", "owned_by": "sglang", "max_model_len": 65536}]},
        "/server_info": {
            "version": "0.5.23",
            "revision": "r",
            "quantization": "fp8",
            "kv_cache_dtype": "fp8_e4m3",
            "tp_size": 2,
            "pp_size": 1,
            "dp_size": 1,
            "ep_size": 1,
            "max_running_requests": 8,
            "speculative_algorithm": "EAGLE3",
            "speculative_num_draft_tokens": 5,  # 4 drafted + the verified token
        },
    }
    spec = {"method": "eagle3", "draft_tokens": 4}
    p = _pins(
        engine="sglang",
        engine_build="0.5.23",
        quantization="fp8",
        kv_dtype="fp8",
        context_length=65536,
        max_num_seqs=8,
        parallelism={"tensor": 2},
        speculation=spec,
    )
    got = _verdicts(gather(p, bodies, None))
    assert {k: v for k, v in got.items() if v is not Verdict.PASS} == {}  # image: not pinned
    bodies["/server_info"]["tp_size"] = 1
    assert _verdicts(gather(p, bodies, None))["parallelism"] is Verdict.FAIL


def test_deepseek_example_does_not_veto_itself_on_its_sha_pin() -> None:
    """The DeepSeek example pins a git SHA for vLLM: against /version it is inconclusive."""
    loaded = load_candidate(ROOT / "examples" / "deepseek-v4-flash-0731" / "candidate.toml")
    c = loaded.candidate.server.container
    assert c is not None
    launch = Launch("container", c.args, image={"image": c.image, "repo_digests": [c.image]})
    bodies = {
        "/v1/models": {
            "data": [
                {"id": loaded.candidate.identity.model, "owned_by": "vllm", "max_model_len": 131072}
            ]
        },
        "/version": {"version": "0.33.0"},
    }
    got = _verdicts(gather(loaded.candidate.identity, bodies, launch))
    assert got["engine_build"] is Verdict.INCONCLUSIVE
    assert Verdict.FAIL not in got.values(), got


def test_reachable_judge() -> None:
    record = gather(_pins(), {"/v1/models": None}, None, "HTTP 503")
    (bad,) = reachable(record, ReachableParams(), Thresholds())
    assert bad.verdict is Verdict.ERROR and "HTTP 503" in bad.reasons[0]
    (good,) = reachable(gather(_pins(), _llama(), _local()), ReachableParams(), Thresholds())
    assert good.verdict is Verdict.PASS


def test_identity_gate_files_load_and_are_critical() -> None:
    gates, problems = load_gates(ROOT / "gates", "identity")
    assert problems == []
    assert {g.gate.id: g.gate.critical for g in gates} == {"pin": True, "reachable": True}


def test_flag_reads_both_forms_and_the_last() -> None:
    assert flag(["-c", "1", "--ctx-size=2"], "-c", "--ctx-size") == "2"
    assert flag(["-c"], "-c") is None


def test_container_launch_command(tmp_path: Path) -> None:
    """A container launch runs the image by digest with its volumes, env and args."""
    loaded = load_candidate(ROOT / "examples" / "deepseek-v4-flash-0731" / "candidate.toml")
    attempt = EvidenceStore(tmp_path).new_run("c").new_attempt("server-candidate")
    cmd = ServerProcess(loaded, attempt).command()
    assert cmd[:2] == ["docker", "run"] and "-d" not in cmd  # attached: its output is the log
    assert cmd[cmd.index("--network") + 1] == "host"
    assert "--gpus" in cmd and "dsv4-models:/models" in cmd
    image = loaded.candidate.server.container.image  # type: ignore[union-attr]
    assert cmd[cmd.index(image) + 1 : cmd.index(image) + 3] == ["vllm", "serve"]


def test_unknown_placeholder_is_bad_input(tmp_path: Path) -> None:
    """A launch command naming an unknown placeholder is refused with its index."""
    src = (ROOT / "examples" / "smollm2" / "candidate.toml").read_text()
    cand = tmp_path / "c.toml"
    cand.write_text(src.replace('"{llama_server}", "-m"', '"{llama_srv}", "-m"'))
    loaded = load_candidate(cand)
    attempt = EvidenceStore(tmp_path).new_run("c").new_attempt("server-candidate")
    with pytest.raises(BadInput) as exc:
        ServerProcess(loaded, attempt).command()
    assert "server.launch.command[0]" in exc.value.render()


PUBLISHED = published("identity")


def test_the_repository_holds_identity_results() -> None:
    assert len(PUBLISHED) >= 5


@pytest.mark.parametrize("name,result", PUBLISHED, ids=[n for n, _ in PUBLISHED])
def test_every_published_identity_result_reads(name: str, result: dict[str, Any]) -> None:
    record = parse_record("identity", result["data"])
    assert isinstance(record, Record)
    out = record.model_dump(mode="json")
    assert out.pop("record_version") == 1
    assert kept(out, result["data"])
    assert Record.model_validate(out) == record


def _as_written_before(
    pins: Identity, bodies: dict[str, Any], launch: Launch | None
) -> dict[str, Any]:
    """The stage's `data` as the stage wrote it as a plain table, before its typed record."""
    seen, why = adapter(pins.engine).observe(bodies, launch)
    pinned = pins.model_dump(mode="json")
    fp = fingerprint(bodies.get(CHAT_PROBE))
    return {
        "engine": pins.engine,
        "unreachable": None,
        "pins": pinned,
        "seen": {p: {"value": s.value, "source": s.source, "by": s.by} for p, s in seen.items()},
        "proved_by": {p: s.by for p, s in seen.items() if p in pinned},
        "fingerprint": None if fp is None else {"version": fp[0], "config_hash": fp[1]},
        "unverifiable": {p: w for p, w in why.items() if p not in seen},
        "reported": {p: s.value for p, s in seen.items()},
        "not_reported": sorted(p for p in why if p not in seen and p in pinned),
        "launch": None if launch is None else {"kind": launch.kind, "args": launch.args},
        "launches": [{"lane": "candidate", "attempt": 1, "healthy_after_s": 0.5, "port": 8080}],
    }


@pytest.mark.parametrize("engine", ["llama.cpp", "vllm"])
def test_the_record_writes_what_the_stage_wrote_before(engine: str) -> None:
    """Same inputs, same JSON: the record's form is the table the stage wrote, plus its
    version."""
    if engine == "vllm":
        pins_, bodies, launch = _vllm_pins(), _vllm(), Launch("local", VLLM_ARGS)
    else:
        pins_, bodies, launch = _pins(), _llama(), _local("--spec-type", "ngram-mod")
    launches: list[dict[str, object]] = [
        {"lane": "candidate", "attempt": 1, "healthy_after_s": 0.5, "port": 8080}
    ]
    record = gather(pins_, bodies, launch, None, launches)
    want = _as_written_before(pins_, bodies, launch)
    unpinned = ["image_digest"] if pins_.image_digest is None else []
    assert record.model_dump(mode="json") == {**want, "record_version": 1, "unpinned": unpinned}


def test_a_misspelt_identity_field_is_refused() -> None:
    data = gather(_pins(), _llama(), _local()).model_dump(mode="json")
    with pytest.raises(ValidationError, match="not_reportd"):
        Record.model_validate({**data, "not_reportd": []})
    data["seen"]["model"]["by"] = "rumour"
    with pytest.raises(ValidationError, match="by"):
        Record.model_validate(data)


def test_a_published_identity_record_of_this_build_writes_back_exactly() -> None:
    exact = 0
    for _, result in PUBLISHED:
        record = Record.model_validate(result["data"])
        exact += record.model_dump(mode="json") == {**result["data"], "record_version": 1}
    assert exact >= 2


def test_an_unpinned_image_passes_saying_so_where_nothing_can_report_it() -> None:
    """Attached to a running server nothing reports the image: a recipe that pins a digest gets
    an inconclusive gate, one that pins none claims nothing and passes, named as not pinned. A
    record of an earlier build (no `unpinned`) is judged as it was then."""
    attached = gather(_pins(), _llama(), None)
    assert attached.unpinned == ["image_digest"]
    got = _judge(attached)["image_digest"]
    assert got.verdict is Verdict.PASS and "not pinned" in got.reasons[0]
    digest = "registry/llama@sha256:" + "a" * 64
    pinned = _judge(gather(_pins(image_digest=digest), _llama(), None))["image_digest"]
    assert pinned.verdict is Verdict.INCONCLUSIVE and "cannot be verified" in pinned.reasons[0]
    earlier = attached.model_copy(update={"unpinned": None})
    assert _judge(earlier)["image_digest"].verdict is Verdict.INCONCLUSIVE
