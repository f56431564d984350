"""`[server.container]` for real: the local llama-server in a podman container, by digest.

The image is built here, with no registry: the local llama-server binary and the shared
libraries it links (the host's Debian libc6, libstdc++6, libgcc-s1, libgomp1 files) are packed
into a root filesystem and `podman import`ed. The candidate pins the digest podman reports; the
identity stage checks it against what the runtime says of the running container, and a whole
`qualify run` (identity and preflight, each stage in its own container) signs a decision that
verifies and leaves no container behind.

Needs podman and a runtime that can start a container on this host (`scripts/test-deps.sh`
installs both; runc here: crun refuses the
host's hybrid cgroups, and the sandbox cannot raise rlimits, so the test's containers.conf lowers
them). Without podman, or where podman cannot run a container at all, the test is skipped with
the reason; the command it builds is proven in tests/unit/serving/test_container_launch.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

import git
import pytest

from qualify.decision.verify import verify
from qualify.evidence.signing import generate, load_public
from qualify.pipeline import execute
from qualify.progress import Progress
from qualify.records import Verdict
from qualify.serving.local import LocalPaths
from qualify.trust.repository import init, pin

pytestmark = pytest.mark.integration

REPO = "localhost/qualify-llama-test"
LIBS = ("libgomp.so.1", "libstdc++.so.6", "libm.so.6", "libgcc_s.so.1", "libc.so.6")
CONF = '[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]\n'


def _podman(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory, local_server: LocalPaths) -> Iterator[str]:
    """The image pinned by digest (`localhost/qualify-llama-test@sha256:…`)."""
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed: the container path is proven by its command only")
    d = tmp_path_factory.mktemp("image")
    conf = d / "containers.conf"
    runtime = "runc" if shutil.which("runc") else "crun"
    conf.write_text(CONF + f'[engine]\nruntime = "{runtime}"\n')
    mp = pytest.MonkeyPatch()
    mp.setenv("CONTAINERS_CONF", str(conf))
    with tarfile.open(d / "rootfs.tar", "w") as tar:
        tar.add(local_server.binary, "usr/local/bin/llama-server")
        for lib in LIBS:
            tar.add(Path("/lib/x86_64-linux-gnu", lib).resolve(), f"lib/x86_64-linux-gnu/{lib}")
        tar.add(Path("/lib64/ld-linux-x86-64.so.2").resolve(), "lib64/ld-linux-x86-64.so.2")
    made = _podman(
        "import", "--change", 'ENTRYPOINT ["/usr/local/bin/llama-server"]',
        str(d / "rootfs.tar"), f"{REPO}:test",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    digest = _podman("image", "inspect", "--format", "{{.Digest}}", f"{REPO}:test").stdout.strip()
    ref = f"{REPO}@{digest}"
    probe = _podman("run", "--rm", "--network", "host", ref, "--version")
    if probe.returncode != 0:
        mp.undo()
        pytest.skip(f"podman cannot run a container on this host: {probe.stderr.strip()[-200:]}")
    yield ref
    mp.undo()
    _podman("rmi", "-f", f"{REPO}:test")


def _container_candidate(
    tmp_path: Path, local: LocalPaths, ref: str, stages: tuple[str, ...] = ("identity",)
) -> Path:
    from conftest import write_candidate

    cand = write_candidate(tmp_path / "cand", stages=list(stages))
    text = cand.read_text()
    start, end = text.index("[server.launch]"), text.index("# Reasoning levels")
    block = f"""[server.container]
runtime = "podman"
image = "{ref}"
volumes = ["{local.model.parent}:/models:ro", "{local.templates}:/templates:ro"]
args = [
  "-m", "/models/{local.model.name}", "--alias", "SmolLM2-135M-Instruct",
  "--host", "127.0.0.1", "--port", "{{port}}", "-c", "8192", "-np", "1", "-t", "2",
  "--metrics", "--chat-template-file", "/templates/Qwen-Qwen3-0.6B.jinja",
  "--spec-type", "ngram-mod",
]

