"""Identity judged again offline from the raw exchanges an attempt kept (`verify`).

The bodies the server sent (`/v1/models`, the engine's identity paths, the chat probe), the
launch the run recorded, the signed candidate's pins, the project's identity gate files and the
signed thresholds: a `result.json` whose gates differ is refused.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import TYPE_CHECKING

from qualify.evidence.kept import AttemptView, NotKept
from qualify.evidence.store import RESULT
from qualify.gates.thresholds import Thresholds
from qualify.httpclient.client import Exchange
from qualify.preflight.checks.common import clip
from qualify.present.reading import RunView

if TYPE_CHECKING:
    from qualify.serving.engine import EngineAdapter

_EXCHANGE = re.compile(r"^\d{4}-(.+)\.json$")


def _exchanges(view: AttemptView) -> dict[str, Exchange]:
    """The exchanges an attempt kept (`NNNN-<label>.json`), by label; other files left out."""
    out: dict[str, Exchange] = {}
    for name in view.names():
        if m := _EXCHANGE.match(name):
            with contextlib.suppress(NotKept):
                out[m.group(1)] = view.exchange(name)
    return out


def _bodies(
    engine: EngineAdapter, kept: dict[str, Exchange]
) -> tuple[dict[str, object], str | None, list[str]]:
    """The bodies the server sent, by path, as the stage read them; why it was unreachable;
    the paths this version reads that the attempt kept no exchange of."""
    from qualify.identity.stage import _label, answer
    from qualify.serving.engine.vllm import CHAT_PROBE

    models = kept["v1-models"]
    bodies: dict[str, object] = {"/v1/models": answer(models)}
    ok = bodies["/v1/models"] is not None
    unreachable = None if ok else (models.error or f"HTTP {models.status}")
    wanted = list(engine.paths) if unreachable is None else []
    labels = {_label(p): p for p in wanted}
    if unreachable is None and engine.probe_chat:
        labels["probe-chat"] = CHAT_PROBE
    missing = [p for lab, p in labels.items() if lab not in kept]
    for lab, path in labels.items():
        if lab in kept:
            bodies[path] = answer(kept[lab], path in engine.text_paths)
    return bodies, unreachable, missing


def identity_again(view: RunView, thresholds: Thresholds) -> tuple[list[str], list[str]]:
    """`(problems, notes)` of every identity attempt judged again (see the module docstring)."""
    from qualify.gates.files import default_gates_dir
    from qualify.gates.runner import judge_stage
    from qualify.identity.stage import gather
    from qualify.serving.engine import adapter
    from qualify.serving.identity import Launch

    problems: list[str] = []
    notes: list[str] = []
    run, listing, cand = view.run, view.listing, view.candidate
    found = view.attempts.get("identity", [])
    attempts = [(f"identity/{a.dir.name}", a.result) for a in found if a.result is not None]
    if cand is None or not attempts:
        return problems, notes
    launches = [  # the command of every candidate server launch the run recorded
        json.loads((run.path / n).read_text()).get("command")
        for n in sorted(listing.files)
        if re.match(r"^server-candidate/attempt-\d{3,}/launch\.json$", n)
    ]
    engine = adapter(cand.identity.engine)
    for attempt, result in attempts:
        kept = _exchanges(AttemptView(run.path, attempt, listing.files, result))
        if result.status != "finished" or "v1-models" not in kept:
            continue
        bodies, unreachable, missing = _bodies(engine, kept)
        if missing:
            notes.append(
                f"{attempt}: not judged again from its exchanges (it kept none for "
                f"{', '.join(missing)}, which this version reads)"
            )
            continue
        shown = result.data.get("launch")
        launch = None
        if isinstance(shown, dict):
            if shown.get("kind") != "local":
                notes.append(f"{attempt}: a container launch, not judged again offline")
                continue
            if shown.get("args") not in launches:
                problems.append(
                    f"{attempt}: its launch arguments are not any launch the run recorded"
                )
                continue
            env = dict(cand.server.launch.env) if cand.server.launch else {}
            launch = Launch("local", [str(a) for a in shown["args"]], env)
        data = gather(cand.identity, bodies, launch, unreachable)
        if "unpinned" not in result.data:  # an earlier build: every pin judged as if set
            data = data.model_copy(update={"unpinned": None})
        gates, _problems = judge_stage("identity", default_gates_dir(), data, thresholds)
        again = sorted((g.gate, g.verdict.value) for g in gates)
        signed = sorted((g.gate, g.verdict.value) for g in result.gates if g.gate != "gate-files")
        if again != signed:
            diff = sorted(set(signed) ^ set(again))
            problems.append(
                f"{attempt}/{RESULT}: its gates do not follow from the exchanges it kept "
                f"(judged again: {clip(json.dumps(diff), 160)})"
            )
    return problems, notes
