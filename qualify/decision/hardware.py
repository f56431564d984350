"""Where the run ran and under what: the hardware (GPU, driver, CUDA, CPU, engine build) from
the vram and identity records, the server's command as launched, the candidate's provenance and
the effective policy."""

from __future__ import annotations

import json

from qualify.evidence.store import RunDir
from qualify.identity.record import Record as IdentityRecord
from qualify.present import sections
from qualify.present.reading import RunView, record_of
from qualify.present.record import DecisionRecord
from qualify.present.sections import as_dict, as_list
from qualify.present.wording import number
from qualify.trust.house import PolicyRules
from qualify.vram.record import Record as VramRecord


def context(view: RunView, record: DecisionRecord) -> dict[str, object]:
    """The document's `hardware` (GPU, driver and CUDA as the vram record holds them; CPU from
    run.json, else the record; the engine and its build as identity pinned and saw them), the
    launch command, the provenance (`prov`) and the effective policy in a few lines."""
    run, info, records = view.run, view.info, view.records()
    vram = record_of(records, "vram", VramRecord)
    hw = vram.hardware if vram is not None else None
    cpus = (info.get("cpu"), hw.cpu_model if hw is not None else None)
    cpu = next((v for v in cpus if v not in (None, "", [], {})), None)
    if isinstance(cpu, dict):
        cores = cpu.get("cores")
        cpu = str(cpu.get("model") or "model not recorded") + (f", {cores} cores" if cores else "")
    plat = info.get("platform")
    identity = record_of(records, "identity", IdentityRecord)
    engine = "engine not recorded build not recorded"
    if identity is not None:  # the build as the server reports it, else as pinned
        pins, reported = identity.pins, identity.reported.get("engine_build")
        build = reported or (
            f"{pins.engine_build} (pinned, not reported)" if pins.engine_build else None
        )
        engine = f"{pins.engine or 'engine not recorded'} build {build or 'not recorded'}"
    git, h = as_dict(info.get("git")), record.house
    source = f"`{h.root}` at commit {(h.commit or 'none')[:12]}" if h.root else "built-in defaults"
    return {
        "hardware": [
            f"GPU: {_gpu(vram)}",
            f"CPU: {cpu or 'not recorded in this run'}" + (f"; platform {plat}" if plat else ""),
            f"Engine: {engine}",
        ],
        "launch": _launch(run, identity),
        "prov": {
            "tool": as_dict(info.get("tool")),
            "candidate_path": info.get("candidate_path") or record.candidate_path or "not recorded",
            "candidate_sha256": info.get("candidate_sha256")
            or record.candidate_sha256
            or "unknown",
            "control_path": info.get("control_path"),
            "control_sha256": info.get("control_sha256"),
            "tool_version": info.get("tool_version") or "unknown",
            "git_commit": git.get("commit") or "none recorded",
            "git_dirty": git.get("dirty"),
            "repository": git.get("repository") or "not in a git repository",
        },
        "policy": {
            "source": source,
            "house_sha256": h.policy_sha256,
            "tightened": h.policy_sha256 != record.policy_sha256,
            "lines": PolicyRules.model_validate(record.policy).lines(),
        },
    }


def _gpu(vram: VramRecord | None) -> str:
    """The cards, their memory, and the driver and CUDA versions the telemetry recorded."""
    if vram is None or not vram.cards:
        return "no GPU telemetry"
    cards, hw = vram.cards, vram.hardware
    names = list(dict.fromkeys(c.name or "unnamed" for c in cards))
    found = {
        "driver": (hw.driver_version or None) if hw is not None else None,
        "CUDA": (hw.cuda_driver_version or None) if hw is not None else None,
        "interconnect": None,  # no telemetry source of this build records it
    }
    totals = {c.total_mib for c in cards}
    total = next(iter(totals)) if len(totals) == 1 else None
    gpu = f"{len(cards)} x {', '.join(names)}" + (
        f" ({number(total, 0)} MiB each)" if total is not None else ""
    )
    known = [f"{k} {sections.show(v)}" for k, v in found.items() if v is not None]
    unknown = [k for k, v in found.items() if v is None]
    if known:
        gpu += "; " + ", ".join(known)
    if unknown:
        gpu += f"; {', '.join(unknown)} not in this run's telemetry"
    return gpu + f" (telemetry: {vram.source or 'unknown'})"


def _launch(run: RunDir, identity: IdentityRecord | None) -> dict[str, str | None]:
    """The candidate server's command as launched, and the file that records it."""
    if identity is not None and identity.launch is not None and identity.launch.args:
        return {"command": " ".join(identity.launch.args), "file": None}
    for d in reversed(run.attempt_dirs("server-candidate")):
        f = d / "launch.json"
        try:
            cmd = as_list(as_dict(json.loads(f.read_text())).get("command"))
        except (OSError, ValueError):
            continue
        if cmd:
            return {
                "command": " ".join(str(a) for a in cmd),
                "file": f.relative_to(run.path).as_posix(),
            }
    return {"command": None, "file": None}
