"""Blocking gates grouped by root cause, each cause tagged by what a reviewer does about it.

A decision can block on dozens of gates that come down to a handful of causes. `group()` puts
every blocking gate (and every missing required pattern, every integrity problem) into one
`Cause`: a family of gates that fail for one reason (tool calls and formats, long-context
needles, speed against the control, client/server timing, ...) and one tag:

- `differs`: differs from the control: the candidate fails where its control passes, or the
  A/B comparison against the control fails; the candidate's change caused it;
- `same`: same on the control: the control fails the same gate, so the base recipe or model
  is the cause, not the change;
- `limit`: engine or policy limit: the engine cannot report or meet what the policy asks
  (an unverifiable pin, a timing bound); no rerun clears it, the recipe or the policy changes;
- `harness`: harness error: the harness broke (an internal error, a broken pairing, evidence
  changed after sealing, a stage that aborted);
- `alone`: not compared: only the candidate ran the gate, so the evidence cannot say whether
  the change or the base is the cause;
- `base`: fails on the control only: the control's run of a gate fails where the candidate
  passes it; nothing the change broke, the base recipe fails it.

Each cause carries the action that clears it; the exit condition lists those actions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatch

from qualify.ab.record import Lane, LaneName
from qualify.capacity.firstscreen import soak_way
from qualify.present.record import DecisionRecord, GateOutcome
from qualify.registry import specs
from qualify.shown import speed_title

TAGS = {
    "differs": "differs from the control",
    "harness": "harness error",
    "alone": "not compared with the control",
    "same": "same on the control",
    "limit": "engine or policy limit",
    "base": "fails on the control only",
}
ORDER = tuple(TAGS)

_CONTROL = re.compile(r"^control-(?:preflight-)?")
# Of the speed gates of one cause, the strongest thing shown leads ("slower" before the rest).
_SPEED_TITLES = {speed_title(-2.0, -1.0): 0, speed_title(1.0, 2.0): 1, speed_title(None, None): 2}
_UNVERIFIABLE = ("cannot be verified", "unmeasurable", "not reported", "reports no ")


@dataclass
class Cause:
    family: str
    tag: str
    title: str
    action: str
    keys: list[str] = field(default_factory=list)
    gates: list[GateOutcome] = field(default_factory=list)

    @property
    def label(self) -> str:
        return TAGS[self.tag]


FAMILIES: dict[str, tuple[str, str, str]] = {
    # family: (tag, title, action); tag `control` is decided against the control lane
    "harness": ("harness", "the harness broke", "fix the harness error and rerun"),
    "identity": (
        "alone",
        "the server is not what the recipe pins",
        "serve what the recipe pins (or correct the pin `{pin}`)",
    ),
    "fitness": ("control", "the model cannot call tools or follow formats in budget", "by tag"),
    "unverifiable-pins": (
        "limit",
        "pins the engine cannot report",
        "unpin them, or have the house list them in `unverifiable_pins` before the run",
    ),
    "fidelity": (
        "limit",
        "client and server timings disagree beyond the policy bound",
        "find the client-side gap, or have the house set `fidelity_ttft_ms` for this engine "
        "before the run (a rerun alone does not clear it)",
    ),
    "over-length": (
        "control",
        "the engine accepts prompts longer than its window",
        "make the server refuse prompts over its window (or pin the window it enforces)",
    ),
    "reasoning-only": (
        "control",
        "the answer ends inside reasoning, with nothing visible to judge",
        "make the engine's reasoning parser find the end of reasoning, or give the level a "
        "reasoning budget its answers end within",
    ),
    "needles": (
        "alone",
        "the model misses needles in long prompts",
        "a model or a context pin at which the needles are found",
    ),
    "ruler": (
        "alone",
        "the model gets RULER-style retrieval tasks wrong in long prompts",
        "a model or a context pin at which the retrieval tasks are answered",
    ),
    "deep-tools": (
        "alone",
        "the model cannot call tools behind a long prompt",
        "serve a model and tool parser that call tools at the deepest rung",
    ),
    "garble": (
        "alone",
        "answers garble in long prompts",
        "a model or a context pin at which the answers stay clean",
    ),
    "ab-speed": (
        "differs",
        "the change is slower than the control",
        "make the change ({variable}) at least as fast as the control, or drop it",
    ),
    "drafting": (
        "differs",
        "the drafter does not behave as pinned",
        "tune the drafter (acceptance, draft length) so it meets the pins and the floor",
    ),
    "ab-paired": ("harness", "the A/B lanes were not paired", "rerun the A/B paired"),
    "vram-reserve": (
        "alone",
        "a card keeps less free memory than the reserve, or could not be shown to",
        "a recipe that leaves the reserve free on every card at every stage (or the house "
        "reviews the reserve before the run)",
    ),
    "capacity-range": (
        "alone",
        "capacity has no expected range to be judged against",
        "declare the expected capacity range in the candidate (stages.capacity)",
    ),
    "capacity-first": (
        "limit",
        "no incumbent to compare capacity with",
        "point the alias at an incumbent first, or have the house stop requiring "
        "`capacity/incumbent` of a first qualification",
    ),
    "capacity-incumbent": (
        "alone",
        "capacity is below the incumbent's",
        "match the incumbent's capacity",
    ),
    "degenerate": (
        "alone",
        "the model's answers degenerate (one word repeated), so no speed is counted from them",
        "a model, prompt kind or sampling at which the answers stay varied (their speed is "
        "not a figure)",
    ),
    "load-answers": (
        "alone",
        "answers break under load",
        "serve answers that stay valid under load (a cell whose answers break fails however "
        "fast it was)",
    ),
    "goodput": (
        "alone",
        "goodput under the house's SLOs stays below the floor",
        "a recipe that meets the SLOs at the rate the house requires",
    ),
    "soak": (
        "alone",
        "the engine stops making progress under steady load",
        "fix what stalls the engine under steady load, then soak it again",
    ),
    "soak-queue": (
        "alone",
        "latency climbs under steady load while every request completes: a queue builds, so "
        "the knee overstates what the server sustains",
        "find the rate the server sustains (longer knee steps, or the soak at a lower share of "
        "the knee), then soak at it",
    ),
    "soak-growth": (
        "alone",
        "memory or engine error counters grow under steady load",
        "find what grows under steady load (memory, engine errors), then soak it again",
    ),
    "trace-replay": (
        "alone",
        "a replayed trace's requests break, go unanswered or miss the SLOs",
        "serve the trace's traffic with valid answers within the SLOs at its own pace (the "
        "gate names each failing request)",
    ),
    "agent-sessions": (
        "alone",
        "multi-turn agent sessions go wrong: a tool not called, its result ignored or lost",
        "serve a model and tool parser that call the tool, use its result and keep it over "
        "the turns",
    ),
    "acceptance-drift": (
        "alone",
        "speculative acceptance falls over steady load",
        "find why draft acceptance falls over time under steady load, then soak it again",
    ),
    "acceptance-depth": (
        "alone",
        "speculative acceptance falls in long prompts",
        "a drafter that keeps its acceptance at depth, or a context pin below the rung where "
        "it falls",
    ),
    "fidelity-unmeasured": (
        "limit",
        "client and server timings not compared: the server reported nothing to compare",
        "serve with the metrics the stage compares against (docs/engines.md), or have the "
        "house stop requiring this fidelity gate before the run",
    ),
    # the missing required patterns (by why), and evidence that broke its manifest
    "unlisted": ("alone", "required stages not run", "list the stages in stages.run"),
    "aborted": ("harness", "required stages that did not finish", "rerun once the abort is fixed"),
    "unrecorded": (
        "harness",
        "required stages with no attempt in the evidence",
        "a fresh run that records every planned stage",
    ),
    "integrity": (
        "harness",
        "evidence changed after it was sealed",
        "restore the evidence to what its manifests seal",
    ),
    "load-harness": (
        "harness",
        "the load client fell behind its own schedule",
        "rerun where the client keeps to its send times (a harness error, not the server's)",
    ),
}
_FITNESS = {
    "same": "serve a model that calls tools and follows the formats within the budget "
    "(the control fails the same way: the base model, not the change)",
    "differs": "fix what the change breaks in tool calls and formats (the control passes them)",
    "alone": "serve a model that passes the tool and format gates",
    "base": "nothing the change broke: the control fails it and the candidate passes; "
    "fix the control's recipe so the lanes compare",
}


def _family(g: GateOutcome, by_key: dict[str, GateOutcome], variable: str) -> Cause:
    """The cause of one blocking gate: its family's, else one of its own. A gate is named
    without level and control prefix; a control's preflight gate is a preflight gate."""
    name, is_control, stage = g.gate.split("@", 1)[0], False, g.stage
    if g.stage == "quality" and name.startswith("control-"):
        stage = "preflight" if name.startswith("control-preflight-") else "quality"
        name, is_control = _CONTROL.sub("", name), True
    said = " ".join(g.reasons).lower()
    spec = specs().get(g.stage)  # the family the stage's spec gives the gate (`StageSpec.causes`)
    family = next((f for p, f in (spec.causes if spec else {}).items() if fnmatch(name, p)), None)
    if name == "measured" and "no counted run" in said and "degenerate" in said:
        family = "degenerate"  # nothing to time: the model's answers, not the harness
    elif "internal error" in said or (g.verdict.value == "error" and stage != "ab"):
        family = "harness"
    elif family == "identity" and any(w in said for w in _UNVERIFIABLE):
        family = "unverifiable-pins"
    elif family != "identity" and "fidelity" in name:
        family = "fidelity" if g.verdict.value == "fail" else "fidelity-unmeasured"
    elif family == "soak":
        family = {"queue": "soak-queue", "growth": "soak-growth"}.get(soak_way(g), "soak")
    elif family != "identity" and name == "over-length":
        family = "over-length"
    elif family == "fitness" and g.metrics.get("reasoning_only") is True:
        family = "reasoning-only"
    elif family == "capacity-incumbent" and g.verdict.value == "skipped":
        family = "capacity-first"
    if family is not None:
        tag, title, action = FAMILIES[family]
        if tag == "control":  # against the control's run of the gate at the same level (the
            # same inputs: only that compares the lanes): `same` or `differs`; `alone` when it
            # has none; `base` for the control's own gate the candidate passed (the base fails)
            level = f"@{g.level}" if g.level else ""
            prefix = {"preflight": "control-preflight-", "quality": "control-"}.get(stage)
            theirs = f"quality/{prefix}{name}{level}" if prefix else ""
            other = by_key.get(f"{stage}/{name}{level}" if is_control else theirs)
            tag = "alone" if other is None else "same" if other.status != "pass" else "differs"
            tag = "base" if is_control and tag == "differs" else tag
        if family == "fitness":  # its action is the tag's
            action = _FITNESS[tag]
        if family == "ab-speed":  # the 95% interval of the speed gain (per cent, + = faster)
            m = g.metrics
            ci = m.get("paired_ci95_pct") or [-float(v) for v in m.get("slowdown_ci95_pct") or []]
            ok = isinstance(ci, list) and len(ci) == 2
            title = speed_title(float(ci[0]), float(ci[1])) if ok else speed_title(None, None)
        action = action.replace("{variable}", variable)
        return Cause(family, tag, title, action.replace("{pin}", g.gate.removeprefix("pin@")))
    reason = re.sub(r"^attempt \d+/\d+: ", "", (g.reasons or ["no reason recorded"])[0])
    return Cause(
        g.key,
        "harness" if g.verdict.value == "error" else "alone",
        f"`{g.key}` {g.verdict.value}",
        f"`{g.key}` passes ({reason.split(';', 1)[0].strip()[:100]})",  # its first clause
    )


