"""`qualify export --junit` on published signed runs: junitparser reads back exactly one case per
gate of the decision record, each with the record's verdict; inconclusive is an error, never a
pass; every case names its evidence inside the run; the decision and run id are properties."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from export_checks import Exported, assert_junit_agrees, junit_cases
from junitparser import Error, JUnitXml, Properties, Property

from qualify.records import Verdict


def test_one_case_per_gate_with_the_records_verdicts(roomy: Exported) -> None:
    record = roomy.side.record
    verdicts = {g.verdict for g in record.evaluation.gates}
    assert {Verdict.PASS, Verdict.FAIL, Verdict.INCONCLUSIVE, Verdict.SKIPPED} <= verdicts, (
        "the roomy run holds gates of each verdict the JUnit must tell apart"
    )
    assert_junit_agrees(roomy.junit, record)


def test_a_load_run_agrees_too(load_run: Exported) -> None:
    assert_junit_agrees(load_run.junit, load_run.side.record)


def test_inconclusive_is_an_error_never_a_pass(roomy: Exported) -> None:
    """Each inconclusive gate is an `<error type="inconclusive">` carrying its reasons; the
    suites' counts are the record's: passes only for pass, errors for inconclusive and error."""
    record = roomy.side.record
    cases = junit_cases(roomy.junit)
    unsure = [g for g in record.evaluation.gates if g.verdict is Verdict.INCONCLUSIVE]
    assert unsure
    for g in unsure:
        case = cases[g.key][3]
        assert not case.is_passed and case.is_error and not case.is_failure
        (err,) = case.result
        assert isinstance(err, Error) and err.type == "inconclusive"
        assert err.text == "\n".join(g.reasons)
    xml = JUnitXml.fromfile(str(roomy.junit))
    for suite in xml:
        mine = Counter(g.verdict for g in record.evaluation.gates if g.stage == suite.name)
        assert suite.tests == sum(mine.values())
        assert suite.failures == mine[Verdict.FAIL]
        assert suite.errors == mine[Verdict.INCONCLUSIVE] + mine[Verdict.ERROR]
        assert suite.skipped == mine[Verdict.SKIPPED]
        assert sum(1 for c in suite if c.is_passed) == mine[Verdict.PASS]


def test_failures_carry_the_gates_reasons(roomy: Exported) -> None:
    cases = junit_cases(roomy.junit)
    for g in roomy.side.record.evaluation.gates:
        case = cases[g.key][3]
        if g.verdict is Verdict.FAIL:
            (failure,) = case.result
            assert failure.text == "\n".join(g.reasons) and failure.message
            assert g.reasons[0] in failure.message


def _props(elem: Iterable[Property] | None) -> dict[str, str]:
    assert elem is not None, "no <properties>"
    return {str(p.name): str(p.value) for p in elem}


def test_each_case_names_its_evidence_inside_the_run(roomy: Exported) -> None:
    for key, (_, _, _, case) in junit_cases(roomy.junit).items():
        props = _props(case.child(Properties))
        rel = props["evidence"]
        assert not Path(rel).is_absolute() and ".." not in Path(rel).parts, key
        assert (roomy.run / rel).is_file(), (key, rel)
        assert rel.startswith(f"{key.split('/')[0]}/attempt-"), (key, rel)
        assert case.system_out.splitlines()[0] == f"evidence: {rel}"


def test_the_decision_and_run_id_are_top_level_properties(roomy: Exported) -> None:
    record = roomy.side.record
    xml = JUnitXml.fromfile(str(roomy.junit))
    props = _props(xml.child(Properties))
    assert props["qualify.decision"] == record.decision
    assert props["qualify.run_id"] == record.run_id == roomy.run.name
    assert props["qualify.candidate"] == record.candidate
    assert props["qualify.alias"] == "demo-chat-gpu", "the candidate's [alias]"
    assert xml.tests == len(record.evaluation.gates)
