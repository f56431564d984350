"""A launch command as text and as the container runtime will read it: the line to paste into
a shell (`shell_line`, quoted by `shlex.join`, so a JSON argument survives), volumes with
candidate-relative host paths made absolute, and whether an image's own entrypoint would run
the server command twice."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from qualify.candidate import ContainerLaunch, LoadedCandidate


def shell_line(cmd: list[str]) -> str:
    """The command as one shell line: each argument quoted where the shell would split or
    expand it (`'{"method":"ngram"}'`), so the printed line runs as launched."""
    return shlex.join(str(a) for a in cmd)


def volume(spec: str, loaded: LoadedCandidate) -> str:
    """A volume with a host path relative to the candidate file (./, ../) or the home (~) made
    absolute; an absolute path or a named volume (a bare name) is passed as written."""
    src, _, rest = spec.partition(":")
    if src.startswith(("./", "../")):
        src = str((loaded.directory / src).resolve())
    elif src.startswith("~"):
        src = os.path.expanduser(src)
    return f"{src}:{rest}"


def runtime_output(cmd: list[str]) -> tuple[str | None, str]:
    """stdout of a container runtime command, or None and the reason it gave nothing."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{' '.join(cmd[:3])}: {exc}"
    if r.returncode != 0:
        return None, f"{' '.join(cmd[:3])} exited {r.returncode}: {r.stderr.strip()[:200]}"
    return r.stdout.strip(), ""


def image_entrypoint(runtime: str, image: str) -> list[str] | None:
    """The image's entrypoint as the runtime reports it (`image inspect`), or None when the
    runtime cannot say (no runtime, image not pulled)."""
    fmt = "{{json .Config.Entrypoint}}"
    out = runtime_output([runtime, "image", "inspect", "--format", fmt, image])[0]
    if out is None:  # no runtime, no image
        return None
    try:
        value = json.loads(out or "null")
    except ValueError:
        return None
    return [str(v) for v in value] if isinstance(value, list) else []


def doubled_entrypoint(c: ContainerLaunch, entrypoint: list[str] | None) -> str | None:
    """Why the container would run its server command twice (`vllm serve vllm serve MODEL`):
    the image's entrypoint already ends with what `args` begin with; None when it would not or
    the entrypoint is unknown. A candidate's own `entrypoint` replaces the image's."""
    if c.entrypoint is not None or not entrypoint:
        return None
    tail = [os.path.basename(a) for a in entrypoint[-2:]]
    head = [os.path.basename(a) for a in c.args[: len(tail)]]
    if tail and head == tail:
        return (
            f"the image's entrypoint is {shell_line(entrypoint)!r} and server.container.args "
            f"begin with {shell_line(c.args[: len(tail)])!r}: the container would run "
            f"{shell_line([*entrypoint, *c.args[:3]])} …; drop them from args, or set "
            'server.container.entrypoint (e.g. "" to clear it)'
        )
    return None
