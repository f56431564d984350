"""A real run, decided again under a test house: the forgeries of a decision-key holder.

The run is the one published in docs/gpu (llama-server on an H200, every stage, its exchanges
and samples kept). A test unpacks it, decides it again with a CI key a fresh house pins (the
honest run), or first rewrites a stage's `result.json`, seals the attempt's manifest again and
then decides and signs: what a holder of a pinned decision key can do without the server.
"""

from __future__ import annotations

import json
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from house_run import keypair, make_house

from qualify.candidate import Candidate
from qualify.decision.conclude import conclude, setup
from qualify.decision.verify import VerifyReport, verify
from qualify.evidence.kept import AttemptView
from qualify.evidence.signing import load_private, load_public
from qualify.evidence.store import MANIFEST, RESULT, sha256_file
from qualify.present.record import DecisionRecord
from qualify.trust.repository import pin

ROOT = Path(__file__).resolve().parents[3]
PUBLISHED = ROOT / "docs" / "gpu" / "evidence.tgz"


def unpack(dest: Path, kind: str = "roomy") -> Path:
    """The published run of `kind`, unpacked under `dest`; returns its run directory."""
    with tarfile.open(PUBLISHED) as tf:
        names = [m.name for m in tf.getmembers() if m.name.endswith("/run.json")]
        top = next(n.rsplit("/", 1)[0] for n in names if f"gpu-{kind}/" in n)
        tf.extractall(dest, members=[m for m in tf.getmembers() if m.name.startswith(top)])
    return dest / top


def copy_run(src: Path, dest: Path) -> Path:
    out = dest / "ev" / src.parent.name / src.name
    shutil.copytree(src, out)
    for p in [out, *out.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return out


def house(tmp: Path, policy: str) -> tuple[Path, tuple[Path, Path]]:
    root = make_house(tmp, policy)
    ci = keypair(tmp, "ci")
    pin(root, "decision", ci[1], "ci", "the CI runner signs decisions")
    return root, ci


def reseal(run: Path, attempt: str, edit: Callable[[dict[str, Any]], None]) -> None:
    """Rewrite `attempt`'s result.json with `edit` and its manifest to match."""
    d = run / attempt
    result = json.loads((d / RESULT).read_text())
    edit(result)
    (d / RESULT).write_text(json.dumps(result, indent=1) + "\n")
    manifest = json.loads((d / MANIFEST).read_text())
    manifest["files"][RESULT]["sha256"] = sha256_file(d / RESULT)
    manifest["files"][RESULT]["size"] = (d / RESULT).stat().st_size
    (d / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")


def drop(run: Path, attempt: str, name: str) -> None:
    """Remove a kept file of `attempt` and its manifest entry."""
    d = run / attempt
    (d / name).unlink()
    manifest = json.loads((d / MANIFEST).read_text())
    del manifest["files"][name]
    (d / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")


def all_pass(result: dict[str, Any]) -> None:
    """Every gate and the stage passed, no reason left."""
    result["verdict"] = "pass"
    result["reasons"] = []
    for g in result["gates"]:
        g["verdict"], g["reasons"] = "pass", []
        for a in g.get("attempts") or []:
            a["verdict"], a["reasons"] = "pass", []


def decide(run: Path, house_root: Path, key: Path) -> tuple[DecisionRecord, Path]:
    """Decide and sign again (the earlier decisions removed)."""
    from qualify.evidence.store import RunDir

    shutil.rmtree(run / "decision")
    record = conclude(RunDir(run), setup(house_root), load_private(key))
    return record, run / "decision" / "attempt-001.dsse.json"


def checked(env: Path, pub: Path) -> VerifyReport:
    return verify(env, load_public(pub))


def policy(stage: str) -> str:
    """A house policy that requires every gate of `stage` and makes none critical."""
    return f'version = 1\nrequired = ["{stage}/*"]\ncritical = []\n'


def verified(
    published: Path,
    tmp: Path,
    policy_text: str,
    attempt: str | None = None,
    edit: Callable[[dict[str, Any]], None] | None = None,
    change: Callable[[Path], None] | None = None,
) -> tuple[DecisionRecord, VerifyReport]:
    """A copy of the published run, `attempt`'s result rewritten by `edit` and re-sealed when
    one is given (and the copy changed by `change`, e.g. a kept file dropped), decided and signed
    with a key a fresh house of `policy_text` pins, then verified: the decision record and the
    verify report."""
    run = copy_run(published, tmp)
    root, ci = house(tmp, policy_text)
    if edit is not None:
        assert attempt is not None, "an edit names the attempt it rewrites"
        reseal(run, attempt, edit)
    if change is not None:
        change(run)
    record, env = decide(run, root, ci[0])
    return record, checked(env, ci[1])


def judged_again(
    published: Path,
    tmp: Path,
    stage: str,
    edit: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[DecisionRecord, VerifyReport]:
    """`verified` under a house requiring every gate of `stage`, its first attempt edited."""
    return verified(published, tmp, policy(stage), f"{stage}/attempt-001", edit)


def attempt_view(run: Path, attempt: str, control: Candidate | None = None) -> AttemptView:
    """An attempt of an unpacked run as `verify` reads it, every file of the run taken as
    signed, the candidate from the run's own copy."""
    import tomllib

    from qualify.records import StageResult

    files = {p.relative_to(run).as_posix(): "" for p in run.rglob("*") if p.is_file()}
    result = StageResult.model_validate_json((run / attempt / RESULT).read_text())
    copy = (run / "run/attempt-001/candidate.toml").read_text()
    cand = Candidate.model_validate(tomllib.loads(copy))
    return AttemptView(run, attempt, files, result, cand, control)
