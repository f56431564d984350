"""`[server.container]`: the exact command each runtime gets, and the one-line error without one."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from qualify.candidate import load_candidate
from qualify.evidence.store import EvidenceStore
from qualify.serving.command import doubled_entrypoint, shell_line
from qualify.serving.process import ServerProcess, StartFailed, gpu_flags

ROOT = Path(__file__).resolve().parents[3]
SEED = ROOT / "examples" / "deepseek-v4-flash-0731" / "candidate.toml"
DIGEST = "sha256:" + "ab" * 32

CONTAINER = f"""
schema_version = 1
name = "c"
[identity]
model = "m"
revision = "r"
engine = "llama.cpp"
engine_build = "b1"
image_digest = "localhost/q@{DIGEST}"
quantization = "q"
kv_dtype = "f16"
context_length = 4096
[server]
base_url = "http://127.0.0.1:{{port}}"
startup_timeout_s = 5
[server.container]
runtime = "{{runtime}}"
image = "localhost/q@{DIGEST}"
gpus = "{{gpus}}"
network = "bridge"
ports = ["{{port}}:8080"]
volumes = ["{{candidate_dir}}:/work:ro"]
env = {{ A = "1" }}
extra_run_args = ["--ulimit", "nofile=1024:1024"]
args = ["--port", "8080"]
"""


def _proc(tmp_path: Path, runtime: str = "docker", gpus: str = "0,1") -> ServerProcess:
    cand = tmp_path / "candidate.toml"
    cand.write_text(CONTAINER.replace("{runtime}", runtime).replace("{gpus}", gpus))
    run = EvidenceStore(tmp_path / "ev").new_run("c")
    return ServerProcess(load_candidate(cand), run.new_attempt("server-candidate"))


def test_docker_command_is_exact(tmp_path: Path) -> None:
    proc = _proc(tmp_path)
    name = f"qualify-{proc.attempt.path.parent.parent.name}-candidate-1"
    assert proc.command() == [
        "docker", "run", "--name", name, "--network", "bridge",
        "--gpus", '"device=0,1"',
        "--ipc", "host",
        "-p", f"{proc.port}:8080",
        "-v", f"{tmp_path}:/work:ro",
        "-e", "A=1",
        "--ulimit", "nofile=1024:1024",
        f"localhost/q@{DIGEST}", "--port", "8080",
    ]  # fmt: skip


def test_podman_hands_gpus_as_cdi_devices(tmp_path: Path) -> None:
    cmd = _proc(tmp_path, "podman").command()
    assert cmd[:2] == ["podman", "run"]
    i = cmd.index("--device")
    assert cmd[i : i + 4] == ["--device", "nvidia.com/gpu=0", "--device", "nvidia.com/gpu=1"]
    assert "--gpus" not in cmd
    assert gpu_flags("podman", "all") == ["--device", "nvidia.com/gpu=all"]
    assert gpu_flags("docker", "all") == ["--gpus", "all"]
    assert gpu_flags("docker", None) == []


def test_seed_recipe_runs_attached_by_digest(tmp_path: Path) -> None:
    loaded = load_candidate(SEED)
    proc = ServerProcess(loaded, EvidenceStore(tmp_path).new_run("s").new_attempt("server-x"))
    cmd = proc.command()
    c = loaded.candidate.server.container
    assert c is not None
    assert "-d" not in cmd and cmd[cmd.index("--name") + 1] == proc.container_name()
    assert cmd[cmd.index("--gpus") + 1] == "all"
    assert cmd[cmd.index(c.image) + 1 : cmd.index(c.image) + 3] == ["vllm", "serve"]
    assert "NCCL_P2P_DISABLE=1" in cmd


def test_bad_gpu_list_is_refused(tmp_path: Path) -> None:
    from qualify.errors import BadInput

    cand = tmp_path / "candidate.toml"
    cand.write_text(CONTAINER.replace("{runtime}", "docker").replace("{gpus}", "GPU0"))
    with pytest.raises(BadInput) as exc:
        load_candidate(cand)
    assert "server.container.gpus" in exc.value.render()


def test_missing_runtime_is_one_clear_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    proc = _proc(tmp_path, "podman")
    with pytest.raises(StartFailed) as exc:
        proc.start()
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith("container runtime 'podman' is not installed here (not on PATH)")
    assert proc.proc is None  # nothing was started


def test_runtime_that_fails_says_why(tmp_path: Path) -> None:
    """A runtime that exits before the server is healthy: its last stderr line is the reason."""
    fake = tmp_path / "bin"
    fake.mkdir()
    script = fake / "docker"
    script.write_text(
        "#!/bin/sh\necho 'Cannot connect to the Docker daemon at unix:///x.sock' >&2\nexit 125\n"
    )
    script.chmod(0o755)
    old = os.environ["PATH"]
    os.environ["PATH"] = f"{fake}:{old}"
    try:
        proc = _proc(tmp_path)
        proc.start()
        with pytest.raises(StartFailed) as exc:
            asyncio.run(proc.wait_healthy())
        proc.stop(keep_container=True)
    finally:
        os.environ["PATH"] = old
    msg = str(exc.value)
    assert "server exited during start-up (exit code 125)" in msg
    assert "Cannot connect to the Docker daemon" in msg


def _with(tmp_path: Path, runtime: str, extra: str) -> ServerProcess:
    """The container candidate with more `[server.container]` lines."""
    cand = tmp_path / "candidate.toml"
    text = CONTAINER.replace("{runtime}", runtime).replace("{gpus}", "1")
    if "volumes" in extra:
        text = text.replace('volumes = ["{candidate_dir}:/work:ro"]\n', "")
    cand.write_text(
        text.replace('args = ["--port", "8080"]', f'args = ["--port", "8080"]\n{extra}')
    )
    run = EvidenceStore(tmp_path / "ev").new_run("c")
    return ServerProcess(load_candidate(cand), run.new_attempt("server-candidate"))


def test_private_ipc_with_shm_size_entrypoint_and_named_volumes(tmp_path: Path) -> None:
    """The launch fields, each in the argv where the runtime reads it: a private IPC namespace
    with its /dev/shm size, the entrypoint replaced, a named volume passed as written and a
    candidate-relative path made absolute."""
    extra = (
        'ipc = "private"\nshm_size = "16g"\nentrypoint = "python3"\n'
        'volumes = ["hf-cache:/root/.cache/huggingface", "./models:/models:ro"]'
    )
    proc = _with(tmp_path, "podman", extra)
    name = proc.container_name()
    assert proc.command() == [
        "podman", "run", "--name", name, "--network", "bridge",
        "--device", "nvidia.com/gpu=1",
        "--ipc", "private", "--shm-size", "16g",
        "--entrypoint", "python3",
        "-p", f"{proc.port}:8080",
        "-v", "hf-cache:/root/.cache/huggingface",
        "-v", f"{(tmp_path / 'models').resolve()}:/models:ro",
        "-e", "A=1",
        "--ulimit", "nofile=1024:1024",
        f"localhost/q@{DIGEST}", "--port", "8080",
    ]  # fmt: skip


def test_cleared_entrypoint_and_runtime_default_ipc(tmp_path: Path) -> None:
    cmd = _with(tmp_path, "docker", 'entrypoint = ""\nipc = "private"').command()
    assert cmd[cmd.index("--entrypoint") + 1] == ""
    assert cmd[cmd.index("--ipc") + 1] == "private" and "--shm-size" not in cmd


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ('shm_size = "16g"', "shm_size applies to a container's own IPC namespace"),
        ('shm_size = "lots"', "server.container.shm_size"),
        ('volumes = ["models"]', "expected SOURCE:/container/path"),
        ('volumes = ["my models:/m"]', "SOURCE must be an absolute path"),
    ],
)
def test_bad_container_fields_are_refused(tmp_path: Path, extra: str, field: str) -> None:
    from qualify.errors import BadInput

    with pytest.raises(BadInput) as exc:
        _with(tmp_path, "docker", extra)
    assert field in exc.value.render()


def test_an_entrypoint_that_already_serves_is_caught() -> None:
    """The vllm/vllm-openai image's entrypoint is `vllm serve`: args that begin with it again
    would run `vllm serve vllm serve MODEL`; the seed recipe's args do, so it clears the
    image's entrypoint (`entrypoint = ""`)."""
    loaded = load_candidate(SEED)
    seed = loaded.candidate.server.container
    assert seed is not None and seed.entrypoint == ""
    assert doubled_entrypoint(seed, ["vllm", "serve"]) is None
    c = seed.model_copy(update={"entrypoint": None})
    why = doubled_entrypoint(c, ["vllm", "serve"])
    assert why is not None and "vllm serve vllm serve" in why
    assert doubled_entrypoint(c, ["/bin/sh", "-c"]) is None
    assert doubled_entrypoint(c, None) is None
    assert doubled_entrypoint(c.model_copy(update={"entrypoint": ""}), ["vllm", "serve"]) is None


