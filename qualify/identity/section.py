"""The identity stage in the decision document: each pin as pinned, as the server reports it,
and its gate's verdict. A pure function of the stage's record and its gates."""

from __future__ import annotations

from qualify.identity.record import Record
from qualify.present.record import GateOutcome
from qualify.present.sections import show, shown

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
"""Every pin (`qualify.candidate.Identity`'s fields), as the table labels it."""


def section(record: Record | None, gates: list[GateOutcome]) -> dict[str, list[dict[str, str]]]:
    """What the template's identity table shows."""
    if record is None:
        return {"identity": []}
    verdicts = {g.gate.removeprefix("pin@"): shown(g) for g in gates if g.stage == "identity"}
    rows = []
    for name, label in PIN_LABELS.items():
        pinned = getattr(record.pins, name)
        rows.append(
            {
                "label": label,
                "pinned": "not pinned" if pinned is None else show(pinned) or "none",
                "reported": show(record.reported.get(name)),
                "verdict": verdicts.get(name, "not checked"),
            }
        )
    return {"identity": rows}
