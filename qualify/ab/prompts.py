"""The A/B prompt file: real task prompts of several kinds, checked before anything is sent."""

from __future__ import annotations

import itertools
import re
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import Field, ValidationError

from qualify.candidate import format_validation_error
from qualify.errors import BadInput
from qualify.records import StrictModel

_WORD = re.compile(r"\w+", re.UNICODE)
# A word said this many times in a row is repetition, not a task: it collapses drafters.
_MAX_RUN = 3


class ABPrompt(StrictModel):
    id: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$")]
    kind: Annotated[str, Field(min_length=1)]
    text: Annotated[str, Field(min_length=1)]


class PromptSet(StrictModel):
    schema_version: Literal[1] = 1
    warmup: Annotated[str, Field(min_length=1)]
    prompts: list[ABPrompt] = Field(min_length=1)


def shipped_path() -> Path:
    return Path(str(resources.files("qualify") / "data" / "prompts" / "ab.yaml"))


def repetition_problems(ps: PromptSet) -> list[str]:
    """One line per prompt that repeats a word or a line: real text only."""
    out = []
    for i, p in enumerate(ps.prompts):
        words = [w.lower() for w in _WORD.findall(p.text)]
        runs = [(len(list(same)), w) for w, same in itertools.groupby(words)]
        longest, worst = max(runs, key=lambda r: r[0], default=(0, ""))
        if longest >= _MAX_RUN:
            out.append(
                f"prompts[{i}].text: {worst!r} is repeated {longest} times in a row "
                "(expected real text: repetition collapses drafters and fakes a gain)"
            )
        lines = [ln.strip() for ln in p.text.splitlines() if len(ln.strip()) > 8]
        if any(lines.count(ln) >= _MAX_RUN for ln in lines):
            out.append(
                f"prompts[{i}].text: a line is repeated {_MAX_RUN}+ times (expected real text)"
            )
    ids = [p.id for p in ps.prompts]
    if dupes := sorted({x for x in ids if ids.count(x) > 1}):
        out.append(f"prompts: ids {dupes} appear more than once (expected unique ids)")
    return out


def load_prompts(path: Path) -> PromptSet:
    """Read and check a prompt file; BadInput naming the file and field otherwise."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BadInput(
            f"{path} cannot be read", [f"stages.ab.prompts: {exc.strerror or exc}"]
        ) from None
    except yaml.YAMLError as exc:
        raise BadInput(f"{path} is not valid YAML", [str(exc)]) from None
    try:
        ps = PromptSet.model_validate(raw)
    except ValidationError as exc:
        raise BadInput(f"{path} is not a valid prompt file", format_validation_error(exc)) from None
    if problems := repetition_problems(ps):
        raise BadInput(f"{path} is not a valid prompt file", problems)
    return ps
