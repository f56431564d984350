"""The load figures of repeated runs, with their spread: the knee (the highest rate whose goodput
held the house's floor), goodput there, the burst, the soak, and J per output token.

    python bench/load_figures.py EVIDENCE_DIR [EVIDENCE_DIR ...] [--json OUT.json]

Each EVIDENCE_DIR holds runs (`<run>/capacity/attempt-NNN/result.json`, the last attempt of each
run is read). Prints one Markdown table row per run and a summary row: median [min-max].

A run whose capacity record holds no load figures (the stage stopped before writing them) is
measured again from the exchanges its attempt kept, with the stage's own functions
(`stream_record`, `slo.goodput`, the house's SLOs from the run's `run.json`): each open-loop step's
planned size comes from the candidate's `[stages.capacity.load]`, and a planned request with no
kept exchange (never sent: the step stopped early) counts as missing the SLOs, as in the stage.
The window of a step and the power meter readings are not kept raw, so those rows give the share,
not the rate, and no J per token.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from pathlib import Path
from typing import Any


def _last_result(run: Path) -> dict[str, Any] | None:
    attempts = sorted((run / "capacity").glob("attempt-*/result.json"))
    return json.loads(attempts[-1].read_text()) if attempts else None


_STEP = re.compile(r"^\d{4}-load-poisson-([0-9.]+)rps-s(\d+)\.json$")
_BURST = re.compile(r"^\d{4}-load-burst-(\d+)-s(\d+)\.json$")
_SOAK = re.compile(r"^\d{4}-soak-s(\d+)\.json$")


def _house_slo(run: Path) -> dict[str, Any]:
    from qualify.capacity.settings import CapacitySettings
    from qualify.capacity.slo import effective
    from qualify.gates.thresholds import Thresholds

    info = json.loads((run / "run.json").read_text())
    rules = (info.get("house") or {}).get("rules") or info.get("thresholds") or {}
    known = {k: v for k, v in rules.items() if k in Thresholds.model_fields}
    cand = _candidate(run)
    mine = CapacitySettings.model_validate(cand["stages"]["capacity"]).slo
    return effective(Thresholds(**known), mine)


def _candidate(run: Path) -> dict[str, Any]:
    import tomllib

    copies = sorted((run / "run").glob("attempt-*/candidate.toml"))
    return tomllib.loads(copies[-1].read_text())


def rebuilt(run: Path) -> dict[str, Any]:
    """The load part measured again from the kept exchanges of the last capacity attempt."""
    from qualify.capacity.runs import stream_record
    from qualify.capacity.settings import CapacitySettings
    from qualify.capacity.slo import goodput
    from qualify.evidence.kept import exchange_of

    attempt = sorted((run / "capacity").glob("attempt-*"))[-1]
    settings = CapacitySettings.model_validate(_candidate(run)["stages"]["capacity"])
    ld, slo = settings.load, _house_slo(run)
    groups: dict[tuple[str, float], list[Path]] = {}
    for f in sorted(attempt.glob("*.json")):
        if m := _STEP.match(f.name):
            groups.setdefault(("poisson", float(m.group(1))), []).append(f)
        elif m := _BURST.match(f.name):
            groups.setdefault(("burst", float(m.group(1))), []).append(f)
        elif _SOAK.match(f.name):
            groups.setdefault(("soak", 0.0), []).append(f)

    def measured(files: list[Path], planned: int) -> dict[str, Any]:
        streams = [
            stream_record(
                exchange_of(json.loads(f.read_text()), f.name),
                [f.name],
                ld.kind,
                settings.max_tokens,
            )
            for f in files
        ]
        streams += [{"unfinished": "never sent"}] * max(0, planned - len(streams))
        g = goodput(streams, slo, None)
        return {**(g.model_dump() if hasattr(g, "model_dump") else g), "kept": len(files)}

    cells = []
    for (arrival, x), files in groups.items():
        if arrival == "poisson":
            planned = min(max(ld.min_requests, math.ceil(x * ld.step_s)), ld.max_requests_per_step)
            cells.append({"arrival": arrival, "rate_rps": x, **measured(files, planned)})
        elif arrival == "burst":
            cells.append({"arrival": arrival, "rate_rps": None, **measured(files, int(x))})
        else:
            cells.append({"arrival": arrival, "rate_rps": None, **measured(files, len(files))})
    floor = float(getattr(slo, "goodput_floor", None) or slo["goodput_floor"])
    steps = sorted((c for c in cells if c["arrival"] == "poisson"), key=lambda c: c["rate_rps"])
    held = [c for c in steps if c["goodput"] is not None and c["goodput"] >= floor]
    over = [c for c in steps if c not in held]
    good = held[-1] if held else None
    soak = next((c for c in cells if c["arrival"] == "soak"), None)
    return {
        "rebuilt": True,
        "cells": [c for c in cells if c["arrival"] != "soak"],
        "soak": soak and {"goodput": soak["goodput"], "status": f"{soak['requests']} requests"},
        "knee": {
            "rate_rps": good and good["rate_rps"],
            "goodput": good and good["goodput"],
            "goodput_ci95": good and good["goodput_ci95"],
            "goodput_rps": None,
            "first_over": over[0]["rate_rps"] if over else None,
            "lower_bound": good is not None and not over,
            "stopped": "rebuilt from the kept exchanges",
            "statement": good
            and f"held goodput {good['goodput']:.0%} (floor {floor:.0%}) at {good['rate_rps']:g} "
            f"req/s; first rate below the floor {over[0]['rate_rps'] if over else 'none'}",
        },
    }


def figures(run: Path) -> dict[str, Any] | None:
    """One run's load figures from its capacity record (None when it has none)."""
    res = _last_result(run)
    if res is None:
        return None
    data = res.get("data") or {}
    load = data.get("load") or (rebuilt(run) if not data else {})
    knee = load.get("knee") or {}
    cells = [c for c in load.get("cells") or [] if c.get("arrival") != "burst"]
    burst = next((c for c in load.get("cells") or [] if c.get("arrival") == "burst"), {})
    soak = load.get("soak") or {}
    at_knee = next((c for c in cells if c.get("rate_rps") == knee.get("rate_rps")), {})
    matrix = data.get("matrix") or []
    j_matrix = [
        r.get("j_per_output_token")
        for r in matrix
        if isinstance(r.get("j_per_output_token"), int | float)
    ]
    energy = at_knee.get("energy") or {}
    over = next((c for c in cells if c.get("rate_rps") == knee.get("first_over")), {})
    lags = [_lag_p99(c) for c in [*cells, soak] if isinstance(c.get("lag"), dict)]
    gates = {g.get("gate"): g.get("verdict") for g in res.get("gates") or []}
    drift = soak.get("ttft_drift") or {}
    return {
        "run": run.name,
        "verdict": res.get("verdict"),
        "rebuilt": bool(load.get("rebuilt")),
        "knee_rps": knee.get("rate_rps"),
        "lower_bound": knee.get("lower_bound"),
        "first_over_rps": knee.get("first_over"),
        "goodput": knee.get("goodput"),
        "goodput_ci95": knee.get("goodput_ci95"),
        "goodput_rps": knee.get("goodput_rps"),
        "stopped": knee.get("stopped"),
        "statement": knee.get("statement"),
        "rates_tried": [c.get("rate_rps") for c in cells],
        "burst_goodput": burst.get("goodput"),
        "pace_at_knee": at_knee.get("pace"),
        "pace_first_over": over.get("pace"),
        "completed_rps_at_knee": at_knee.get("achieved_rps"),
        "p95_ttft_s_at_knee": (at_knee.get("at_percentile") or {}).get("ttft_s"),
        "soak_verdict": gates.get("soak") or soak.get("verdict") or soak.get("status"),
        "soak_rate_rps": soak.get("rate_rps"),
        "soak_goodput": soak.get("goodput"),
        "soak_ttft_drift_pct": drift.get("drift_pct"),
        "soak_j_per_token": (soak.get("energy") or {}).get("j_per_output_token"),
        "j_per_token_knee": energy.get("j_per_output_token"),
        "mean_power_w_knee": energy.get("mean_power_w"),
        "j_per_token_matrix": j_matrix,
        "client_lag_p99_ms": max((x for x in lags if isinstance(x, int | float)), default=None),
    }


