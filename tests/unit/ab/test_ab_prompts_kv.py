"""The shipped A/B prompts, the prompt-file checks, and KV figures read from startup logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from qualify.ab.kv import from_log
from qualify.ab.prompts import load_prompts, shipped_path
from qualify.errors import BadInput


def test_shipped_prompts_are_real_tasks_of_six_kinds() -> None:
    """The shipped file holds real task prompts of at least six kinds, none repetitive."""
    ps = load_prompts(shipped_path())
    assert len({p.kind for p in ps.prompts}) >= 6
    assert len({p.text for p in ps.prompts}) == len(ps.prompts)


def test_repeated_words_are_refused(tmp_path: Path) -> None:
    """A prompt that repeats a word is refused, naming the field and the word."""
    f = tmp_path / "p.yaml"
    f.write_text(
        "schema_version: 1\nwarmup: hi\nprompts:\n"
        "  - {id: rep, kind: filler, text: 'please repeat repeat repeat repeat this'}\n"
    )
    with pytest.raises(BadInput) as err:
        load_prompts(f)
    assert any("prompts[0].text" in p and "'repeat'" in p for p in err.value.problems)


def test_bad_prompt_file_names_the_field(tmp_path: Path) -> None:
    """An unknown key or missing field is reported with its path."""
    f = tmp_path / "p.yaml"
    f.write_text("schema_version: 1\nwarmup: hi\nprompts:\n  - {id: a, kind: k, txt: x}\n")
    with pytest.raises(BadInput) as err:
        load_prompts(f)
    joined = "\n".join(err.value.problems)
    assert "prompts.0.text: Field required" in joined and "prompts.0.txt" in joined


def test_llamacpp_log_figures() -> None:
    """llama.cpp: slots, per-slot context and the KV buffers (summed) from its startup log."""
    log = (
        "load_model: initializing, n_slots = 1, n_ctx_slot = 8192, kv_unified = 'false'\n"
        "llama_kv_cache:        CPU KV buffer size =    90.00 MiB\n"
        "llama_kv_cache:      CUDA0 KV buffer size =    10.50 MiB\n"
    )
    assert from_log(log, "llama.cpp") == {"n_slots": 1, "n_ctx_slot": 8192, "kv_buffer_mib": 100.5}


def test_vllm_and_sglang_log_figures() -> None:
    """vLLM's and SGLang's KV pool sizes in tokens come from their startup lines."""
    vllm = "INFO [kv_cache_utils.py:1087] GPU KV cache size: 138,459 tokens\n"
    assert from_log(vllm, "vllm") == {"kv_tokens": 138459}
    sgl = "KV Cache is allocated. #tokens: 257515, K size: 3.10 GB, V size: 3.10 GB\n"
    sgl += "max_total_num_tokens=257515, chunked_prefill_size=8192\n"
    assert from_log(sgl, "sglang") == {"kv_tokens": 257515, "k_size_gb": 3.1, "v_size_gb": 3.1}


def test_validate_names_a_missing_level_and_bad_prompt_file(tmp_path: Path) -> None:
    """`qualify validate` checks the A/B's reasoning level and prompt file, sending nothing."""
    from ab_fakes import make_candidate

    from qualify.ab.stage import check_ab

    good, _ = make_candidate(tmp_path / "ok")
    assert check_ab(good) == []
    bad, _ = make_candidate(tmp_path / "bad", extra='level = "loud"\n')
    (tmp_path / "bad" / "prompts.yaml").write_text("schema_version: 1\nprompts: []\n")
    problems = check_ab(bad)
    assert any(p.startswith("stages.ab.level: 'loud'") and "'think'" in p for p in problems)
    assert any(p.startswith("stages.ab.prompts:") and "warmup" in p for p in problems)
