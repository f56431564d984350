"""JUnit XML of a verified run, for CI test views (junitparser): one testsuite per stage, one
testcase per gate, the case's result the record's verdict and nothing else (docs/export.md)."""

from __future__ import annotations

from junitparser import Error, Failure, JUnitXml, Properties, Property, Skipped, TestCase, TestSuite
from junitparser.junitparser import FinalResult

from qualify.decision.blockers import evidence_file
from qualify.diff.runs import Side
from qualify.evidence.store import RESULT, RunDir
from qualify.export import alias_of
from qualify.present.record import GateOutcome, StageOutcome
from qualify.records import Verdict

# The JUnit element each verdict becomes (pass: none).
RESULTS: dict[Verdict, type[FinalResult]] = {
    Verdict.FAIL: Failure,
    Verdict.INCONCLUSIVE: Error,
    Verdict.ERROR: Error,
    Verdict.SKIPPED: Skipped,
}


def _properties(pairs: list[tuple[str, str]]) -> Properties:
    props = Properties()  # type: ignore[no-untyped-call]
    for name, value in pairs:
        props.add_property(Property(name, value))
    return props


def _result(g: GateOutcome) -> FinalResult | None:
    kind = RESULTS.get(g.verdict)
    if kind is None:
        return None
    reasons = g.reasons or [f"{g.key}: {g.verdict.value} (no reason recorded)"]
    more = f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else ""
    result = kind(reasons[0] + more, g.verdict.value)
    result.text = "\n".join(reasons)
    return result


def testcase(run: RunDir, g: GateOutcome) -> TestCase:
    """The gate as a testcase: its verdict's element, its evidence path, its policy status."""
    case = TestCase(g.key, f"qualify.{g.stage}")
    evidence = evidence_file(run, g)
    pairs = [
        ("verdict", g.verdict.value),
        ("status", g.status),
        ("required", str(g.required).lower()),
        ("critical", str(g.critical).lower()),
        ("attempt", str(g.authoritative.attempt)),
        ("evidence", evidence),
    ]
    if g.waiver is not None:
        pairs.append(("waiver", g.waiver))
    case.append(_properties(pairs))  # type: ignore[no-untyped-call]
    result = _result(g)
    if result is not None:
        case.result = [result]
    case.system_out = "\n".join([f"evidence: {evidence}", *g.reasons])
    return case


def _suite(run: RunDir, stage: StageOutcome, gates: list[GateOutcome]) -> TestSuite:
    suite = TestSuite(stage.stage)
    got = stage.authoritative
    if got is not None:
        attempt = f"{stage.stage}/attempt-{got.attempt:03d}"
        suite.add_property("attempt", str(got.attempt))
        suite.add_property("evidence", f"{attempt}/{RESULT}")
        suite.add_property("verdict", got.verdict.value if got.verdict else got.status)
        if got.started_at:
            suite.timestamp = got.started_at
    if stage.why_not:
        suite.add_property("not run", stage.why_not)
    suite.add_testcases([testcase(run, g) for g in gates])
    return suite


def _stages(side: Side) -> list[StageOutcome]:
    """The stages the decision lists, then any stage a gate names that it does not."""
    listed = list(side.record.evaluation.stages)
    known = {s.stage for s in listed}
    for g in side.record.evaluation.gates:
        if g.stage not in known:
            known.add(g.stage)
            listed.append(StageOutcome(stage=g.stage, planned=True, ran=True))
    return listed


def junit(side: Side) -> JUnitXml:
    """The whole run: the decision's properties, then one testsuite per stage."""
    rec = side.record
    xml = JUnitXml(f"qualify {rec.candidate} {rec.run_id}")
    pairs = [
        ("qualify.decision", rec.decision),
        ("qualify.run_id", rec.run_id),
        ("qualify.candidate", rec.candidate),
        ("qualify.headline", rec.headline),
        ("qualify.alias", alias_of(side) or ""),
        ("qualify.missing", "; ".join(rec.evaluation.missing)),
    ]
    xml.append(_properties(pairs))  # type: ignore[no-untyped-call]
    for stage in _stages(side):
        gates = [g for g in rec.evaluation.gates if g.stage == stage.stage]
        xml.add_testsuite(_suite(side.run, stage, gates))
    xml.update_statistics()  # type: ignore[no-untyped-call]
    return xml
