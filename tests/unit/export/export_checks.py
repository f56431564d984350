"""What the export tests check, shared with tests/integration: the published signed runs
unpacked, the JUnit read back with junitparser against the decision record, and the timed
exchanges each counted attempt kept, found by their file names alone."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

from junitparser import Error, Failure, JUnitXml, Skipped, TestCase

from qualify.cli import main
from qualify.diff.runs import Side
from qualify.evidence.signing import load_public
from qualify.export import open_verified
from qualify.present.record import DecisionRecord

ROOT = Path(__file__).resolve().parents[3]
GPU = ROOT / "docs" / "gpu"
LOAD = GPU / "load"
KEY = GPU / "gpu.pub"
ROOMY = "evidence/smollm2-135m-gpu-roomy/20261203T075044Z-b0366f"
TIGHT = "evidence/smollm2-135m-gpu-tight/20261203T075242Z-97cfa5"
# (tarball under docs/gpu/load, folder in it holding the key, one signed run in that folder)
LOAD_RUNS = {
    "vllm-load": (
        "vllm-evidence.tar.xz",
        "vllm-pace",
        "smollm2-135m-gpu-load-vllm/20261204T040234Z-064f7b",
    ),
    "llama-incumbent": (
        "llama-incumbent-evidence.tar.xz",
        "llama-incumbent",
        "smollm2-135m-gpu-load-llama/20261204T071217Z-9fa90a",
    ),
}

# The kept exchange of every timed request, by the label its stage gave it; warm-ups, the
# context tasks asked alone and the tool battery are not timed.
TIMED = {
    "ab": re.compile(r"^\d{4}-(candidate|control)-run\d+-(?!warmup\d+\.json$).+\.json$"),
    "context": re.compile(r"^\d{4}-ctx-\d+-.+-c\d+-(cold|warm)-s\d+\.json$"),
    "capacity": re.compile(r"^\d{4}-(cap|kind|load)-.+-s\d+\.json$|^\d{4}-soak-s\d+\.json$"),
}
_PART = re.compile(r"\.part\d{3}$")


def unpack_gpu(dest: Path) -> Path:
    """docs/gpu/evidence.tgz (the roomy and tight runs) unpacked under `dest`."""
    with tarfile.open(GPU / "evidence.tgz") as tgz:
        tgz.extractall(dest, filter="data")
    return dest


def unpack_load(name: str, dest: Path) -> tuple[Path, Path]:
    """(run, its key) of one of LOAD_RUNS, unpacked under `dest`."""
    tarball, folder, run = LOAD_RUNS[name]
    with tarfile.open(LOAD / tarball) as tf:
        top = (f"./{folder}/{run}/", f"{folder}/{run}/", f"./{folder}/gpu.pub", f"{folder}/gpu.pub")
        wanted = [m for m in tf.getmembers() if m.name.startswith(top)]
        tf.extractall(dest, members=wanted, filter="data")
    return dest / folder / run, dest / folder / "gpu.pub"


class Exported:
    """One published run exported by `qualify export` (JUnit and CSV), with its verified side."""

    def __init__(self, run: Path, key: Path, out: Path) -> None:
        self.run, self.key, self.out = run, key, out
        self.junit, self.csv = out / "junit.xml", out / "csv"
        args = ["export", str(run), "--key", str(key), "--junit", str(self.junit)]
        assert main([*args, "--csv", str(self.csv)]) == 0
        self.side: Side = open_verified(str(run), Path("evidence"), [load_public(key)])


def verdict_of(case: TestCase) -> str:
    """The verdict a JUnit case says: pass (no result), fail, skipped, or the type of its error
    (inconclusive, error)."""
    results = case.result
    if not results:
        return "pass"
    assert len(results) == 1, f"{case.name}: {len(results)} results"
    r = results[0]
    if isinstance(r, Failure):
        return "fail"
    if isinstance(r, Skipped):
        return "skipped"
    assert isinstance(r, Error), f"{case.name}: {r!r}"
    return str(r.type)


def junit_cases(path: Path) -> dict[str, tuple[str, str, str, TestCase]]:
    """Every case of the file: key -> (suite, classname, verdict, case); a key twice fails."""
    out: dict[str, tuple[str, str, str, TestCase]] = {}
    for suite in JUnitXml.fromfile(str(path)):
        for case in suite:
            assert case.name not in out, f"{case.name}: two cases"
            out[case.name] = (str(suite.name), str(case.classname), verdict_of(case), case)
    return out


def assert_junit_agrees(
    path: Path, record: DecisionRecord
) -> dict[str, tuple[str, str, str, TestCase]]:
    """Exactly one case per gate of the record, in its stage's suite, with the record's
    verdict; inconclusive and error are errors, never a pass."""
    cases = junit_cases(path)
    gates = record.evaluation.gates
    assert sorted(cases) == sorted(g.key for g in gates)
    for g in gates:
        suite, classname, verdict, case = cases[g.key]
        assert (suite, classname) == (g.stage, f"qualify.{g.stage}"), g.key
        assert verdict == g.verdict.value, (g.key, verdict, g.verdict)
        if g.verdict.value in ("inconclusive", "error"):
            assert case.is_error and not case.is_passed, g.key
    return cases


def timed_exchanges(run: Path, record: DecisionRecord) -> set[str]:
    """Run-relative paths of the timed requests' exchanges in each counted attempt."""
    found: set[str] = set()
    for s in record.evaluation.stages:
        pattern = TIMED.get(s.stage)
        if pattern is None or s.authoritative is None:
            continue
        attempt = f"{s.stage}/attempt-{s.authoritative.attempt:03d}"
        for p in (run / attempt).iterdir():
            first = not _PART.search(p.name) or p.name.endswith(".part000")
            if first and pattern.match(_PART.sub("", p.name)):
                found.add(f"{attempt}/{p.name}")
    return found
