"""Tickets: opened by a failing gate, appended on the next failure, closed with a fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from qualify.errors import BadInput
from qualify.tickets import LogEntry, TicketStore, default_dir


def entry(run: str, attempt: int = 1) -> LogEntry:
    return LogEntry(run=run, stage_attempt=attempt, verdict="fail", reasons=["why"], at="T")


def test_a_failure_opens_a_ticket_with_front_matter(tmp_path: Path) -> None:
    """The first failure of a gate writes tickets/open/<id>.md with YAML front matter."""
    store = TicketStore(tmp_path)
    t, action = store.record("cand", "preflight/json@off", entry("r1"), "json passes")
    assert action == "opened"
    text = (tmp_path / "open" / f"{t.id}.md").read_text()
    assert text.startswith("---\nversion: 1\n")
    for field in ("id:", "title:", "status: open", "candidate: cand", "gate: preflight/json@off"):
        assert field in text
    assert "acceptance: json passes" in text and "## Attempt log" in text


def test_the_next_failure_appends_to_the_open_ticket(tmp_path: Path) -> None:
    """A second run appends to the same ticket; the same run and attempt is logged once."""
    store = TicketStore(tmp_path)
    t1, _ = store.record("cand", "g", entry("r1"), "a")
    t2, action = store.record("cand", "g", entry("r2"), "a")
    _, again = store.record("cand", "g", entry("r2"), "a")
    assert (t2.id, action, again) == (t1.id, "appended", "already logged")
    assert [a.run for a in store.get(t1.id).attempts] == ["r1", "r2"]
    other, _ = store.record("other", "g", entry("r3"), "a")
    assert other.id != t1.id


def test_close_moves_the_ticket_and_keeps_the_fix(tmp_path: Path) -> None:
    """Closing moves the file to closed/, records the fix; the next failure opens a new one."""
    store = TicketStore(tmp_path)
    t, _ = store.record("cand", "g", entry("r1"), "a")
    (tmp_path / "open" / f"{t.id}.md").write_text(
        (tmp_path / "open" / f"{t.id}.md")
        .read_text()
        .replace("## Attempt log", "Notes kept by a person.\n\n## Attempt log")
    )
    closed = store.close(t.id, "pinned the template")
    assert not (tmp_path / "open" / f"{t.id}.md").exists()
    text = (tmp_path / "closed" / f"{t.id}.md").read_text()
    assert "status: closed" in text and "pinned the template" in text
    assert "Notes kept by a person." in text
    assert closed.fix == "pinned the template"
    fresh, action = store.record("cand", "g", entry("r2"), "a")
    assert action == "opened" and fresh.id != t.id
    with pytest.raises(BadInput, match="no open ticket"):
        store.close(t.id, "again")


def test_a_broken_ticket_names_the_field(tmp_path: Path) -> None:
    """A ticket whose front matter lacks a field is bad input naming that field."""
    (tmp_path / "open").mkdir()
    (tmp_path / "open" / "x.md").write_text("---\nid: x\n---\nbody\n")
    with pytest.raises(BadInput) as info:
        TicketStore(tmp_path).all()
    assert any(p.startswith("title:") for p in info.value.problems)


def test_default_dir_honours_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$QUALIFY_TICKETS wins; outside git the directory sits beside the given path."""
    monkeypatch.setenv("QUALIFY_TICKETS", str(tmp_path / "t"))
    assert default_dir() == tmp_path / "t"
    monkeypatch.delenv("QUALIFY_TICKETS")
    assert default_dir(tmp_path) == tmp_path.resolve() / "tickets"
