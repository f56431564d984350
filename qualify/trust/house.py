"""The house policy: the organisation's bar, kept with the alias table, never in a candidate.

`house-policy.toml` at the root of the repository that owns production holds the required and
critical gate patterns, the reasoning levels that must be covered, the thresholds
(`qualify.gates.thresholds.Thresholds`), who may approve waivers and for how long, and the
digests of earlier house policies that decisions may still have been made under. A candidate's
`[policy]` may only tighten it; `effective()` merges the two and refuses a loosening (exit 2)
naming the field. The effective policy (`PolicyRules`) is what gates judge against, what the
decision signs, and what `qualify verify` re-derives the verdict under.

`python -m qualify.trust.house [PATH]` writes the JSON Schema of the file.
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError

from qualify.candidate_settings import Policy
from qualify.errors import BadInput, format_validation_error
from qualify.evidence.signing import canonical, sha256_bytes
from qualify.gates.thresholds import Thresholds
from qualify.records import StrictModel
from qualify.registry import critical_patterns, required_patterns

POLICY_FILE = "house-policy.toml"
SCHEMA_FILE = Path("gates/schemas/house-policy.schema.json")
Digest = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]

# For each threshold: which direction is stricter. Lists are subsets, tables are per key.
_HIGHER_IS_STRICTER = {
    "vram_reserve_gib",
    "acceptance_floor",
    "lossless_min_share",
    "spec_min_speedup_pct",
    "slo_percentile",
    "goodput_floor",
    "soak_duration_s",
    "soak_min_requests",
    "soak_min_third_requests",
    "soak_min_third_drafts",
    "context_min_acceptance_ratio",
}
_LOWER_IS_STRICTER = {
    "vram_max_gap_fraction",
    "ab_max_regression_pct",
    "fidelity_decode_tolerance",
    "client_max_lag_ms",
    "client_max_clock_uncertainty_ms",
    "soak_stall_s",
    "soak_max_ttft_drift_pct",
    "soak_min_ttft_drift_s",
    "soak_max_memory_growth_mib",
    "soak_max_acceptance_drop_pct",
}
# None: no bound, the loosest
_OPTIONAL_LOWER_IS_STRICTER = {"capacity_max_ttft_p95_s", "slo_ttft_s", "slo_tpot_s", "slo_e2e_s"}
_OPTIONAL_HIGHER_IS_STRICTER = {"capacity_min_goodput_rps"}
_BY_KEY = {"unverifiable_pins", "fidelity_ttft_ms"}
_OPTIONAL = _OPTIONAL_LOWER_IS_STRICTER | _OPTIONAL_HIGHER_IS_STRICTER


class WaiverRules(StrictModel):
    """Who may waive an inconclusive gate, and for how long a waiver may run."""

    approvers: list[str] = Field(
        default_factory=lambda: ["*"],
        description="names (fnmatch) of pinned waiver keys whose waivers count",
    )
    max_days: Annotated[int, Field(ge=0)] = Field(
        14, description="longest a waiver may run from its grant to its expiry (0: no waivers)"
    )


class PolicyRules(StrictModel):
    """The rules a decision is made under: the house's, tightened by the candidate."""

    required: list[str] = Field(
        default_factory=required_patterns,
        description="gate key patterns (stage/gate@level, fnmatch) that must pass",
    )
    critical: list[str] = Field(
        default_factory=critical_patterns,
        description="gate key patterns whose failure vetoes on its own (also required)",
    )
    levels: list[str] = Field(
        default_factory=list,
        description="reasoning levels every levelled required stage must have gates at",
    )
    thresholds: Thresholds = Field(default_factory=Thresholds)
    waivers: WaiverRules = Field(default_factory=WaiverRules)
    check_codes: dict[str, list[Digest]] | None = Field(
        None,
        description="per stage (preflight, quality, capacity), the digests of the check code "
        "(`qualify check-code`) whose records verify may take as recorded where this "
        "installation's checks send other requests; a record of any other code is refused. "
        "None, or a stage left out: any code's, each named in verify's notes",
    )

    @property
    def sha256(self) -> str:
        return sha256_bytes(canonical(self.model_dump(mode="json")))

    def lines(self) -> list[str]:
        """The policy in a few lines, for the decision document."""
        t = self.thresholds
        pins = ", ".join(t.unverifiable_pins) or "none"
        ttft = ", ".join(f"{k} {v:g} ms" for k, v in sorted(t.fidelity_ttft_ms.items()))
        return [
            f"required: {', '.join(self.required) or 'none'}; "
            f"critical: {', '.join(self.critical) or 'none'}",
            f"reasoning levels covered: {', '.join(self.levels) or 'any'}",
            f"VRAM reserve {t.vram_reserve_gib:g} GiB (telemetry gaps up to "
            f"{t.vram_max_gap_fraction:.0%}); acceptance floor {t.acceptance_floor:.0%}",
            f"A/B: at most {t.ab_max_regression_pct:g}% slower than the control; speculative "
            f"decoding at least {t.spec_min_speedup_pct:+g}% decode speed-up",
            f"fidelity: decode within {t.fidelity_decode_tolerance:.0%}, TTFT gap {ttft}; "
            f"pins that may stay unverified: {pins}",
            f"waivers: approvers {', '.join(self.waivers.approvers) or 'none'}, "
            f"at most {self.waivers.max_days} days",
        ] + (
            [
                "check code accepted for records of other code: "
                + "; ".join(f"{k} {len(v)}" for k, v in sorted(self.check_codes.items()))
            ]
            if self.check_codes is not None
            else []
        )


