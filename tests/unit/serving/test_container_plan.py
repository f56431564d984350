"""`qualify run --plan` on the seed's vLLM recipe: every stage's requests, none sent."""

from __future__ import annotations

import io
import re
from pathlib import Path

from qualify.cli import main
from qualify.pipeline import plan
from qualify.plan import print_plan, summary

ROOT = Path(__file__).resolve().parents[3]
SEED = ROOT / "examples" / "deepseek-v4-flash-0731" / "candidate.toml"


def test_seed_plan_lists_each_stage_and_sends_nothing(tmp_path: Path) -> None:
    p = plan(SEED)  # the seed recipe validates (its API key variable need not be set)
    out = io.StringIO()
    total = print_plan(p.loaded, p.control, p.stages, out)
    text = out.getvalue()
    for stage in ("identity", "preflight", "context", "ab", "vram"):
        assert f"[{stage}]" in text
    assert "GET /v1/models" in text and "POST /tokenize" in text and "GET /metrics" in text
    assert "(control)" in text and "docker run --name" in text and "--gpus all" in text
    assert "depends on the server's answers" in text  # context sizes with /tokenize first
    numbered = [ln for ln in text.splitlines() if re.match(r"^\s+\d+\. (GET|POST) /", ln)]
    assert total == len(numbered) > 0


def test_cli_plan_writes_no_evidence(tmp_path: Path, capsys: object) -> None:
    ev = tmp_path / "evidence"
    assert main(["run", "--plan", str(SEED), "--evidence", str(ev)]) == 0
    assert not ev.exists() or not any(ev.iterdir())


def test_body_summary() -> None:
    body = {
        "model": "m",
        "max_tokens": 8,
        "messages": [{"role": "system", "content": "abc"}, {"role": "user", "content": "hello"}],
        "tools": [{"type": "function", "function": {"name": "get_weather"}}],
        "seed": 1,
    }
    assert summary(body) == (
        "model=m max_tokens=8 messages=2 [system 3, user 5 chars] tools=[get_weather] also seed"
    )
    assert summary(None) == ""


def test_every_example_candidate_plans(tmp_path: Path) -> None:
    """The plan of every shipped example, capacity's load among them: a stage that sizes its
    prompts with the server stops short saying so, never with a traceback."""
    for cand in sorted((ROOT / "examples").glob("*/*.toml")):
        if "[server" not in cand.read_text() or "control" in cand.name:
            continue
        out = io.StringIO()
        p = plan(cand)
        assert print_plan(p.loaded, p.control, p.stages, out) >= 0, cand
        assert "none sent" in out.getvalue() or "listed" in out.getvalue(), cand
