"""`qualify init --attach URL` against what real servers said: the vLLM 0.26.0 of the H200 kit
(tests/fixtures/engines/vllm/recorded/: port 8000 the candidate with ngram k=5, 8001 the control
without speculation; `record` in dev mode, `probe` without) and SGLang's recorded reports,
answered through httpx.MockTransport. Every pin the server reports is written and judged the
same by the identity stage's own judge; every other one says why it is to be set by hand."""

from __future__ import annotations

import asyncio
import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from qualify import init_candidate
from qualify.candidate import load_candidate
from qualify.cli import main
from qualify.gates.thresholds import Thresholds
from qualify.httpclient.client import Client
from qualify.identity.judges import PinsParams
from qualify.identity.judges import pins as judge_pins
from qualify.identity.stage import gather
from qualify.pipeline import plan
from qualify.records import Verdict
from qualify.serving.process import free_port

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "engines"
Handler = Callable[[httpx.Request], httpx.Response]


def recorded_vllm(which: str) -> Handler:
    """The recording's answer to a request, by port, method and path (with its query first)."""
    rec: dict[str, Any] = json.loads(
        (FIX / "vllm" / "recorded" / f"vllm-0.26.0-h200-{which}.json").read_text()
    )

    def answer(req: httpx.Request) -> httpx.Response:
        for path in (req.url.raw_path.decode(), req.url.path):
            for entry in rec.values():
                r = entry["request"]
                if (r["port"], r["method"], r["path"]) == (req.url.port, req.method, path):
                    kind = entry["headers"].get("content-type", "application/json")
                    body = entry["body"].encode()
                    return httpx.Response(
                        entry["status"], headers={"content-type": kind}, content=body
                    )
        return httpx.Response(404, json={"detail": "Not Found"})

    return answer


def recorded_sglang(req: httpx.Request) -> httpx.Response:
    """SGLang's recorded `/v1/models` and `/server_info` (tests/fixtures/engines/sglang/)."""
    name = {"/v1/models": "models.json", "/server_info": "server_info.json"}.get(req.url.path)
    if name is None:
        return httpx.Response(404, json={"detail": "Not Found"})
    return httpx.Response(200, content=(FIX / "sglang" / name).read_bytes())


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Callable[[Handler], None]:
    """Every client `qualify init` opens is answered by `handler`."""

    def use(handler: Handler) -> None:
        transport = httpx.MockTransport(handler)

        def client(url: str, key: str | None = None, **kw: Any) -> Client:
            return Client(url, key, timeout_s=kw.get("timeout_s", 30.0), transport=transport)

        monkeypatch.setattr(init_candidate, "Client", client)

    return use


