"""The context ladder's gates, read from its rows: needles, cold-cache and idle."""

from __future__ import annotations

from typing import Any

from qualify.httpclient.timing import median
from qualify.records import GateResult, Verdict, one_shot, worst

STAGE = "context"


def cold_cache_limit(prompt_tokens: int | None) -> int:
    """Most cached tokens a cold request may report: the role header before the nonce, or one
    cache block of a block-based engine, never a real share of the prompt."""
    return max(32, (prompt_tokens or 0) // 100)


def _gate(name: str, verdict: Verdict, reasons: list[str], metrics: dict[str, Any]) -> GateResult:
    return one_shot(STAGE, name, verdict, reasons, metrics)


def _where(row: dict[str, Any]) -> str:
    return f"{row['pass']} {row['content']} c={row['concurrency']}"


def needles_gate(target: int, errors: list[str], rows: list[dict[str, Any]]) -> GateResult:
    """Pass when every stream at this rung named both needles; a miss fails; a broken cell or
    rung is an error."""
    reasons = list(errors)
    verdicts = [Verdict.ERROR] if errors else []
    for row in rows:
        verdicts.append(Verdict(row["verdict"]))
        reasons.extend(f"{_where(row)}: {why}" for why in row["reasons"])
    streams = [s for row in rows for s in row.get("streams", [])]
    found = {d: sum(1 for s in streams if s["needles"][d]) for d in ("50", "99")}
    if not verdicts:
        verdicts, reasons = [Verdict.INCONCLUSIVE], ["no cell ran at this rung"]
    metrics = {"streams": len(streams), "found_50": found["50"], "found_99": found["99"]}
    return _gate(f"needles@{target}", worst(verdicts), reasons, metrics)


def _cached(row: dict[str, Any], stream: dict[str, Any]) -> int | None:
    if isinstance(stream.get("cached_tokens"), int):
        return int(stream["cached_tokens"])
    delta = row.get("cached_tokens_metric_delta")
    n = row.get("concurrency") or 1
    return None if delta is None else round(delta / n)


def cold_cache_gate(target: int, errors: list[str], rows: list[dict[str, Any]]) -> GateResult:
    """Pass when every cold stream reports (almost) no cached prompt tokens."""
    cold = [r for r in rows if r["pass"] == "cold"]
    warm = [r for r in rows if r["pass"] == "warm"]
    verdicts: list[Verdict] = [Verdict.ERROR] if errors else []
    reasons = list(errors)
    seen: list[list[int | None]] = []
    for row in cold:
        if not row.get("streams"):
            verdicts.append(Verdict.ERROR)
            reasons.append(f"{_where(row)}: not run ({'; '.join(row['reasons'])})")
        for s in row.get("streams", []):
            cached, prompt = _cached(row, s), s["actual_prompt_tokens"]
            seen.append([cached, prompt])
            if s["problem"]:
                verdicts.append(Verdict.ERROR)
                reasons.append(f"{_where(row)}: {s['problem']}")
            elif cached is None:
                verdicts.append(Verdict.INCONCLUSIVE)
                reasons.append(f"{_where(row)}: the server reports no cached-token count")
            elif cached > cold_cache_limit(prompt):
                verdicts.append(Verdict.FAIL)
                reasons.append(
                    f"{_where(row)}: cached {cached} of {prompt} prompt tokens "
                    f"(expected at most {cold_cache_limit(prompt)}): the prefix cache flattered it"
                )
            else:
                verdicts.append(Verdict.PASS)
    if not verdicts:
        verdicts, reasons = [Verdict.INCONCLUSIVE], ["no cold cell ran at this rung"]
    metrics = {
        "cold_cached_prompt": seen,
        "warm_cached_prompt": [
            [_cached(r, s), s["actual_prompt_tokens"]] for r in warm for s in r.get("streams", [])
        ],
        "cold_metric_delta": [r.get("cached_tokens_metric_delta") for r in cold],
        "warm_metric_delta": [r.get("cached_tokens_metric_delta") for r in warm],
    }
    return _gate(f"cold-cache@{target}", worst(verdicts), reasons, metrics)


def idle_gate(rows: list[dict[str, Any]]) -> GateResult:
    """Pass when the engine was idle before and after every timed cell."""
    verdicts: list[Verdict] = []
    reasons: list[str] = []
    waited = [0.0]
    for row in rows:
        for when, rep in (row.get("idle") or {}).items():
            waited.append(rep["waited_s"])
            where = f"{row['target']} {_where(row)} ({when})"
            if rep["idle"] is True:
                verdicts.append(Verdict.PASS)
            elif rep["idle"] is None:
                verdicts.append(Verdict.INCONCLUSIVE)
                reasons.append(f"{where}: {rep['reason']}")
            else:
                verdicts.append(Verdict.ERROR)
                reasons.append(f"{where}: {rep['reason']}; the cell is not counted")
    if not verdicts:
        verdicts, reasons = [Verdict.INCONCLUSIVE], ["no timed cell ran"]
    metrics = {"checks": len(verdicts), "max_waited_s": max(waited)}
    return _gate("idle", worst(verdicts), reasons, metrics)


def gates(errors: dict[int, list[str]], rows: list[dict[str, Any]]) -> list[GateResult]:
    out: list[GateResult] = []
    for target, errs in errors.items():
        mine = [r for r in rows if r["target"] == target]
        out.append(needles_gate(target, errs, mine))
        out.append(cold_cache_gate(target, errs, mine))
    out.append(idle_gate(rows))
    return out


def fidelity(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The server's own timings against the client's, over every counted stream."""
    ratios: list[float] = []
    gaps: list[float] = []
    for row in rows:
        if row["verdict"] == "error":
            continue
        for s in row.get("streams", []):
            srv = s["server"]
            if isinstance(srv["decode_ratio"], float):
                ratios.append(srv["decode_ratio"])
            if isinstance(srv["ttft_minus_server_prompt_ms"], float):
                gaps.append(srv["ttft_minus_server_prompt_ms"])
    return {
        "n": max(len(ratios), len(gaps)),
        "decode_ratio_median": median(ratios),
        "ttft_minus_server_prompt_ms_median": median(gaps),
    }
