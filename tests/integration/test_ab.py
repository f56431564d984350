"""The paired A/B against the real local llama-server: ngram-mod candidate, no-spec control."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from qualify.ab.prompts import shipped_path
from qualify.verdict import Verdict

pytestmark = pytest.mark.integration

# Six kinds; the refactor prompt makes the model copy its input, which ngram-mod drafts.
KINDS = ("refactor", "quote", "code", "explain-error", "translate", "table")


def _lean(cand: Path) -> None:
    shipped = yaml.safe_load(shipped_path().read_text())
    by_kind = {p["kind"]: p for p in shipped["prompts"]}
    subset = {**shipped, "prompts": [by_kind[k] for k in KINDS]}
    (cand.parent / "prompts.yaml").write_text(yaml.safe_dump(subset, sort_keys=False))


LEAN = {
    "runs = 3\nmax_tokens = 128": 'runs = 2\nmax_tokens = 96\nwarmups = 1\nprompts = "prompts.yaml"'
}


@pytest.fixture(scope="module")
def ab_result(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One lean A/B (2 runs per lane, 6 prompts, 96 tokens), shared by the tests below."""
    from tests.conftest import StageRunner, write_candidate
    from qualify.evidence import EvidenceStore
    from qualify.pipeline import plan
    from qualify.server import stop_all

    d = tmp_path_factory.mktemp("ab")
    cand = write_candidate(d / "cand", 18300, stages=["ab"], replace=LEAN)
    _lean(cand)
    p = plan(cand)
    run = EvidenceStore(d / "evidence").new_run(p.loaded.candidate.name)
    (run.path / "run.json").write_text("{}")
    try:
        yield StageRunner(p, run).stage("ab"), run
    finally:
        stop_all()
