"""Server lifecycle: launch (local process or container), wait for health, capture logs, stop.

A container runs attached (`<runtime> run --name qualify-<run>-<lane>-<n>`, no `-d`), so its
output is the server log and the `run` process lives exactly as long as the container; it is
stopped and removed through the runtime by name.

Logs go straight into the evidence (split at the size limit). A failed start keeps its logs
(and its container) and says where. A launch whose command and base URL name `{port}` gets a
port the OS reports free at launch, so two runs on one host never ask for the same one. Every
server started here is stopped when `qualify` exits, Ctrl-C included: `stop_all` runs from the
pipeline's `finally` and from `atexit`.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO

import httpx

from qualify.candidate import ContainerLaunch, LoadedCandidate, Server
from qualify.errors import BadInput, RunAborted
from qualify.evidence.store import Attempt, ChunkedWriter
from qualify.serving.command import doubled_entrypoint, image_entrypoint, volume
from qualify.serving.local import LocalPaths, free_port, signal_name, stop_group

_LIVE: set[ServerProcess] = set()
_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
PORT = "{port}"
# What a server prints when its port was taken between our probe and its bind (llama-server,
# uvicorn for vLLM and SGLang).
_BIND_FAILED = re.compile(rb"address already in use|couldn't bind|errno 98", re.IGNORECASE)


class StartFailed(RunAborted):
    """The server did not become healthy in time; its logs are kept."""


def _die_with_parent() -> None:
    """In the child: ask Linux to SIGTERM it if qualify itself dies (even by SIGKILL)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _pump(stream: IO[bytes], sink: ChunkedWriter, lock: threading.Lock) -> None:
    for line in iter(stream.readline, b""):
        with lock:
            sink.write(line)


def expand(
    args: list[str], loaded: LoadedCandidate, field_path: str, port: int | None = None
) -> list[str]:
    """Fill `{llama_server}`, `{llama_server_cuda}`, `{smollm2_gguf}`, `{llama_templates}`,
    `{candidate_dir}` and `{port}`; other braces (JSON arguments) are left alone."""
    cpu, cuda = LocalPaths("cpu"), LocalPaths("cuda")
    templates = (
        cpu.templates if cpu.templates.is_dir() or not cuda.templates.is_dir() else cuda.templates
    )
    values = {
        **cpu.placeholders(),
        "llama_templates": str(templates),
        "llama_server_cuda": str(cuda.binary),
        "candidate_dir": str(loaded.directory),
        **({"port": str(port)} if port is not None else {}),
    }
    out = []
    for i, a in enumerate(args):
        unknown = [m for m in _PLACEHOLDER.findall(a) if m not in values]
        if unknown == ["port"]:
            raise BadInput(
                f"{loaded.path} launches on {{port}} but does not connect to it",
                [f"{field_path}[{i}]: {{port}} needs server.base_url to name {{port}} too"],
            )
        if unknown:
            raise BadInput(
                f"{loaded.path} has an unknown placeholder",
                [f"{field_path}[{i}]: {{{unknown[0]}}} is not one of {sorted(values)} (got {a!r})"],
            )
        out.append(_PLACEHOLDER.sub(lambda m: values[m.group(1)], a))
    return out


def gpu_flags(runtime: str, gpus: str | None) -> list[str]:
    """The runtime's own way to hand the container GPUs: docker's `--gpus` (NVIDIA Container
    Toolkit), podman's CDI devices (`nvidia.com/gpu=<index|all>`)."""
    if not gpus:
        return []
    if runtime == "docker":
        return ["--gpus", gpus if gpus == "all" else f'"device={gpus}"']
    return [a for g in gpus.split(",") for a in ("--device", f"nvidia.com/gpu={g.strip()}")]