def variable_of(lanes: Mapping[LaneName, Lane]) -> str:
    """What the candidate changes against its control, in a few words: the speculation pins
    the candidate wrote that differ from the control's, else what the control names."""
    a: dict[str, object] = {}
    b: dict[str, object] = {}
    for pins, lane in ((a, lanes.get("candidate")), (b, lanes.get("control"))):
        if lane is not None:  # its speculation pins as written, by name
            sp = lane.speculation
            pins |= {k: getattr(sp, k) for k in type(sp).model_fields if k in sp.model_fields_set}
    changed = [f"{k}={a.get(k)}" for k in a if a.get(k) != b.get(k) and a.get(k) is not None]
    if changed:
        return "speculation " + ", ".join(changed)
    control = lanes.get("control")
    var = control.variable if control is not None else None
    return f"what its control names: {var}" if var else "what is not recorded"


def group(record: DecisionRecord, variable: str = "the change") -> list[Cause]:
    """Every blocking item of the decision, one cause per (family, tag), in tag order then by
    size; missing required patterns and integrity problems are causes too."""
    ev = record.evaluation
    by_key = {g.key: g for g in ev.gates}
    causes: dict[tuple[str, str], Cause] = {}
    for g in ev.gates:
        if g.status not in ("blocks", "vetoes"):
            continue
        c = _family(g, by_key, variable)
        have = causes.setdefault((c.family, c.tag), c)
        if c.family == "ab-speed":
            have.title = min(have.title, c.title, key=lambda t: _SPEED_TITLES.get(t, 3))
        have.keys.append(g.key)
        have.gates.append(g)
    missing = []  # (family, key) of each missing required pattern and integrity problem
    for pattern in ev.missing:
        why = next((r for r in ev.reasons if r.startswith(pattern)), pattern)
        family = "aborted" if "aborted" in why else "unrecorded"
        missing.append(("unlisted" if "not listed in stages.run" in why else family, pattern))
    missing += [("integrity", problem.split(":", 1)[0]) for problem in record.integrity]
    for family, key in missing:
        tag, title, action = FAMILIES[family]
        causes.setdefault((family, tag), Cause(family, tag, title, action)).keys.append(key)
    for c in causes.values():
        if c.family == "unlisted":
            stages = ", ".join(dict.fromkeys(k.split("/", 1)[0] for k in c.keys))
            c.action = f"list {stages} in stages.run"
        if c.family == "unverifiable-pins":
            pins = ", ".join(k.split("@", 1)[-1] for k in c.keys)
            c.action = (
                f"unpin {pins}, or have the house list {pins} in `unverifiable_pins` before "
                "the run (the engine cannot report it)"
            )
    return sorted(causes.values(), key=lambda c: (ORDER.index(c.tag), -len(c.keys)))
