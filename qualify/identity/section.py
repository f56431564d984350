"""The identity stage in the decision document: each pin as pinned, as the server reports it,
and its gate's verdict. A pure function of the stage's record (`data`) and its gates."""

from __future__ import annotations

from typing import Any

from qualify.decision.record import GateOutcome
from qualify.decision.sections import as_dict as _dict
from qualify.decision.sections import show, shown


def section(data: dict[str, Any], gates: list[GateOutcome]) -> dict[str, Any]:
    """What the template's identity table shows."""
    return {"identity": identity_rows(data, gates)}


PIN_LABELS = {
    "model": "Model",
    "revision": "Model revision",
    "engine": "Engine",
    "engine_build": "Engine build",
    "image_digest": "Image",
    "quantization": "Quantization",
    "kv_dtype": "KV cache",
    "parallelism": "Parallelism",
    "context_length": "Context length",
    "max_num_seqs": "Max concurrent sequences",
    "speculation": "Speculation",
}


def identity_rows(data: dict[str, Any], gates: list[GateOutcome]) -> list[dict[str, str]]:
    pins, reported = _dict(data.get("pins")), _dict(data.get("reported"))
    verdicts = {g.gate.removeprefix("pin@"): shown(g) for g in gates if g.stage == "identity"}
    rows = []
    for name, label in PIN_LABELS.items():
        if name not in pins:
            continue
        rows.append(
            {
                "label": label,
                "pinned": "not pinned" if pins[name] is None else show(pins[name]) or "none",
                "reported": show(reported.get(name)),
                "verdict": verdicts.get(name, "not checked"),
            }
        )
    return rows