def container_command(
    c: ContainerLaunch, loaded: LoadedCandidate, name: str, port: int | None = None
) -> list[str]:
    """`<runtime> run` in the foreground (its output is the server's log), named, by digest,
    never removed on exit (a failed start keeps its container); placeholders filled."""

    def fill(args: list[str], where: str) -> list[str]:
        return expand(args, loaded, where, port)

    cmd = [c.runtime, "run", "--name", name, "--network", c.network]
    cmd += gpu_flags(c.runtime, c.gpus)
    if c.ipc:
        cmd += ["--ipc", c.ipc]
    if c.shm_size:
        cmd += ["--shm-size", c.shm_size]
    if c.entrypoint is not None:
        cmd += ["--entrypoint", c.entrypoint]
    for p in fill(c.ports, "server.container.ports"):
        cmd += ["-p", p]
    for v in fill(c.volumes, "server.container.volumes"):
        cmd += ["-v", volume(v, loaded)]
    for k, v in c.env.items():
        cmd += ["-e", f"{k}={v}"]
    cmd += fill(c.extra_run_args, "server.container.extra_run_args")
    return [*cmd, c.image, *fill(c.args, "server.container.args")]


@dataclass(eq=False)
class ServerProcess:
    """One launch of the candidate's (or the control's) server."""

    loaded: LoadedCandidate
    attempt: Attempt
    lane: str = "candidate"
    proc: subprocess.Popen[bytes] | None = None
    container_id: str | None = None
    _threads: list[threading.Thread] = field(default_factory=list)
    _sinks: list[ChunkedWriter] = field(default_factory=list)
    started_at: float | None = None
    port: int | None = None

    def __post_init__(self) -> None:
        if self.picks_port(self.loaded):
            self.port = free_port()

    @staticmethod
    def picks_port(loaded: LoadedCandidate) -> bool:
        """True when the base URL names `{port}`: the port is picked at each launch."""
        return PORT in loaded.candidate.server.base_url

    @property
    def server(self) -> Server:
        return self.loaded.candidate.server

    @property
    def base_url(self) -> str:
        url = self.server.base_url
        return url.replace(PORT, str(self.port)) if self.port is not None else url

    def bind_failed(self) -> bool:
        """True when the server's logs say its port was already taken."""
        return any(
            _BIND_FAILED.search((self.attempt.path / name).read_bytes())
            for sink in self._sinks
            for name in sink.files
            if (self.attempt.path / name).is_file()
        )

    def container_name(self) -> str:
        """The name the container runs under: the run, the lane and the server attempt."""
        raw = f"qualify-{self.attempt.path.parent.parent.name}-{self.lane}-{self.attempt.number}"
        return re.sub(r"[^a-zA-Z0-9_.-]", "-", raw)

    def command(self) -> list[str]:
        s = self.server
        if s.launch is not None:
            return expand(s.launch.command, self.loaded, "server.launch.command", self.port)
        assert s.container is not None
        return container_command(s.container, self.loaded, self.container_name(), self.port)

    def start(self) -> None:
        cmd = self.command()
        launch = {"lane": self.lane, "command": cmd, "base_url": self.base_url, "port": self.port}
        c = self.server.container
        if c is not None:
            launch["container"] = self.container_name()
        self.attempt.write_json("launch.json", launch)
        out, err = self.attempt.stream("stdout"), self.attempt.stream("stderr")
        self._sinks = [out, err]
        if c is not None and shutil.which(c.runtime) is None:
            raise StartFailed(
                f"container runtime {c.runtime!r} is not installed here (not on PATH); "
                "server.container.runtime names it (docker or podman)"
            )
        if c is not None and (twice := doubled_entrypoint(c, image_entrypoint(c.runtime, c.image))):
            raise StartFailed(twice)
        s = self.server
        try:
            self.proc = subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **(s.launch.env if s.launch else {})},
                cwd=s.launch.cwd if s.launch and s.launch.cwd else None,
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        except OSError as exc:
            raise StartFailed(
                f"could not launch {cmd[0]}: {exc}; logs in {self.attempt.path}"
            ) from None
        self.started_at = time.monotonic()
        if c is not None:
            self.container_id = self.container_name()
        _LIVE.add(self)
        lock = threading.Lock()
        for stream, sink in ((self.proc.stdout, out), (self.proc.stderr, err)):
            assert stream is not None
            t = threading.Thread(target=_pump, args=(stream, sink, lock), daemon=True)
            t.start()
            self._threads.append(t)

    def alive(self) -> bool:
        """True while the server runs (a container's attached `run` exits with the container)."""
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n: int = 5) -> tuple[list[str], str | None]:
        """The last `n` non-blank lines the server wrote (stderr, else stdout), and that log's
        path relative to the run."""
        for sink in reversed(self._sinks):
            for name in reversed(sink.files):
                path = self.attempt.path / name
                text = path.read_text(errors="replace") if path.is_file() else ""
                lines = [ln.strip()[:300] for ln in text.splitlines() if ln.strip()]
                if lines:
                    run = self.attempt.path.parent.parent
                    return lines[-n:], path.relative_to(run).as_posix()
        return [], None

    def death(self, during: str) -> str:
        """What happened to a server that exited: the signal by name, the last lines of its
        log quoted, the log named. The part before the first `;` is the cause in words."""
        code = self.proc.returncode if self.proc else None
        for t in self._threads:
            t.join(timeout=2)
        how = signal_name(code)
        verb = "crashed" if code is not None and code < 0 else "exited"
        lines, log = self.log_tail()
        said = " | ".join(f"«{ln}»" for ln in lines)
        return (
            f"the {self.lane} server {verb} {during} ({how})"
            + (f"; last log lines: {said}" if said else "; it wrote no log")
            + f"; log: {log or self.attempt.path}"
        )

    async def wait_healthy(self) -> float:
        """Poll the health path until 200; raise StartFailed at the timeout or if it dies."""
        s = self.server
        deadline = time.monotonic() + s.startup_timeout_s
        url = self.base_url.rstrip("/") + s.health_path
        last = "no answer yet"
        async with httpx.AsyncClient(timeout=5.0) as http:
            while time.monotonic() < deadline:
                if not self.alive():
                    raise StartFailed(
                        self.death("during start-up") + f"; its logs are in {self.attempt.path}"
                    )
                try:
                    r = await http.get(url)
                    if r.status_code == 200:
                        t0 = self.started_at or time.monotonic()
                        return time.monotonic() - t0
                    last = f"HTTP {r.status_code}"
                except httpx.HTTPError as exc:
                    last = type(exc).__name__
                await asyncio.sleep(0.25)
        where = f"; container {self.container_id} kept" if self.container_id else ""
        raise StartFailed(
            f"{self.lane} server not healthy at {url} after {s.startup_timeout_s:.0f} s "
            f"(last: {last}); logs in {self.attempt.path}{where}"
        )

    def stop(self, keep_container: bool = False) -> int | None:
        """SIGTERM, then SIGKILL after the grace period; returns the exit code."""
        grace = self.server.stop_grace_s
        c = self.server.container
        if c is not None and self.container_id is not None:
            # The runtime stops the container (its attached `run` then exits); kept after a
            # failed start, so its state can be looked at.
            stop = [c.runtime, "stop", "-t", str(int(grace)), self.container_id]
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                subprocess.run(stop, capture_output=True, timeout=grace + 30)
                if not keep_container:
                    rm = [c.runtime, "rm", "-f", self.container_id]
                    subprocess.run(rm, capture_output=True, timeout=60)
        if self.proc is not None and self.proc.poll() is None:
            stop_group(self.proc, grace)
        for t in self._threads:
            t.join(timeout=5)
        if self.proc is not None:
            for pipe in filter(None, (self.proc.stdout, self.proc.stderr)):
                pipe.close()
        for sink in self._sinks:
            sink.close()
        _LIVE.discard(self)
        return None if self.proc is None else self.proc.returncode


def stop_all() -> None:
    for s in list(_LIVE):
        with contextlib.suppress(Exception):
            s.stop()


atexit.register(stop_all)
