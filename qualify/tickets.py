"""Tickets: markdown files with YAML front matter under `tickets/open/` and `tickets/closed/`.

A failing required gate opens a ticket, or appends to the open ticket of that candidate and gate.
Tickets are working documents kept in git, not evidence: the decision copies what it relied on.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import git
import yaml
from pydantic import Field, ValidationError

from qualify.candidate import format_validation_error
from qualify.errors import BadInput
from qualify.evidence.store import utc_now, write_atomic
from qualify.present.record import DecisionRecord, TicketRef
from qualify.records import StrictModel

LOG_HEADING = "## Attempt log"
_FRONT = re.compile(r"\A---\n(.*?)\n---\n?(.*)\Z", re.S)


class LogEntry(StrictModel):
    """One decision that found the gate blocking."""

    run: str
    stage_attempt: int | None = None
    verdict: str
    reasons: list[str] = Field(default_factory=list)
    at: str


class Ticket(StrictModel):
    version: Literal[1] = 1
    id: str
    title: str
    status: Literal["open", "closed"]
    candidate: str
    gate: str
    opened: str
    closed: str | None = None
    acceptance: str = Field(description="the acceptance contract: what closes this ticket")
    fix: str | None = Field(default=None, description="the durable fix, written when closed")
    attempts: list[LogEntry] = Field(default_factory=list)


def default_dir(near: Path | None = None) -> Path:
    """$QUALIFY_TICKETS, else `tickets/` at the root of the git repository holding `near`."""
    env = os.environ.get("QUALIFY_TICKETS")
    if env:
        return Path(env)
    base = (near or Path.cwd()).resolve()
    start = base if base.is_dir() else base.parent
    try:
        root = git.Repo(start, search_parent_directories=True).working_tree_dir
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        root = None
    return Path(root) / "tickets" if root else start / "tickets"


def _render(t: Ticket, body: str) -> str:
    front = yaml.safe_dump(t.model_dump(mode="json"), sort_keys=False, allow_unicode=True)
    head = body.split(f"\n{LOG_HEADING}\n")[0].rstrip("\n") if body.strip() else f"# {t.title}"
    lines = [f"---\n{front}---\n{head}\n", LOG_HEADING, ""]
    for i, a in enumerate(t.attempts, 1):
        where = f"run {a.run}" + (f", attempt {a.stage_attempt}" if a.stage_attempt else "")
        why = "; ".join(a.reasons) or "no reason recorded"
        lines.append(f"{i}. {a.at}: {where}: {a.verdict}: {why}")
    if t.fix:
        lines += ["", "## Durable fix", "", t.fix]
    return "\n".join(lines) + "\n"


@dataclass
class TicketStore:
    root: Path

    def read(self, path: Path) -> tuple[Ticket, str]:
        m = _FRONT.match(path.read_text())
        if not m:
            raise BadInput(f"{path} is not a ticket", ["expected YAML front matter between ---"])
        try:
            data = yaml.safe_load(m.group(1))
            return Ticket.model_validate(data), m.group(2)
        except yaml.YAMLError as exc:
            raise BadInput(f"{path} has invalid front matter", [str(exc)]) from None
        except ValidationError as exc:
            raise BadInput(f"{path} is not a valid ticket", format_validation_error(exc)) from None

    def all(self, status: str | None = None) -> list[Ticket]:
        out = []
        for st in [status] if status else ["open", "closed"]:
            d = self.root / st
            out += [self.read(p)[0] for p in sorted(d.glob("*.md"))] if d.is_dir() else []
        return out

    def path_of(self, ticket_id: str) -> Path:
        for st in ("open", "closed"):
            p = self.root / st / f"{ticket_id}.md"
            if p.is_file():
                return p
        raise BadInput(f"no ticket {ticket_id!r}", [f"id: expected a ticket under {self.root}"])

    def get(self, ticket_id: str) -> Ticket:
        return self.read(self.path_of(ticket_id))[0]

    def record(
        self, candidate: str, gate: str, entry: LogEntry, acceptance: str
    ) -> tuple[Ticket, str]:
        """Append to the open ticket of this candidate and gate, or open one; says which."""
        found = next(
            (t for t in self.all("open") if (t.candidate, t.gate) == (candidate, gate)), None
        )
        if found is None:
            slugs = [re.sub(r"[^a-z0-9]+", "-", x.lower()).strip("-") for x in (candidate, gate)]
            base = "-".join([utc_now()[:10], *slugs])
            n, tid = 1, base
            while any((self.root / st / f"{tid}.md").exists() for st in ("open", "closed")):
                n += 1
                tid = f"{base}-{n}"
            t = Ticket(
                id=tid,
                title=f"{candidate}: {gate} does not pass",
                status="open",
                candidate=candidate,
                gate=gate,
                opened=entry.at,
                acceptance=acceptance,
                attempts=[entry],
            )
            write_atomic(self.root / "open" / f"{t.id}.md", _render(t, ""))
            return t, "opened"
        path = self.root / "open" / f"{found.id}.md"
        t, body = self.read(path)
        if any((a.run, a.stage_attempt) == (entry.run, entry.stage_attempt) for a in t.attempts):
            return t, "already logged"
        t.attempts.append(entry)
        write_atomic(path, _render(t, body))
        return t, "appended"

    def close(self, ticket_id: str, fix: str) -> Ticket:
        """Move an open ticket to closed/, recording the durable fix."""
        src = self.root / "open" / f"{ticket_id}.md"
        if not src.is_file():
            raise BadInput(f"no open ticket {ticket_id!r}", [f"id: expected a file {src}"])
        t, body = self.read(src)
        t.status, t.closed, t.fix = "closed", utc_now(), fix
        write_atomic(self.root / "closed" / f"{t.id}.md", _render(t, body))
        src.unlink()
        return t


def for_decision(record: DecisionRecord, tickets_dir: str | None) -> list[TicketRef]:
    """Open or append a ticket for every blocking gate (or missing pattern) of a decision, in
    `tickets_dir` (relative to the candidate file's, by default `default_dir` there); list the
    candidate's other tickets."""
    base = Path(record.candidate_path).parent if record.candidate_path else Path.cwd()
    where = Path(tickets_dir).expanduser() if tickets_dir else None
    store = TicketStore(base / where if where else default_dir(base))  # `/` keeps an absolute one
    ev, candidate = record.evaluation, record.candidate
    blocking = [(g.key, g) for g in ev.gates if g.status in ("blocks", "vetoes")]
    actions: dict[str, tuple[Ticket, str]] = {}
    for key, g in [*blocking, *((p, None) for p in ev.missing)]:
        entry = LogEntry(
            run=record.run_id,
            stage_attempt=g.authoritative.attempt if g else None,
            verdict=g.verdict.value if g else "missing",
            reasons=g.reasons if g else [next(r for r in ev.reasons if r.startswith(key))],
            at=utc_now(),
        )
        acceptance = (
            f"{key} passes in the authoritative attempt of a fresh run of {candidate}, under the "
            f"policy with sha256 {record.policy_sha256[:16]}, and the signed decision of that "
            "run verifies."
        )
        t, action = store.record(candidate, key, entry, acceptance)
        actions[t.id] = (t, action)
    for t in store.all():
        if t.candidate == candidate and t.id not in actions:
            actions[t.id] = (t, "listed")
    shown = {"id", "title", "status", "gate", "opened", "closed", "fix"}
    return [
        TicketRef(**t.model_dump(include=shown), attempts=len(t.attempts), action=action)
        for t, action in actions.values()
    ]