class AliasRules(StrictModel):
    """What an alias change asks of a decision besides its verdict."""

    max_decision_age_days: Annotated[int, Field(ge=0)] = Field(
        7,
        description="an alias moves only on a decision younger than this many days (its "
        "waivers must also still hold at that moment)",
    )


class HousePolicy(PolicyRules):
    """`house-policy.toml`: the rules, the earlier policies still accepted, and what an alias
    change asks of a decision (not part of the rules a decision is made under)."""

    version: Literal[1] = 1
    accept: list[Digest] = Field(
        default_factory=list,
        description="sha256 of earlier house rules (PolicyRules) that alias changes still accept",
    )
    aliases: AliasRules = Field(default_factory=AliasRules)

    def rules(self) -> PolicyRules:
        return PolicyRules.model_validate(self.model_dump(exclude={"version", "accept", "aliases"}))


def parse(text: str, where: str) -> HousePolicy:
    """A house policy from TOML text; one line per problem, each naming the file and field."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{where} is not valid TOML", [f"{where}: {exc}"]) from None
    try:
        return HousePolicy.model_validate(raw)
    except ValidationError as exc:
        problems = [f"{where}: {line}" for line in format_validation_error(exc)]
        raise BadInput(f"{where} is not a valid house policy", problems) from None


def load(path: Path) -> HousePolicy:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path} cannot be read", [f"{path}: {exc}"]) from None
    return parse(text, str(path))


def _threshold_problems(house: Thresholds, mine: Thresholds, written: set[str]) -> list[str]:
    out = []
    for name in sorted(written):
        have, want = getattr(house, name), getattr(mine, name)
        field = f"policy.thresholds.{name}"
        if name in _HIGHER_IS_STRICTER and want < have:
            out.append(f"{field}: {want} is below the house's {have} (only raising it tightens)")
        elif name in _LOWER_IS_STRICTER and want > have:
            out.append(f"{field}: {want} is above the house's {have} (only lowering it tightens)")
        elif name in _OPTIONAL_LOWER_IS_STRICTER:
            if have is not None and (want is None or want > have):
                out.append(f"{field}: {want} is looser than the house's {have} (only lowering it)")
        elif name in _OPTIONAL_HIGHER_IS_STRICTER:
            if have is not None and (want is None or want < have):
                out.append(f"{field}: {want} is looser than the house's {have} (only raising it)")
        elif name == "unverifiable_pins":
            out += [
                f"{field}: {p!r} is not among the house's unverifiable pins"
                for p in want
                if p not in have
            ]
        elif name == "fidelity_ttft_ms":
            for k, v in want.items():
                if k not in have:
                    out.append(f"{field}.{k}: the house sets no bound for {k!r} to lower")
                elif v > have[k]:
                    out.append(f"{field}.{k}: {v} ms is above the house's {have[k]} ms")
        elif name not in _HIGHER_IS_STRICTER | _LOWER_IS_STRICTER | _BY_KEY | _OPTIONAL:
            out.append(f"{field}: qualify does not know which way tightens it; set it in the house")
    return out


def effective(house: HousePolicy, mine: Policy, where: str = "the candidate") -> PolicyRules:
    """The house rules tightened by a candidate's `[policy]`; a loosening is exit 2."""
    problems = [  # a candidate may only add to the house's lists
        f"policy.{name}: drops house {word} {p!r} (a candidate may only add to the house list)"
        for name, have, want, word in (
            ("required", house.required, mine.required, "pattern"),
            ("critical", house.critical, mine.critical, "pattern"),
            ("levels", house.levels, mine.levels, "level"),
        )
        for p in have
        if want is not None and p not in want
    ]
    written = Thresholds.model_validate(mine.thresholds or {})
    t_written = set(written.model_fields_set)
    thresholds = written
    if "vram_reserve_gib" in mine.model_fields_set:
        if "vram_reserve_gib" in t_written and thresholds.vram_reserve_gib != mine.vram_reserve_gib:
            problems.append(
                "policy.vram_reserve_gib: differs from policy.thresholds.vram_reserve_gib "
                "(write it once)"
            )
        thresholds = thresholds.model_copy(update={"vram_reserve_gib": mine.vram_reserve_gib})
        t_written.add("vram_reserve_gib")
        if mine.vram_reserve_gib < house.thresholds.vram_reserve_gib:
            t_written.discard("vram_reserve_gib")
            problems.append(
                f"policy.vram_reserve_gib: {mine.vram_reserve_gib} is below the house's "
                f"{house.thresholds.vram_reserve_gib} (only raising it tightens)"
            )
    problems += _threshold_problems(house.thresholds, thresholds, t_written)
    if problems:
        raise BadInput(f"{where} loosens the house policy", problems)
    merged = house.thresholds.model_dump()
    for name in t_written:
        value = getattr(thresholds, name)
        merged[name] = {**merged[name], **value} if name == "fidelity_ttft_ms" else value
    return PolicyRules(
        required=list(dict.fromkeys(house.required + (mine.required or []))),
        critical=list(dict.fromkeys(house.critical + (mine.critical or []))),
        levels=list(dict.fromkeys(house.levels + (mine.levels or []))),
        thresholds=Thresholds.model_validate(merged),
        waivers=house.waivers,
        check_codes=house.check_codes,
    )


