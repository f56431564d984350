"""`qualify run`: every stage in order, evidence for each attempt, then the decision."""

from __future__ import annotations

import asyncio
import os
import platform
import signal
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from qualify import assets, registry
from qualify._version import __version__
from qualify.candidate import LoadedCandidate, load_candidate, resolve_path
from qualify.errors import BadInput, RunAborted
from qualify.evidence import logs
from qualify.evidence.provenance import git_state
from qualify.evidence.store import Attempt, EvidenceStore, RunDir, utc_now
from qualify.gates.thresholds import Thresholds
from qualify.progress import Progress
from qualify.records import StageResult, StageStatus, Verdict
from qualify.serving.lanes import Lanes, api_key
from qualify.serving.local import cpu_model
from qualify.serving.process import stop_all
from qualify.stage import STAGES, VALIDATORS, StageContext, load_all

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from qualify.decision.waivers import Approver

CONTROL_LANE = "control"


@dataclass
class Plan:
    loaded: LoadedCandidate
    control: LoadedCandidate | None
    stages: list[str]
    problems: list[str] = field(default_factory=list)


def plan(candidate_path: str | Path) -> Plan:
    """Everything `validate` checks: the candidate, its control, the files its stages name."""
    load_all()
    loaded = load_candidate(candidate_path)
    cand = loaded.candidate
    control = None
    if "ab" in cand.stages.run and cand.stages.ab.control:
        control = load_candidate(resolve_path(loaded, cand.stages.ab.control))
    problems: list[str] = []
    for check in VALIDATORS:
        problems.extend(check(loaded))
    if problems:
        raise BadInput(f"{loaded.path} names files that are not valid", problems)
    return Plan(loaded, control, list(cand.stages.run))


def _aborted(
    name: str, attempt: Attempt, started: str | None, why: str, status: StageStatus = "aborted"
) -> StageResult:
    """A stage that stopped (`error`), or, with no start, one not run (`skipped`): `finished`
    when it never can be (kept on resume), `aborted` when the run stopped before it."""
    now = utc_now()
    return StageResult(
        stage=name,
        attempt=attempt.number,
        status=status,
        verdict=Verdict.ERROR if started else Verdict.SKIPPED,
        reasons=[why if started else f"not run: {why}"],
        started_at=started or now,
        ended_at=now,
    )


