"""The packages of `qualify/` point down: measured exactly as `scripts/architecture_figures.py`
measures them (its import graph, its `LAYERS`), there is no runtime import cycle between
packages, at most `UP_MOST` runtime imports run up the layers, and every package is in the map."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
UP_MOST = 6


@pytest.fixture(scope="module")
def figures() -> dict[str, Any]:
    path = ROOT / "scripts" / "architecture_figures.py"
    spec = importlib.util.spec_from_file_location("architecture_figures", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["architecture_figures"] = module
    spec.loader.exec_module(module)
    found: dict[str, Any] = module.figures(ROOT / "qualify")
    return found


def test_no_package_is_in_a_runtime_import_cycle(figures: dict[str, Any]) -> None:
    assert figures["runtime_cycles"] == [], "packages importing each other at runtime"


def test_few_runtime_imports_run_up_the_layers(figures: dict[str, Any]) -> None:
    up = figures["up_runtime"]
    assert len(up) <= UP_MOST, f"{len(up)} runtime imports up the layers: {up}"


def test_every_package_is_in_the_layer_map(figures: dict[str, Any]) -> None:
    assert figures["unmapped"] == [], "add each new package to LAYERS"
    assert figures["absent"] == [], "drop each package that is gone from LAYERS"
