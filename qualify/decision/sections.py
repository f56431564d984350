"""What the decision document's stage sections share: cells for pins and verdicts, energy per
token, defensive readers of the evidence, and fidelity, which spans the timed stages.

Each stage presents itself in `qualify/<stage>/section.py` (the registry's `StageSpec.section`),
from its typed record (None when the stage has none) and the decision's gates. A value the
evidence does not hold is None and is printed as "no data"; it is never replaced by zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from qualify.ab.record import Fidelity as LanesFidelity
from qualify.decision.record import GateOutcome
from qualify.httpclient.timing import FidelitySummary
from qualify.records import StageRecord, Verdict
from qualify.registry import stage_names


def as_dict(x: Any) -> dict[str, Any]:
    """`x` when it is a table, else an empty one (evidence read defensively)."""
    return x if isinstance(x, dict) else {}


def as_list(x: Any) -> list[Any]:
    """`x` when it is a list, else an empty one."""
    return x if isinstance(x, list) else []


def show(value: Any) -> str:
    """A pinned or reported value as one table cell (a model as its JSON form's fields)."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if value is None or value == []:
        return "not reported"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items() if v not in (None, False, 0, ""))
    if isinstance(value, list):
        return ", ".join(dict.fromkeys(str(v) for v in value))
    return str(value)


def shown(g: GateOutcome) -> str:
    """A gate's verdict as the document prints it: a waived gate reads as waived, never pass."""
    return f"waived ({g.verdict.value})" if g.status == "waived" else g.verdict.value


def fidelity(
    records: Mapping[str, StageRecord], gates: list[GateOutcome] | None = None
) -> list[dict[str, Any]]:
    """Per timed stage: how far the client's timings are from the server's own, the verdict of
    the stage's fidelity gates (both halves: decode and TTFT), and the chunk-counting error of
    the lane farthest from zero, sign kept."""
    out = []
    for stage in stage_names():  # the timed stages are the ones whose record has fidelity
        f = getattr(records.get(stage), "fidelity", None)
        if not isinstance(f, FidelitySummary) or not f.model_fields_set:
            continue
        lanes = f.lanes if isinstance(f, LanesFidelity) else {}
        chunk = {
            lane: e for lane, v in lanes.items() if (e := v.chunk_counting_error_pct) is not None
        }
        worst_lane = max(chunk, key=lambda k: abs(chunk[k]), default=None)
        gaps = {
            lane: g
            for lane, v in lanes.items()
            if (g := v.ttft_minus_server_prompt_ms_median) is not None
        }
        gap_lane = max(gaps, key=lambda k: gaps[k], default=None)
        out.append(
            {
                "stage": stage,
                "n": f.n if "n" in f.model_fields_set else None,
                "decode_ratio": f.decode_ratio_median,
                "ttft_gap_ms": gaps[gap_lane] if gap_lane else f.ttft_minus_server_prompt_ms_median,
                "ttft_lane": gap_lane,
                "chunk_error_pct": chunk[worst_lane] if worst_lane else None,
                "chunk_lane": worst_lane,
                "verdict": _fidelity_verdict(stage, gates or []),
            }
        )
    return out


def _fidelity_verdict(stage: str, gates: list[GateOutcome]) -> str:
    """The verdict of a stage's fidelity gates: pass, the ones that did not pass, or none."""
    mine = [g for g in gates if g.stage == stage and "fidelity" in g.gate]
    bad = [g for g in mine if g.verdict is not Verdict.PASS]
    if not mine:
        return "no gate"
    if bad:
        return ", ".join(f"`{g.key}` {g.verdict.value}" for g in bad)
    return "pass"


def per_token_text(
    j_per_token: float | None, joules: float | None, completion_tokens: float | None
) -> str:
    """J per output token (the one recorded, else joules over tokens), or "unmeasured" (the
    why is said once, under the table)."""
    j = j_per_token
    if j is None:
        j = joules / completion_tokens if joules is not None and completion_tokens else None
    return "unmeasured" if j is None else f"{j:.3g} J/tok"