def _init(tmp: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    out = tmp / "candidate.toml"
    rc = main(["init", "--attach", "http://127.0.0.1:8000", "--out", str(out), *extra])
    text = out.read_text() if out.exists() else ""
    return rc, tomllib.loads(text) if text else {}, text


def _verdicts(path: Path, which: str) -> dict[str, Verdict]:
    """The identity stage's judge of the written pins against the same recorded server."""
    transport = httpx.MockTransport(recorded_vllm(which))

    async def read() -> init_candidate.Server:
        return await init_candidate.read_server("http://127.0.0.1:8000", transport=transport)

    server = asyncio.run(read())
    record = gather(load_candidate(path).candidate.identity, server.bodies, None)
    return {str(j.part): j.verdict for j in judge_pins(record, PinsParams(), Thresholds())}


def test_dev_mode_vllm_fills_every_pin_and_the_control(
    tmp_path: Path, serve: Callable[[Handler], None], capsys: pytest.CaptureFixture[str]
) -> None:
    """With /server_info (dev mode) vLLM reports every pin but the revision and the image: each
    is written with where it was read, the control's server (8001, no speculative config) gives
    the control its one override, and both files validate."""
    serve(recorded_vllm("record"))
    rc, cand, text = _init(tmp_path, "--control-url", "http://127.0.0.1:8001")
    assert rc == 0, capsys.readouterr().err
    ident = cand["identity"]
    assert ident == {
        "model": "SmolLM2-135M-Instruct",
        "revision": "unknown",
        "engine": "vllm",
        "engine_build": "0.26.0",
        "quantization": "none",
        "kv_dtype": "auto",
        "parallelism": {"tensor": 1},
        "context_length": 8192,
        "max_num_seqs": 8,
        "speculation": {"method": "ngram", "draft_tokens": 5},
    }
    assert "# read from GET /v1/models max_model_len\ncontext_length = 8192" in text
    assert "# read from GET /server_info vllm_config speculative_config\nspeculation" in text
    assert "not reported by vLLM: set it by hand" in text
    assert '# image_digest = "' in text  # commented out: unset, nothing is pinned
    assert cand["server"] == {
        "base_url": "http://127.0.0.1:8000",
        "health_path": "/health",
        "request_timeout_s": 120,
        "attach": True,
    }
    assert cand["reasoning"] == {
        "off": {"reasoning_effort": "none"},
        "think": {"reasoning_effort": "medium"},
    }
    assert "reasons with the 'qwen3' parser" in text.replace("\n# ", " ")
    assert cand["stages"]["ab"] == {"control": "control.toml"} and "ab" in cand["stages"]["run"]
    control = tomllib.loads((tmp_path / "control.toml").read_text())
    assert control["extends"] == "candidate.toml"
    assert control["variable"] == "speculative decoding off"
    assert control["overrides"] == {
        "server.base_url": "http://127.0.0.1:8001",
        "identity.speculation": {"method": "none", "draft_tokens": 0},
    }
    p = plan(tmp_path / "candidate.toml")
    assert p.control is not None and p.control.candidate.identity.speculation.method == "none"
    assert "valid candidate smollm2-135m-instruct-vllm (control" in capsys.readouterr().out
    verdicts = _verdicts(tmp_path / "candidate.toml", "record")
    assert {k for k, v in verdicts.items() if v is not Verdict.PASS} == {
        "revision"
    }  # image: not pinned


def test_vllm_without_dev_mode_marks_what_it_does_not_report(
    tmp_path: Path, serve: Callable[[Handler], None]
) -> None:
    """Without /server_info, vLLM reports its version, window, KV dtype and the draft length,
    not the method, the quantization, TP or max_num_seqs: each of those says so, required ones
    with a placeholder, the others commented out; identity then finds nothing that fails."""
    serve(recorded_vllm("probe"))
    rc, cand, text = _init(tmp_path)
    assert rc == 0
    ident = cand["identity"]
    assert (ident["engine"], ident["engine_build"], ident["context_length"]) == (
        "vllm",
        "0.26.0",
        8192,
    )
    assert ident["kv_dtype"] == "auto" and ident["quantization"] == "unknown"
    assert ident["speculation"] == {"method": "unknown", "draft_tokens": 5}
    assert "max_num_seqs" not in ident and "parallelism" not in ident
    assert "\n# max_num_seqs = 1\n" in text and "\n# parallelism = { tensor = 1 }\n" in text
    assert "VLLM_SERVER_DEV_MODE=1" in text and "5 position labels" in text
    assert "reports no\n# method" in text or "reports no method" in text.replace("\n# ", " ")
    assert "ab" not in cand["stages"]["run"] and "--control-url" in text
    assert list(cand["reasoning"]) == ["default"]
    plan(tmp_path / "candidate.toml")
    verdicts = _verdicts(tmp_path / "candidate.toml", "probe")
    assert Verdict.FAIL not in verdicts.values()
    assert {k for k, v in verdicts.items() if v is Verdict.PASS} == {
        "model",
        "engine",
        "engine_build",
        "kv_dtype",
        "context_length",
        "image_digest",  # not pinned: nothing claimed
    }


def test_sglang_reports_from_server_info(tmp_path: Path, serve: Callable[[Handler], None]) -> None:
    """SGLang's /server_info: version, TP = 2, KV dtype and its reasoning parser."""
    serve(recorded_sglang)
    rc, cand, text = _init(tmp_path, "--name", "ds-flash")
    assert rc == 0 and cand["name"] == "ds-flash"
    ident = cand["identity"]
    assert (ident["engine"], ident["engine_build"]) == ("sglang", "0.5.23")
    assert ident["parallelism"] == {"tensor": 2}
    assert ident["speculation"] == {"method": "none", "draft_tokens": 0}
    assert "the 'deepseek-v3' parser" in text.replace("\n# ", " ")
    plan(tmp_path / "candidate.toml")


def test_unreachable_server_is_one_line_naming_the_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    rc = main(["init", "--attach", url, "--out", str(tmp_path / "c.toml")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert url in err and "not reachable" in err and "connection failed" in err
    assert not (tmp_path / "c.toml").exists()


def test_an_existing_file_is_never_overwritten_without_force(
    tmp_path: Path, serve: Callable[[Handler], None], capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused before the server is asked anything (one line naming the file); --force
    overwrites; the control file counts too."""
    out = tmp_path / "candidate.toml"
    out.write_text("mine\n")
    rc = main(["init", "--attach", "http://127.0.0.1:1", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err == f"qualify: {out} exists: pass --force to overwrite it"
    assert out.read_text() == "mine\n"
    serve(recorded_vllm("record"))
    (tmp_path / "control.toml").write_text("theirs\n")
    out.unlink()
    rc = main(
        [
            "init",
            "--attach",
            "http://127.0.0.1:8000",
            "--out",
            str(out),
            "--control-url",
            "http://127.0.0.1:8001",
        ]
    )
    assert rc == 2 and "control.toml exists" in capsys.readouterr().err
    assert not out.exists()
    out.write_text("mine\n")
    rc, cand, _ = _init(tmp_path, "--force")
    assert rc == 0 and cand["identity"]["engine"] == "vllm"


def test_a_server_of_no_known_engine_is_refused(
    tmp_path: Path, serve: Callable[[Handler], None], capsys: pytest.CaptureFixture[str]
) -> None:
    serve(lambda _req: httpx.Response(200, json={"data": [{"id": "m", "owned_by": "acme"}]}))
    rc, _, _ = _init(tmp_path)
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "owned_by 'acme'" in err


def test_the_api_key_is_sent_and_only_its_variable_written(
    tmp_path: Path, serve: Callable[[Handler], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--api-key-env VAR: the key from the environment authorizes every request; the file names
    the variable, never the key."""
    monkeypatch.setenv("INIT_TEST_KEY", "sk-secret")
    inner = recorded_vllm("probe")

    def guarded(req: httpx.Request) -> httpx.Response:
        if req.headers.get("authorization") != "Bearer sk-secret":
            return httpx.Response(401, json={"error": "Unauthorized"})
        return inner(req)

    serve(guarded)
    rc, _, _ = _init(tmp_path)
    assert rc == 2
    rc, cand, text = _init(tmp_path, "--api-key-env", "INIT_TEST_KEY")
    assert rc == 0 and cand["server"]["api_key_env"] == "INIT_TEST_KEY"
    assert "sk-secret" not in text


@pytest.mark.parametrize(
    ("drafting", "seen"), [(False, {"method": "none", "draft_tokens": 0}), (True, None)]
)
def test_attached_llamacpp_speculation_from_slots(drafting: bool, seen: Any) -> None:
    """Attached, llama-server's launch flags are unknown, but /slots says whether a slot drafts:
    none drafting proves speculation off; drafting leaves the method to the hand, saying so."""
    from qualify.serving.engine import adapter

    bodies = {"/slots": [{"id": 0, "speculative": drafting}], "/props": {}}
    got, why = adapter("llama.cpp").observe(bodies, None)
    assert (got["speculation"].value if "speculation" in got else None) == seen
    if drafting:
        assert "GET /slots says the slots draft" in why["speculation"]
