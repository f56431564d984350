"""What the decision document's stage sections share: cells for pins and verdicts, energy per
token, defensive readers of the evidence (fidelity, which spans the timed stages, is
`qualify.decision.headline.fidelity`).

Each stage presents itself in `qualify/<stage>/section.py` (the registry's `StageSpec.section`),
from its typed record (None when the stage has none) and the decision's gates. A value the
evidence does not hold is None and is printed as "no data"; it is never replaced by zero.
"""

from __future__ import annotations

from pydantic import BaseModel

from qualify.present.record import GateOutcome


def as_dict(x: object) -> dict[str, object]:  # raw evidence JSON
    """`x` when it is a table, else an empty one (evidence read defensively)."""
    return x if isinstance(x, dict) else {}


def as_list(x: object) -> list[object]:  # raw evidence JSON
    """`x` when it is a list, else an empty one."""
    return x if isinstance(x, list) else []


def show(value: object) -> str:
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


def per_token_text(
    j_per_token: float | None, joules: float | None, completion_tokens: float | None
) -> str:
    """J per output token (the one recorded, else joules over tokens), or "unmeasured" (the
    why is said once, under the table)."""
    j = j_per_token
    if j is None:
        j = joules / completion_tokens if joules is not None and completion_tokens else None
    return "unmeasured" if j is None else f"{j:.3g} J/tok"