def render_schema() -> str:
    return json.dumps(HousePolicy.model_json_schema(), indent=2, sort_keys=True) + "\n"


def default_text() -> str:
    """The house policy a new house starts with: its `required` and `critical` patterns are the
    stages' specs' (`qualify.registry.required_patterns`)."""
    required, critical = json.dumps(required_patterns()), json.dumps(critical_patterns())
    return f"""\
# The house policy: the bar every candidate must meet before a production alias may move.
# It lives with the alias table; candidates may tighten it, never loosen it.
# Schema: gates/schemas/house-policy.schema.json. Change it with a commit like any other.
version = 1
required = {required}
critical = {critical}
levels = []
# Digests of earlier effective policies that alias changes still accept.
accept = []

[thresholds]
vram_reserve_gib = 3.0
vram_max_gap_fraction = 0.05
acceptance_floor = 0.3
ab_max_regression_pct = 3.0
spec_min_speedup_pct = 0.0
lossless_min_share = 1.0
fidelity_decode_tolerance = 0.03
fidelity_ttft_ms = {{ "*" = 15.0 }}
unverifiable_pins = []

[waivers]
approvers = ["*"]
max_days = 14

[aliases]
# An alias moves only on a decision younger than this, with its waivers still valid then.
max_decision_age_days = 7
"""


def main(argv: list[str]) -> int:
    if argv:
        Path(argv[0]).write_text(render_schema())
    else:
        sys.stdout.write(render_schema())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
