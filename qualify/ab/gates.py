"""The A/B's gates: `acceptance` (measured from counters) and `paired` (a fair comparison)."""

from __future__ import annotations

from typing import Any

from qualify.ab.settings import ABSettings
from qualify.records import AttemptRecord, GateResult, Verdict, worst
from qualify.serving.engines import dialect

__all__ = ["acceptance_gate", "drafts", "paired_gate"]

LANES = ("candidate", "control")


def drafts(block: dict[str, Any]) -> bool:
    """Whether a lane's recipe uses speculative decoding."""
    return str((block.get("speculation") or {}).get("method", "none")).lower() not in ("none", "")


def _gate(name: str, found: list[tuple[Verdict, str]], metrics: dict[str, Any]) -> GateResult:
    v = worst([f[0] for f in found]) if found else Verdict.PASS
    why = [f[1] for f in found if f[0] is not Verdict.PASS]
    return GateResult(
        gate=name,
        stage="ab",
        verdict=v,
        reasons=why,
        attempts=[AttemptRecord(number=1, verdict=v, reasons=why)],
        metrics=metrics,
    )


def _counter_names(engine: str) -> str:
    d = dialect(engine)
    names = [d.spec_draft_tokens, d.spec_accepted, d.spec_drafts, *d.spec_gauges]
    return ", ".join(n for n in names if n)


def _lane_acceptance(lane: str, block: dict[str, Any], s: ABSettings) -> tuple[Verdict, str]:
    acc = block.get("acceptance")
    missing = [r["run"] for r in block["runs"] if r.get("acceptance") is None]
    if acc is None:
        return Verdict.INCONCLUSIVE, (
            f"{lane}: no speculative-decoding counters on /metrics (looked for "
            f"{_counter_names(block['engine'])}); acceptance is unknown, not assumed"
        )
    if acc.get("drafts") is None:
        return Verdict.INCONCLUSIVE, (
            f"{lane}: only {acc['source']} (rate {acc.get('rate')}, mean length "
            f"{acc.get('mean_length')}): not a count over the timed runs"
        )
    if missing:
        return Verdict.INCONCLUSIVE, f"{lane}: no counters for runs {missing}"
    if acc["draft_tokens"] == 0:
        return Verdict.INCONCLUSIVE, (
            f"{lane}: the server drafted no tokens in {len(block['runs'])} runs "
            "(Δ draft tokens = 0): there is no acceptance to measure"
        )
    low = s.min_acceptance_rate
    if low is not None and acc["rate"] is not None and acc["rate"] < low:
        return Verdict.FAIL, (
            f"{lane}: acceptance rate {acc['rate']:.3f} is below stages.ab.min_acceptance_rate "
            f"{low} ({acc['accepted']} of {acc['draft_tokens']} draft tokens)"
        )
    return Verdict.PASS, ""


def acceptance_gate(lanes: dict[str, dict[str, Any]], s: ABSettings) -> GateResult:
    """Pass when every speculative lane's acceptance was counted over its timed runs."""
    spec = [lane for lane in LANES if drafts(lanes[lane])]
    if not spec:
        return GateResult(
            gate="acceptance",
            stage="ab",
            verdict=Verdict.SKIPPED,
            reasons=["neither lane uses speculative decoding (identity.speculation.method)"],
        )
    found = [_lane_acceptance(lane, lanes[lane], s) for lane in spec]
    metrics = {lane: lanes[lane].get("acceptance") for lane in spec}
    return _gate("acceptance", found, metrics)


def _run_problems(lane: str, r: dict[str, Any]) -> list[tuple[Verdict, str]]:
    out: list[tuple[Verdict, str]] = []
    where = f"{lane} run {r['run']}"
    if r["failed"]:
        first = r["failed"][0]
        out.append(
            (
                Verdict.ERROR,
                f"{where}: {len(r['failed'])} request(s) failed "
                f"({first['prompt']}: {first['why']})",
            )
        )
    if r["counted"] == 0:
        out.append((Verdict.INCONCLUSIVE, f"{where}: no request could be counted"))
    for when in ("idle_before", "idle_after"):
        st = r[when]
        if st["idle"] is None:
            out.append(
                (
                    Verdict.INCONCLUSIVE,
                    f"{where}: {when} could not be checked (no running/waiting metrics)",
                )
            )
        elif not st["idle"]:
            out.append(
                (
                    Verdict.INCONCLUSIVE,
                    f"{where}: engine busy ({when}: running={st['running']}, waiting="
                    f"{st['waiting']} after {st['waited_s']:.1f} s)",
                )
            )
    return out


def paired_gate(lanes: dict[str, dict[str, Any]], runs: int) -> GateResult:
    """Pass when both lanes ran every run, idle, on byte-identical requests, and only the
    speculative lane drafted."""
    found: list[tuple[Verdict, str]] = []
    for lane in LANES:
        done = lanes[lane]["runs"]
        if len(done) != runs:
            found.append((Verdict.FAIL, f"{lane}: {len(done)} of {runs} runs ran"))
        for r in done:
            found.extend(_run_problems(lane, r))
        acc = lanes[lane].get("acceptance") or {}
        if not drafts(lanes[lane]) and (acc.get("draft_tokens") or 0) > 0:
            found.append(
                (
                    Verdict.FAIL,
                    f"{lane}: drafted {acc['draft_tokens']} tokens though its recipe has no "
                    "speculative decoding: the paired variable did not hold",
                )
            )
    cand, ctrl = lanes["candidate"]["runs"], lanes["control"]["runs"]
    for a, b in zip(cand, ctrl, strict=False):
        if a["request_digest"] != b["request_digest"]:
            found.append((Verdict.FAIL, f"run {a['run']}: the lanes were sent different requests"))
    counted = sum(r["counted"] for lane in LANES for r in lanes[lane]["runs"])
    return _gate("paired", found, {"runs": runs, "counted_requests": counted})
