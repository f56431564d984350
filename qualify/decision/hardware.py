"""Where the run ran and under what: the hardware (GPU, driver, CUDA, CPU, engine build), the
server's command as launched, the candidate's provenance and the effective policy."""

from __future__ import annotations

import json
from typing import Any

from qualify.decision import sections
from qualify.decision.house import PolicyRules
from qualify.decision.record import DecisionRecord
from qualify.decision.sections import as_dict, as_list
from qualify.decision.wording import number, run_relative
from qualify.evidence.store import RunDir


def first_of(*values: Any) -> Any:
    return next((v for v in values if v not in (None, "", [], {})), None)


def hardware(data: dict[str, dict[str, Any]], info: dict[str, Any], run: RunDir) -> list[str]:
    """GPU, driver, CUDA and interconnect as the telemetry recorded them; CPU from run.json."""
    vram = data.get("vram") or {}
    cards = [as_dict(c) for c in as_list(vram.get("cards"))]
    names = list(dict.fromkeys(str(c.get("name") or "unnamed") for c in cards))
    host, hw = as_dict(vram.get("host")), as_dict(vram.get("hardware"))
    tel = as_dict(next(iter(as_list(vram.get("telemetry"))), {}))
    found = {
        "driver": first_of(hw.get("driver_version"), host.get("driver"), tel.get("driver")),
        "CUDA": first_of(hw.get("cuda_driver_version"), host.get("cuda"), tel.get("cuda")),
        "interconnect": first_of(
            host.get("interconnect"), vram.get("interconnect"), tel.get("interconnect")
        ),
    }
    if cards:
        totals = {c.get("total_mib") for c in cards}
        total = next(iter(totals)) if len(totals) == 1 else None
        gpu = f"{len(cards)} x {', '.join(names)}" + (
            f" ({number(total, 0)} MiB each)" if isinstance(total, int | float) else ""
        )
        known = [f"{k} {sections.show(v)}" for k, v in found.items() if v is not None]
        unknown = [k for k, v in found.items() if v is None]
        if known:
            gpu += "; " + ", ".join(known)
        if unknown:
            gpu += f"; {', '.join(unknown)} not in this run's telemetry"
        gpu += f" (telemetry: {vram.get('source') or 'unknown'})"
    else:
        gpu = "no GPU telemetry"
    ident = data.get("identity") or {}
    pins, rep = as_dict(ident.get("pins")), as_dict(ident.get("reported"))
    build = rep.get("engine_build") or (
        f"{pins['engine_build']} (pinned, not reported)" if pins.get("engine_build") else None
    )
    engine = f"{pins.get('engine') or 'engine not recorded'} build {build or 'not recorded'}"
    cpu = first_of(host.get("cpu"), info.get("cpu"), hw.get("cpu_model"))
    if isinstance(cpu, dict):
        cores = cpu.get("cores")
        cpu = str(cpu.get("model") or "model not recorded") + (f", {cores} cores" if cores else "")
    plat = info.get("platform")
    return [
        f"GPU: {gpu}",
        f"CPU: {cpu or 'not recorded in this run'}" + (f"; platform {plat}" if plat else ""),
        f"Engine: {engine}",
    ]


def launch_command(run: RunDir, data: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The candidate server's command as launched, and the file that records it."""
    launch = as_dict(as_dict(data.get("identity")).get("launch"))
    args = as_list(launch.get("args"))
    if args:
        return {"command": " ".join(str(a) for a in args), "file": None}
    for d in reversed(run.attempt_dirs("server-candidate")):
        f = d / "launch.json"
        try:
            cmd = as_list(as_dict(json.loads(f.read_text())).get("command"))
        except (OSError, ValueError):
            continue
        if cmd:
            return {"command": " ".join(str(a) for a in cmd), "file": run_relative(run, f)}
    return {"command": None, "file": None}


def provenance(record: DecisionRecord, info: dict[str, Any]) -> dict[str, Any]:
    git = as_dict(info.get("git"))
    return {
        "candidate_path": info.get("candidate_path") or record.candidate_path or "not recorded",
        "candidate_sha256": info.get("candidate_sha256") or record.candidate_sha256 or "unknown",
        "control_path": info.get("control_path"),
        "control_sha256": info.get("control_sha256"),
        "tool_version": info.get("tool_version") or "unknown",
        "git_commit": git.get("commit") or "none recorded",
        "git_dirty": git.get("dirty"),
        "repository": git.get("repository") or "not in a git repository",
    }


def policy_lines(record: DecisionRecord) -> dict[str, Any]:
    """The effective policy in a few lines, and where the house policy came from."""
    rules = PolicyRules.model_validate(record.policy)
    h = record.house
    where = f"`{h.root}` at commit {(h.commit or 'none')[:12]}" if h.root else "built-in defaults"
    return {
        "source": where,
        "house_sha256": h.policy_sha256,
        "tightened": h.policy_sha256 != record.policy_sha256,
        "lines": rules.lines(),
    }
