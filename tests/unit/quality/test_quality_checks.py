"""Every quality task, proven both ways on recorded answers: a correct answer passes all three
attempts, and plausible wrong answers fail with a reason that says what was wrong."""

from __future__ import annotations

import pytest
from quality_fakes import call, chat, run, run_seen, task

from qualify.records import Verdict

GOOD_DIFF = '''```diff
--- a/pager.py
+++ b/pager.py
@@ -1,4 +1,4 @@
 def page(items, number, size):
     """Items on page `number` (1-based) of pages of `size` items."""
-    start = number * size
+    start = (number - 1) * size
     return items[start:start + size]
```'''


def only_reason(result: object) -> str:
    reasons = getattr(result, "reasons", [])
    assert reasons, result
    return str(reasons[0])


def test_all_three_attempts_must_pass_never_best_of() -> None:
    """Two right answers and one wrong one fail the task, naming the attempt."""
    good, bad = chat("b7421-spec"), chat("b7388-base")
    assert run("recall-build", good, good, good).verdict is Verdict.PASS
    result = run("recall-build", good, good, bad)
    assert result.verdict is Verdict.FAIL
    assert [a.verdict for a in result.attempts] == [Verdict.PASS, Verdict.PASS, Verdict.FAIL]
    assert result.reasons[0].startswith("attempt 3/3: recalled 'b7388-base'")


def test_diff_that_applies_and_fixes_passes() -> None:
    result = run("diff-pager", chat(GOOD_DIFF))
    assert result.verdict is Verdict.PASS, result.reasons
    assert result.attempts[0].metrics["run"]["finished"] is True


def test_diff_with_plain_paths_applies_too() -> None:
    plain = GOOD_DIFF.replace("a/pager.py", "pager.py").replace("b/pager.py", "pager.py")
    assert run("diff-pager", chat(plain)).verdict is Verdict.PASS


def test_diff_that_does_not_apply_fails() -> None:
    """A diff whose context is not in the file fails at `git apply --check`."""
    stale = GOOD_DIFF.replace("start = number * size", "start = number*size")
    result = run("diff-pager", chat(stale))
    assert result.verdict is Verdict.FAIL
    assert "the diff does not apply (git apply --check)" in only_reason(result)


def test_diff_that_applies_but_fails_the_test_fails() -> None:
    wrong = GOOD_DIFF.replace("(number - 1) * size", "number * size - 1")
    result = run("diff-pager", chat(wrong))
    assert result.verdict is Verdict.FAIL
    assert only_reason(result).startswith("attempt 1/3: the diff applies, but the check failed")


def test_prose_without_a_diff_fails() -> None:
    result = run("diff-pager", chat("Change number * size to (number - 1) * size."))
    assert "no unified diff in the answer" in only_reason(result)


GUARD = '''```python
import time


def wait_ready(probe, interval_s=0.1, timeout_s=5.0):
    """Poll `probe()` until it returns True, or give up after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not probe():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)
    return True
```'''


def test_timeout_guard_passes() -> None:
    result = run("timeout-guard", chat(GUARD))
    assert result.verdict is Verdict.PASS, result.reasons


def test_timeout_guard_that_still_hangs_is_stopped_and_fails() -> None:
    """Code that ignores timeout_s never returns: the sandbox's time limit ends it."""
    hangs = """```python
import time


def wait_ready(probe, interval_s=0.1, timeout_s=5.0):
    while not probe():
        time.sleep(interval_s)
    return True
```"""
    result = run("timeout-guard", chat(hangs), time_limit_s=1)
    assert result.verdict is Verdict.FAIL
    assert "did not finish within its 1 s time limit" in only_reason(result)
    assert result.attempts[0].metrics["run"]["timed_out"] is True


MUTABLE_FIX = """```python
def add_label(label, labels=None):
    if labels is None:
        labels = []
    labels.append(label)
    return labels
```
The default list is created once, when the function is defined, and shared by every call."""


def test_mutable_default_fix_passes() -> None:
    result = run("mutable-default", chat(MUTABLE_FIX))
    assert result.verdict is Verdict.PASS, result.reasons


def test_code_that_prints_the_right_value_but_returns_the_shared_list_fails() -> None:
    prints = """```python
def add_label(label, labels=[]):
    labels.append(label)
    print([label])
    return labels
```"""
    result = run("mutable-default", chat(prints))
    assert result.verdict is Verdict.FAIL
    assert "AssertionError: labels leak from one call into the next" in only_reason(result)
    assert result.attempts[0].metrics["run"]["stdout"].startswith("['gpu']\n['cpu']")