class Runner:
    def __init__(self, p: Plan, run: RunDir, progress: Progress) -> None:
        self.p, self.run, self.progress = p, run, progress
        lanes = {"candidate": p.loaded}
        if p.control is not None:
            lanes[CONTROL_LANE] = p.control
        self.lanes = Lanes(run, lanes)
        self.sampler: Any = None  # the sampler a stage's spec starts (vram's Sampler)
        self.aborted: str | None = None
        self.interrupted: str | None = None  # the signal that asked the run to stop
        self._task: asyncio.Task[object] | None = None
        self._cancellable = False  # True while a stage runs: cleanup is never cancelled
        self.thresholds = Thresholds()  # the effective policy's, set by execute

    async def run_stage(self, name: str) -> StageResult:
        attempt = self.run.new_attempt(name)
        fn = STAGES.get(name)
        log = structlog.get_logger("qualify").bind(stage=name, attempt=attempt.number)
        if self.aborted:
            why = f"the run was aborted earlier ({self.aborted})"
            result = _aborted(name, attempt, None, why)
        elif fn is None:
            why = "this build of qualify has no such stage"
            result = _aborted(name, attempt, None, why, "finished")
        else:
            ctx = StageContext(name, self.p.loaded, self.run, attempt, self.lanes, self.progress)
            ctx.sampler = self.sampler
            ctx.thresholds = self.thresholds
            log.info("stage.start")
            try:
                try:  # a harness failure or a dead server makes the stage `error`, never a pass
                    result = await fn(ctx)
                except RunAborted as exc:
                    self.aborted = str(exc)
                    result = _aborted(name, attempt, ctx.started_at, str(exc))
                except Exception as exc:  # a harness bug: the stage is `error`, the run goes on
                    attempt.write_text("traceback.txt", traceback.format_exc())
                    result = _aborted(name, attempt, ctx.started_at, f"internal error: {exc!r}")
                else:
                    proc = self.lanes.process
                    if proc is not None and self.lanes.died():
                        self.aborted = proc.death("during the stage")
                        aborted = _aborted(name, attempt, ctx.started_at, self.aborted)
                        aborted.gates, aborted.data = result.gates, result.data
                        aborted.reasons.extend(result.reasons)
                        result = aborted
                if self.interrupted:  # the stage swallowed the cancellation: not finished
                    raise asyncio.CancelledError(self.interrupted)
            except (asyncio.CancelledError, KeyboardInterrupt):
                why = f"interrupted ({self.interrupted or 'SIGINT'})"
                attempt.write_result(_aborted(name, attempt, ctx.started_at, why))
                attempt.seal()
                raise
        attempt.write_result(result)
        attempt.seal()
        log.info("stage.end", verdict=result.verdict.value, status=result.status)
        self.progress.verdict(
            f"{name} (attempt {attempt.number})", result.verdict, "; ".join(result.reasons[:2])
        )
        return result

    def interrupt(self, name: str) -> None:
        """Ctrl-C or SIGTERM: the run stops. The flag decides the exit code (3) whatever a
        library does with the cancellation; while a stage runs, the cancellation is repeated
        each second until the stage has let go of it (a library may swallow one)."""
        self.interrupted = self.interrupted or name
        self._recancel()

    def _recancel(self) -> None:
        task = self._task
        if task is None or task.done() or not self._cancellable:
            return
        task.cancel()
        asyncio.get_running_loop().call_later(1.0, self._recancel)

    async def check_interrupted(self) -> None:
        """Between steps: a run asked to stop starts nothing new. Two turns of the loop first,
        so a signal that arrived while the last step ran without yielding is handled."""
        for _ in range(2):
            await asyncio.sleep(0)
        if self.interrupted:
            raise asyncio.CancelledError(self.interrupted)

    async def execute(self, resume: bool) -> None:
        loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.interrupt, sig.name)
        order = registry.run_order(self.p.stages)
        # A resumed run starts at the first stage whose last attempt did not finish and runs every
        # stage from there, finished or not: a later stage's result was measured after an earlier
        # stage that did not finish, so it is not kept.
        kept = 0
        for name in order if resume else []:
            last = next(reversed(self.run.results(name)), None)
            if last is None or last.status != "finished":
                break
            self.progress.verdict(f"{name} (kept from attempt {last.attempt})", last.verdict)
            kept += 1
        todo = order[kept:]
        specs = registry.specs()
        last_ones = [n for n in todo if n in specs and specs[n].last]
        starts = (s.loaded.sampler for n in todo if (s := specs.get(n)) and s.loaded.sampler)
        starter = next(starts, None)
        if starter is not None:
            self.sampler = starter(self.p.loaded, self.run)
        try:
            self._cancellable = True
            for name in todo:
                await self.check_interrupted()
                if name in last_ones:
                    continue
                if self.sampler is not None:
                    self.sampler.mark(name)
                await self.run_stage(name)
            await self.check_interrupted()
        finally:
            self._cancellable = False
            await self.lanes.stop()
            if self.sampler is not None:
                self.sampler.stop()
        for name in last_ones:  # after the servers stopped: they judge what came before
            self._cancellable = True
            try:
                await self.run_stage(name)
            finally:
                self._cancellable = False
            await self.check_interrupted()


def _open_run(store: EvidenceStore, resume: str | None, p: Plan) -> RunDir:
    """The run to continue (of this candidate only), else a new one with its run.json."""
    if not resume:
        info = {
            "candidate": p.loaded.candidate.name,
            "candidate_path": str(Path(p.loaded.path).resolve()),
            "candidate_sha256": p.loaded.sha256,
            "control_path": str(Path(p.control.path).resolve()) if p.control else None,
            "control_sha256": p.control.sha256 if p.control else None,
            "stages": p.stages,
            "tool_version": __version__,
            # The code that ran (its version and build commit); `git` is the repository holding
            # the candidate file, which says nothing of the code.
            "tool": assets.build_info().model_dump(),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpu": {"model": cpu_model(), "cores": os.cpu_count()},
            "git": git_state(Path(p.loaded.path)),
        }
        return store.new_run(p.loaded.candidate.name, info)
    run = store.open_run(resume)
    if run.candidate_name != p.loaded.candidate.name:
        raise BadInput(
            f"run {run.run_id} is not of this candidate",
            [f"--resume: expected a run of {p.loaded.candidate.name} (got {run.candidate_name})"],
        )
    return run