"""
    text = text[:start] + block + text[end:]
    text = text.replace('quantization = "Q4_1"', f'image_digest = "{ref}"\nquantization = "Q4_1"')
    cand.write_text(text)
    return cand


def test_container_by_digest_logs_kept_digest_checked_and_removed(
    tmp_path: Path, image: str, local_server: LocalPaths, stage_runner: Callable[..., object]
) -> None:
    cand = _container_candidate(tmp_path, local_server, image)
    runner = stage_runner(cand)
    result = runner.stage("identity")  # type: ignore[attr-defined]
    gates = {g.gate: g for g in result.gates}
    assert gates["pin@image_digest"].verdict is Verdict.PASS, gates["pin@image_digest"].reasons
    assert result.data["launch"]["kind"] == "container"
    (server,) = sorted((runner.run.path / "server-candidate").iterdir())  # type: ignore[attr-defined]
    launch = json.loads((server / "launch.json").read_text())
    assert launch["command"][:2] == ["podman", "run"] and image in launch["command"]
    logs = b"".join(p.read_bytes() for p in server.glob("std*"))
    assert b"llama" in logs.lower()  # the server's own output, through the attached run
    assert json.loads((server / "exit.json").read_text())["exit_code"] is not None
    listed = _podman("ps", "-a", "--format", "{{.Names}}").stdout.split()
    assert launch["container"] not in listed  # stopped and removed after the stage


def test_container_that_dies_keeps_its_container_and_logs(
    tmp_path: Path, image: str, local_server: LocalPaths, stage_runner: Callable[..., object]
) -> None:
    cand = _container_candidate(tmp_path, local_server, image)
    cand.write_text(cand.read_text().replace('"-c", "8192"', '"-c", "8192", "--no-such-flag"'))
    runner = stage_runner(cand)
    result = runner.stage("identity")  # type: ignore[attr-defined]
    assert result.verdict is Verdict.ERROR
    assert "exited during start-up (exit code" in result.reasons[0]
    (server,) = sorted((runner.run.path / "server-candidate").iterdir())  # type: ignore[attr-defined]
    name = json.loads((server / "launch.json").read_text())["container"]
    assert name in _podman("ps", "-a", "--format", "{{.Names}}").stdout.split()
    _podman("rm", "-f", name)


def test_qualify_run_in_containers_signs_a_decision_that_verifies_and_leaves_none(
    tmp_path: Path, image: str, local_server: LocalPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`qualify run` on a `[server.container]` candidate: each stage starts its own container
    (the control's lane still a local process), the decision is signed under a house that
    requires identity and preflight, verifies, and no container of the run is left."""
    monkeypatch.setenv("QUALIFY_TICKETS", str(tmp_path / "tickets"))
    monkeypatch.delenv("QUALIFY_HOUSE", raising=False)
    key, pub = generate(tmp_path / "keys" / "ci")
    house = tmp_path / "house"
    init(house)
    (house / "house-policy.toml").write_text(
        'version = 1\nrequired = ["identity/*", "preflight/smoke@off"]\n'
        'critical = ["identity/*"]\n[thresholds]\nunverifiable_pins = ["revision"]\n'
    )
    git.Repo(house).git.commit("-am", "house: identity and the smoke test")
    pin(house, "decision", pub, "ci", "the CI runner signs decisions")
    cand = _container_candidate(tmp_path, local_server, image, ("identity", "preflight"))
    before = set(_podman("ps", "-a", "--format", "{{.Names}}").stdout.split())
    root = tmp_path / "evidence"
    code = execute(cand, root, key=str(key), progress=Progress(quiet=True), house=house)
    (run,) = [p for p in root.glob("*/*") if (p / "run.json").is_file()]
    report = verify(run / "decision/attempt-001.dsse.json", load_public(pub))
    assert report.ok, report.problems
    assert code == 0, (run / "decision/attempt-001/decision.md").read_text()[:3000]
    launches = [json.loads(p.read_text()) for p in run.glob("*/server-candidate/*/launch.json")]
    launches += [json.loads(p.read_text()) for p in run.glob("server-candidate/*/launch.json")]
    names = {x["container"] for x in launches if x.get("container")}
    assert names, "every stage's candidate server ran in a container"
    left = set(_podman("ps", "-a", "--format", "{{.Names}}").stdout.split()) - before
    assert not left & names and not [n for n in left if n.startswith("qualify-")], left