def test_code_that_exits_early_does_not_count_as_finished() -> None:
    """sys.exit(0) on import ends the run with code 0 before any assertion: still a fail."""
    result = run("mutable-default", chat("```python\nimport sys\nsys.exit(0)\n```"))
    assert result.verdict is Verdict.FAIL
    assert "stopped before the check's last line" in only_reason(result)


def test_recall_from_the_wrong_turn_fails() -> None:
    result = run("recall-build", chat("The candidate runs b7302-rc1."))
    assert result.verdict is Verdict.FAIL
    assert "recalled 'b7302-rc1', a value from another turn, not 'b7421-spec'" in only_reason(
        result
    )
    both = run("recall-build", chat("b7421-spec or b7388-base"))
    assert "also 'b7388-base'" in only_reason(both)


def test_recall_sends_the_whole_conversation() -> None:
    _, seen = run_seen("recall-build", chat("b7421-spec"))
    roles = [m["role"] for m in seen[0]["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]


RESTART = {"host": "gpu-node-3", "service": "sglang", "drain_seconds": 45}


def test_tool_choice_passes_the_right_call() -> None:
    result = run("tool-restart", chat(tool_calls=[call("restart_service", RESTART)]))
    assert result.verdict is Verdict.PASS, result.reasons


def test_tool_argument_of_the_wrong_type_fails() -> None:
    """`"45"` for an integer argument fails on the schema, naming the argument."""
    wrong = {**RESTART, "drain_seconds": "45"}
    result = run("tool-restart", chat(tool_calls=[call("restart_service", wrong)]))
    assert result.verdict is Verdict.FAIL
    assert "arguments.drain_seconds '45' is not of type 'integer'" in only_reason(result)


def test_tool_choice_wrong_tool_wrong_value_or_prose_fails() -> None:
    other = run(
        "tool-metric",
        chat(
            tool_calls=[call("open_ticket", {"title": "kv", "severity": "low", "component": "kv"})]
        ),
    )
    assert "expected 'query_metric'" in only_reason(other)
    window = {"metric": "kv_cache_usage", "window_minutes": 2}
    value = run("tool-metric", chat(tool_calls=[call("query_metric", window)]))
    assert "argument window_minutes is 2, expected 120" in only_reason(value)
    prose = run("tool-metric", chat("The KV cache was about 80% full."))
    assert "no tool call" in only_reason(prose)
    good = {"metric": "kv_cache_usage", "window_minutes": 120}
    assert run("tool-metric", chat(tool_calls=[call("query_metric", good)])).verdict is Verdict.PASS


@pytest.mark.parametrize("task_id", ["tool-restart", "tool-metric"])
def test_tool_tasks_never_show_the_call(task_id: str) -> None:
    """The model is told what to do in words: no tool name, no argument name in the prompt."""
    _, seen = run_seen(task_id, chat("no"))
    prompt = seen[0]["messages"][-1]["content"]
    p = task(task_id).params
    hidden = [p.expect_tool, *p.expect_args]  # type: ignore[attr-defined]
    assert not [h for h in hidden if h in prompt]
    assert seen[0]["tool_choice"] == "auto" and len(seen[0]["tools"]) == 3


def test_triage_json_passes_and_wrong_layer_fails() -> None:
    good = '{"layer": "proxy", "setting": "proxy_read_timeout", "seconds": 30}'
    assert run("timeout-triage", chat(f"```json\n{good}\n```")).verdict is Verdict.PASS
    client = '{"layer": "client", "setting": "client timeout", "seconds": 120}'
    assert "answer.layer is 'client', expected 'proxy'" in only_reason(
        run("timeout-triage", chat(client))
    )
    chatty = run("timeout-triage", chat(f"The proxy did it: {good}"))
    assert "the answer is not one JSON document" in only_reason(chatty)


def test_topology_invariant() -> None:
    good = '{"allowed": false, "gpus_reserved": [0, 1], "reason": "The recipe owns both GPUs."}'
    assert run("topology-invariant", chat(good)).verdict is Verdict.PASS
    yes = good.replace("false", "true")
    assert "answer.allowed is True, expected False" in only_reason(
        run("topology-invariant", chat(yes))
    )


def test_json_recipe_exact_fields() -> None:
    good = '{"engine": "SGLang", "port": 30000, "tensor_parallel": 4, "speculative": false}'
    assert run("json-recipe", chat(good)).verdict is Verdict.PASS
    typed = good.replace("30000", '"30000"')
    assert "answer.port '30000' is not of type 'integer'" in only_reason(
        run("json-recipe", chat(typed))
    )
    extra = good.replace("}", ', "gpus": 4}')
    assert "Additional properties are not allowed" in only_reason(run("json-recipe", chat(extra)))


def test_bullets_exact_count_and_length() -> None:
    good = "- KV cache runs out\n- Requests get preempted\n- Out-of-memory crashes under load"
    assert run("bullets-risks", chat(good)).verdict is Verdict.PASS
    four = good + "\n- Latency rises"
    assert "4 bullets, expected exactly 3" in only_reason(run("bullets-risks", chat(four)))
    heading = "Risks:\n" + good
    assert "line(s) that are not bullets" in only_reason(run("bullets-risks", chat(heading)))
    long = good.replace("KV cache runs out", " ".join(["word"] * 13))
    assert "bullet 1 has 13 words" in only_reason(run("bullets-risks", chat(long)))


MOVE = """1. rsync -aH /srv/models/llama/ /mnt/nvme/models/llama/
2. rsync -aHn --checksum --delete /srv/models/llama/ /mnt/nvme/models/llama/
3. rm -rf /srv/models/llama"""


def test_safe_move_plan_passes_and_unsafe_ones_fail() -> None:
    assert run("recursive-move", chat(MOVE)).verdict is Verdict.PASS
    unverified = MOVE.replace("2. rsync -aHn --checksum --delete", "2. ls")
    assert "no step does this: verify the copy" in only_reason(
        run("recursive-move", chat(unverified))
    )
    early = "1. rm -rf /srv/models/llama\n" + MOVE.replace("1.", "0.")
    assert "does 'remove the original tree' before" in only_reason(
        run("recursive-move", chat(early))
    )
    mv = run("recursive-move", chat("1. mv /srv/models/llama /mnt/nvme/models/llama"))
    assert "is forbidden (mv across filesystems" in only_reason(mv)


def test_ticket_before_workaround() -> None:
    good = (
        "1. Open a ticket with the reproduction and the 4,096-token threshold.\n"
        "2. Restart llama-server with --no-stream-tools as a workaround.\n"
        "3. Link the ticket in the run notes."
    )
    assert run("ticket-first", chat(good)).verdict is Verdict.PASS
    late = "1. Restart llama-server with --no-stream-tools.\n2. Open a ticket describing the fault."
    result = run("ticket-first", chat(late))
    assert "does 'apply the workaround' before step 2 does 'record the fault" in only_reason(result)


def test_an_answer_cut_by_the_budget_is_reported_as_cut() -> None:
    """finish_reason=length is `cut`, with the budget named: not a wrong answer."""
    result = run("json-recipe", chat('{"engine": "sgl', finish="length", tokens=80))
    assert result.verdict is Verdict.FAIL
    assert only_reason(result).startswith(
        "attempt 1/3: cut by the budget: finish_reason=length after 80 tokens "
        "(budget 128 visible + 1024 reasoning tokens"
    )
    assert result.attempts[0].metrics["outcome"] == "cut"
    wrong = run("json-recipe", chat('{"engine": "vllm"}'))
    assert wrong.attempts[0].metrics["outcome"] == "wrong"


def test_reasoning_only_answer_is_wrong_not_cut() -> None:
    result = run("recall-build", chat("", reasoning="The build is b7421-spec."))
    assert "no visible answer (finish_reason=stop" in only_reason(result)


def test_budgets_are_scaled_into_max_tokens() -> None:
    _, seen = run_seen("diff-pager", chat(GOOD_DIFF), scale=0.0625)
    assert seen[0]["max_tokens"] == 32 + 128
    _, seen = run_seen("recall-build", chat("b7421-spec"), scale=0.0625)
    assert seen[0]["max_tokens"] == 16 + 32  # the visible budget never drops below 16


def test_a_server_error_is_an_error_not_a_wrong_answer() -> None:
    import httpx
    from quality_fakes import Client, QualityContext, default_gates_dir, run_gate

    async def go() -> object:
        transport = httpx.MockTransport(lambda r: httpx.Response(500, json={"error": "boom"}))
        client = Client("http://mock", transport=transport, timeout_s=5.0)
        ctx = QualityContext(
            client=client,
            keep=lambda label, ex: [label],
            write=lambda n, o: [n],
            model="m",
            gates_dir=default_gates_dir(),
        )
        try:
            return await run_gate(task("bullets-risks"), ctx)
        finally:
            await client.aclose()

    import asyncio

    result = asyncio.run(go())
    assert getattr(result, "verdict", None) is Verdict.ERROR
    assert len(getattr(result, "attempts", [])) == 1  # the rest are not run after an error