def execute(
    candidate_path: str | Path,
    evidence_root: Path,
    resume: str | None = None,
    key: str | None = None,
    progress: Progress | None = None,
    house: str | Path | None = None,
) -> int:
    """Run the pipeline; returns the exit code (0 promote, 1 no-promote, 3 aborted).

    `house` (else $QUALIFY_HOUSE) is the house repository whose policy at HEAD, tightened by
    the candidate's `[policy]`, the gates judge against and the decision is made under."""
    from qualify.decision.conclude import conclude, setup, sign_decision, signer
    from qualify.trust.repository import house_dir

    p = plan(candidate_path)
    api_key(p.loaded)
    if p.control is not None:
        api_key(p.control)
    decided = setup(house_dir(house))
    rules = decided.rules(p.loaded.candidate.policy, str(p.loaded.path))  # a loosening: exit 2
    priv = signer(key, p.loaded, evidence_root)  # a bad key: exit 2 before anything runs
    progress = progress or Progress()
    run = _open_run(EvidenceStore(evidence_root), resume, p)
    inv = run.new_attempt("run")
    runner = Runner(p, run, progress)
    runner.thresholds = rules.thresholds
    code, decision = 3, None
    try:
        inv.write_bytes("candidate.toml", Path(p.loaded.path).read_bytes())
        if p.control is not None:
            inv.write_bytes("control.toml", Path(p.control.path).read_bytes())
        invocation = {"argv": sys.argv, "resume": bool(resume), "at": utc_now()}
        inv.write_json("invocation.json", invocation)
        logs.configure(inv.stream("log", "jsonl"))
        progress.say(f"qualify {__version__}: run {run.run_id} of {p.loaded.candidate.name}")
        progress.say(f"  evidence: {run.path}")
        policy = decided.ref.root or "built-in defaults"
        progress.say(f"  policy: {policy} (sha256 {rules.sha256[:16]})")
        asyncio.run(runner.execute(resume is not None))
        if runner.interrupted:
            raise KeyboardInterrupt(runner.interrupted)
        decision = conclude(run, decided, priv, record_attempt=f"run/{inv.path.name}")
        code = 3 if runner.aborted else (0 if decision.promote else 1)
    except (KeyboardInterrupt, asyncio.CancelledError):
        runner.aborted = f"interrupted ({runner.interrupted or 'SIGINT'}: Ctrl-C or a stop request)"
        decision, code = None, 3
        progress.say("qualify: interrupted; servers stopped, evidence sealed")
    finally:
        stop_all()
        inv.write_json("outcome.json", {"aborted": runner.aborted, "exit_code": code})
        inv.seal()
        logs.configure(None)
    if decision is not None and priv is not None:  # after the seal: the invocation is signed too
        envelope = sign_decision(run, decision, priv)
        if not _verify_own(envelope, priv, decided.approvers(rules)):
            return 3
    if runner.aborted:  # the exit code is 3 then
        progress.say(f"qualify: run could not finish: {runner.aborted}")
    return code


def _verify_own(envelope: Path, priv: Ed25519PrivateKey, approvers: list[Approver]) -> bool:
    """`qualify verify` of the envelope just signed, as a reader will run it: False, with the
    problems printed (the fields that differ when judged again from the kept evidence), when it
    does not verify. A run never leaves a signed decision that does not verify without saying
    so (exit 3)."""
    from qualify.decision.verify import verify

    report = verify(envelope, priv.public_key(), None, approvers)
    refused = [] if report.ok else list(report.problems)
    if refused:
        print(f"qualify: the signed decision {envelope} does NOT verify:", file=sys.stderr)
        for problem in refused:
            print(f"  {problem}", file=sys.stderr)
    return not refused