def test_launch_line_is_shell_quoted(tmp_path: Path) -> None:
    """The printed command pastes into a shell as launched: JSON and spaces survive."""
    import shlex

    loaded = load_candidate(SEED)
    proc = ServerProcess(loaded, EvidenceStore(tmp_path).new_run("s").new_attempt("server-x"))
    cmd = proc.command()
    line = shell_line(cmd)
    assert shlex.split(line) == cmd
    assert (
        """'{"method":"dspark","num_speculative_tokens":5,"draft_sample_method":"probabilistic"}'"""
        in line
    )


def test_an_entrypoint_that_would_run_twice_stops_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An image whose entrypoint is `vllm serve` and args that begin with `vllm serve`: the
    start is refused before any container runs, saying how to fix the candidate."""
    fake = tmp_path / "bin"
    fake.mkdir()
    ran = tmp_path / "ran"
    script = fake / "docker"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = image ]; then echo \'["vllm","serve"]\'; exit 0; fi\n'
        f"touch {ran}\nexit 0\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    cand = tmp_path / "candidate.toml"
    text = CONTAINER.replace("{runtime}", "docker").replace("{gpus}", "0")
    cand.write_text(text.replace('args = ["--port", "8080"]', 'args = ["vllm", "serve", "m"]'))
    run = EvidenceStore(tmp_path / "ev").new_run("c")
    proc = ServerProcess(load_candidate(cand), run.new_attempt("server-candidate"))
    with pytest.raises(StartFailed, match="would run vllm serve vllm serve") as exc:
        proc.start()
    assert "server.container.entrypoint" in str(exc.value)
    assert proc.proc is None and not ran.exists()