def _lag_p99(cell: dict[str, Any]) -> Any:
    """A cell's p99 send lag in ms (the recorded key changed name once)."""
    lag = cell["lag"]
    return lag.get("send_lag_ms_p99", lag.get("p99_ms"))


def _spread(values: list[Any]) -> str:
    xs = [float(v) for v in values if isinstance(v, int | float)]
    if not xs:
        return "not measured"
    if len(xs) == 1:
        return f"{xs[0]:.3g} (1 run)"
    return f"{statistics.median(xs):.3g} [{min(xs):.3g}-{max(xs):.3g}] ({len(xs)} runs)"


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| run | knee req/s | goodput at knee | goodput req/s | first rate over | burst goodput | "
        "soak | J/token at knee | J/token (matrix) |\n|---|---|---|---|---|---|---|---|---|"
    )
    out = [head]
    for r in rows:
        jm = ", ".join(f"{j:.3g}" for j in r["j_per_token_matrix"]) or "-"
        out.append(
            f"| {r['run']}{' (rebuilt)' if r['rebuilt'] else ''} | "
            f"{r['knee_rps']}{'+' if r['lower_bound'] else ''} | {r['goodput']} "
            f"{r['goodput_ci95']} | {r['goodput_rps']} | {r['first_over_rps']} | "
            f"{r['burst_goodput']} | {r['soak_verdict']} | {r['j_per_token_knee']} | {jm} |"
        )
    out.append(
        f"| **median [min-max]** | {_spread([r['knee_rps'] for r in rows])} | "
        f"{_spread([r['goodput'] for r in rows])} | {_spread([r['goodput_rps'] for r in rows])} | "
        f"| {_spread([r['burst_goodput'] for r in rows])} | | "
        f"{_spread([r['j_per_token_knee'] for r in rows])} | "
        f"{_spread([j for r in rows for j in r['j_per_token_matrix']])} |"
    )
    return "\n".join(out)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("evidence", nargs="+", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    rows = [
        f
        for ev in args.evidence
        for run in sorted(p for p in ev.iterdir() if p.is_dir())
        if (f := figures(run)) is not None
    ]
    if not rows:
        print("no capacity result found", file=sys.stderr)
        return 2
    print(table(rows))
    for key in (
        "pace_at_knee",
        "completed_rps_at_knee",
        "p95_ttft_s_at_knee",
        "soak_goodput",
        "soak_ttft_drift_pct",
        "soak_j_per_token",
        "mean_power_w_knee",
        "client_lag_p99_ms",
    ):
        print(f"- {key}: {_spread([r[key] for r in rows])}")
    print(f"- soak gate: {', '.join(str(r['soak_verdict']) for r in rows)}")
    for r in rows:
        print(f"- {r['run']}: {r['statement']} (stopped: {r['stopped']}; rates {r['rates_tried']})")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
