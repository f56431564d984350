"""Running model-written Python: a subprocess with a time limit, no network, one scratch dir.

Three layers, each of which alone stops the plain attempts:
- `unshare -rn` (when the kernel lets this user make namespaces) gives the process a network
  namespace of its own with only a downed loopback: no connection reaches anything;
- an audit hook, installed before any model code runs, refuses socket connects, binds and
  sends, opening a file for writing (and renaming, removing, making directories, changing modes)
  outside the scratch directory, starting processes, and loading native libraries with ctypes;
- resource limits: CPU seconds, address space, file size, open files, no core files.

The hook is a guard against code that goes wrong, not against code written to escape: an
answer under test is not an adversary. `isolation()` says which network layer was in force.
"""

from __future__ import annotations

import math
import os
import secrets
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

OUTPUT_LIMIT = 64 * 1024
MEMORY_LIMIT = 1 << 30
FILE_LIMIT = 16 << 20

# Runs in the sandboxed interpreter: limits, then the hook, then the script; the nonce is
# printed only when the script ran to its end, so model code cannot fake a finished run.
BOOT = r"""
import os, resource, sys
scratch, script, nonce = os.path.realpath(sys.argv[1]), sys.argv[2], sys.argv[3]
cpu, mem, fsize = (int(x) for x in sys.argv[4:7])
for what, value in ((resource.RLIMIT_CPU, cpu), (resource.RLIMIT_AS, mem),
                    (resource.RLIMIT_FSIZE, fsize), (resource.RLIMIT_NOFILE, 64),
                    (resource.RLIMIT_CORE, 0)):
    resource.setrlimit(what, (value, value))
WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
PATHS = {"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.symlink", "os.link",
         "os.truncate", "os.chmod", "os.chown", "os.utime", "shutil.rmtree", "shutil.move",
         "shutil.copyfile", "shutil.copytree", "os.chdir"}
NETWORK = {"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg",
           "socket.getaddrinfo", "socket.gethostbyname"}
SPAWN = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
         "os.forkpty", "os.kill", "os.killpg", "ctypes.dlopen", "ctypes.dlsym",
         "sys.addaudithook"}

def inside(p):
    if isinstance(p, int):
        return True
    real = os.path.realpath(os.path.join(scratch, os.fsdecode(p)))
    return real == scratch or real.startswith(scratch + os.sep) or real == os.devnull

def paths(args):
    return [a for a in args if isinstance(a, (str, bytes, os.PathLike))]

def hook(event, args):
    if event == "open":
        path, mode, flags = args
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & WRITE)
        if path is not None and writing and not inside(path):
            raise PermissionError(f"sandbox: no writing outside the scratch directory: {path}")
    elif event in PATHS:
        for p in paths(args):
            if not inside(p):
                raise PermissionError(f"sandbox: {event} outside the scratch directory: {p}")
    elif event in NETWORK:
        raise PermissionError(f"sandbox: no network ({event})")
    elif event in SPAWN:
        raise PermissionError(f"sandbox: {event} is not allowed")

sys.dont_write_bytecode = True
sys.path.insert(0, scratch)
os.chdir(scratch)
sys.addaudithook(hook)
import runpy
runpy.run_path(script, run_name="__main__")
sys.stdout.flush()
print(nonce)
"""


@dataclass
class RunResult:
    """What one sandboxed run did: exit code, output, whether it finished or was stopped."""

    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool
    finished: bool
    isolation: str

    def as_dict(self) -> dict[str, object]:
        tails = {"stdout": self.stdout[-4000:], "stderr": self.stderr[-4000:]}
        return {**asdict(self), **tails, "seconds": round(self.seconds, 3)}

    def why_not(self, limit_s: float) -> str | None:
        """Why the run does not count as passed; None when it finished cleanly."""
        if self.timed_out:
            return f"the code did not finish within its {limit_s:g} s time limit"
        if self.returncode != 0 or not self.finished:
            tail = (self.stderr.strip().splitlines() or ["no error output"])[-1]
            if self.returncode == 0:
                tail = "it stopped before the check's last line"
            return f"the check failed (exit code {self.returncode}): {tail[:300]}"
        return None


@cache
def isolation() -> str:
    """`unshare` when a private network namespace can be made here, else `audit-hook`."""
    try:
        done = subprocess.run(
            ["unshare", "-rn", "true"], capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return "audit-hook"
    return "unshare" if done.returncode == 0 else "audit-hook"


def _decode(data: bytes | None) -> str:
    return (data or b"")[:OUTPUT_LIMIT].decode("utf-8", "replace")


def run_python(script: Path, scratch: Path, limit_s: float) -> RunResult:
    """Run `script` (inside `scratch`) sandboxed; at most `limit_s` seconds of wall time."""
    nonce = secrets.token_hex(16)
    mode = isolation()
    argv = [sys.executable, "-I", "-c", BOOT, str(scratch), str(script), nonce]
    argv += [str(math.ceil(limit_s) + 1), str(MEMORY_LIMIT), str(FILE_LIMIT)]
    if mode == "unshare":
        argv = ["unshare", "-rn", *argv]
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": os.environ.get("HOME", "/")}
    t0 = time.monotonic()
    try:
        done = subprocess.run(
            argv,
            cwd=scratch,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=limit_s,
            check=False,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired as exc:
        took = time.monotonic() - t0
        return RunResult(None, _decode(exc.stdout), _decode(exc.stderr), took, True, False, mode)
    took = time.monotonic() - t0
    out = _decode(done.stdout)
    lines = out.rstrip("\n").splitlines()
    finished = bool(lines) and lines[-1] == nonce
    if finished:
        out = "\n".join(lines[:-1]) + ("\n" if len(lines) > 1 else "")
    return RunResult(done.returncode, out, _decode(done.stderr), took, False, finished, mode)
