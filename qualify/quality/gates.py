"""The quality stage's checks, registered for gate files of stage `quality`.

`qualify.gates.registry.load_checks` imports the check modules the registry declares for each
stage (by default `qualify.<stage>.judges` and `qualify.<stage>.gates`);
importing this module imports every quality probe, so each registers itself (as a probe of
stage `quality`, see `qualify.quality.tasks.quality_check`). The quality stage has no judges:
every task is a probe that asks the server and checks the answer, attempt by attempt.
"""

from __future__ import annotations

import importlib

CHECK_MODULES = ("diff_edit", "python_code", "recall", "tool_choice", "structured")

for _mod in CHECK_MODULES:
    importlib.import_module(f"qualify.quality.checks.{_mod}")
