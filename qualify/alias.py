"""Production aliases: changed only on a verified promote decision, logged in a hash chain.

The table lives in the house repository (`qualify.trust.repository`): `aliases.log.jsonl` holds
every change (the alias, its old and new target, the digest of the decision's signed payload,
the time, the previous entry's hash) and is the authority; `aliases.toml` is the table that log
derives, written beside it for people and tools to read. Both are committed together with git,
the message naming the decision digest. Every read (`alias show`, `alias history`, `alias set`)
checks, at HEAD and in the working tree, that:

- neither file has an uncommitted change (an entry added by hand is never committed along);
- the log's chain holds (each entry's hash, each previous-hash link, the sequence, each entry's
  `old` the target the log had before it);
- the log at HEAD extends the log at every earlier commit that touched it (an emptied log, a
  log rewritten with fresh hashes, a reordered or dropped entry is named by that commit);
- the table is exactly the one the log derives (an edited, added or removed alias is named);

and refuses, naming each break, rather than read or write on top of it.

A change needs a decision that verifies by a decision key the house pins at HEAD (the
requester's own key counts for nothing), that `verify` derives again, made under the house
policy at HEAD (or one it still accepts), younger than the house's `aliases.max_decision_age_days`,
whose waivers are signed by approvers the house pins at HEAD, still committed in the house and
unexpired now, whose signed in-run copy of the candidate names this alias in `[alias]` and is the
file given, byte for byte (the file is read once).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import git

from qualify.decision import waivers
from qualify.decision.verify import VerifyReport, verify
from qualify.errors import BadInput, Refused, RunAborted
from qualify.evidence.signing import keyid, load_public, sha256_bytes
from qualify.evidence.store import utc_now, write_atomic
from qualify.trust.repository import (
    GENESIS,
    TABLE,
    Snapshot,
    at_head,
    entry_hash,
    parse_table,
    repo_of,
    snapshot,
    uncommitted,
)

TARGET_KEYS = ("candidate", "candidate_path", "candidate_sha256", "decision_sha256", "run_id")
LOG = "aliases.log.jsonl"
_TIME = "%Y-%m-%dT%H:%M:%SZ"


def render_table(aliases: Mapping[str, Mapping[str, object]]) -> str:
    """The table as TOML; every value is a string, written as a JSON-escaped basic string."""
    lines = [
        "# Production aliases. Changed only by `qualify alias set`, which verifies a signed",
        "# promote decision; derived from the hash-chained log beside this file.",
        "version = 1",
    ]
    for name in sorted(aliases):
        lines += ["", f"[aliases.{json.dumps(name)}]"]
        lines += [f"{k} = {json.dumps(str(v))}" for k, v in sorted(aliases[name].items())]
    return "\n".join(lines) + "\n"


def _parse_log(data: bytes, where: str) -> tuple[list[dict[str, Any]], list[str]]:  # raw JSON
    out, problems = [], []
    for n, line in enumerate(data.decode(errors="replace").splitlines(), 1):
        try:
            e = json.loads(line)
        except ValueError:
            problems.append(f"{where} line {n}: not JSON")
            continue
        if not isinstance(e, dict):
            problems.append(f"{where} line {n}: not a table")
            continue
        out.append(e)
    return out, problems


def check_chain(
    entries: Sequence[Mapping[str, object]],
) -> tuple[list[str], dict[str, dict[str, object]]]:
    """Every break in the chain (a hash, a previous-hash link or a sequence number that does not
    hold, or an entry whose `old` is not what the log had the alias point at before it), and the
    table the log says: each alias at the target of its latest entry, with when it was set."""
    problems, prev = [], GENESIS
    targets: dict[str, dict[str, object]] = {}
    for n, e in enumerate(entries, 1):
        if e.get("seq") != n:
            problems.append(f"entry {n}: sequence number {e.get('seq')}, expected {n}")
        if e.get("prev") != prev:
            problems.append(
                f"entry {n}: previous hash {str(e.get('prev'))[:12]}, expected {prev[:12]}"
            )
        if e.get("hash") != entry_hash(e):
            problems.append(f"entry {n}: its hash does not match its content")
        name, new = e.get("alias"), e.get("new")
        if not isinstance(name, str) or not isinstance(new, dict):
            problems.append(f"entry {n}: no alias name and new target")
        else:
            if e.get("old") != targets.get(name):
                problems.append(f"entry {n}: its old target of {name} is not the log's")
            targets[name] = {**new, "set_at": e.get("at")}
        prev = str(e.get("hash"))
    return problems, targets


@dataclass
class AliasState:
    """The alias table of a house as its log derives it, and every way the two disagree."""

    root: Path
    entries: list[dict[str, Any]] = field(default_factory=list)  # raw log JSON
    aliases: dict[str, dict[str, object]] = field(default_factory=dict)  # as derived from it
    problems: list[str] = field(default_factory=list)


def _history(repo: git.Repo, head: Sequence[Mapping[str, object]]) -> list[str]:
    """The log at HEAD must extend the log at every earlier commit that touched it."""
    problems = []
    try:
        commits = repo.git.log("--format=%H", "--", LOG).split()
    except git.GitCommandError:
        return []
    for sha in commits[1:] if commits and commits[0] == repo.head.commit.hexsha else commits:
        try:
            data = bytes((repo.commit(sha).tree / LOG).data_stream.read())
        except KeyError:
            continue  # the log did not exist there
        earlier, _ = _parse_log(data, LOG)
        if head[: len(earlier)] != earlier:
            kept = next(
                (i for i, (a, b) in enumerate(zip(earlier, head, strict=False)) if a != b),
                min(len(earlier), len(head)),
            )
            problems.append(
                f"{LOG}: commit {sha[:12]} had {len(earlier)} entries; HEAD has {len(head)} and "
                f"differs from entry {kept + 1} on (the log was rewritten, emptied or reordered)"
            )
            break
    return problems


def state(root: Path) -> AliasState:
    """The alias table of the house at `root`, checked against its log at HEAD, its history and
    the working tree (see the module docstring)."""
    repo = repo_of(root)
    st = AliasState(root)
    dirty = uncommitted(repo, [TABLE, LOG]) if repo.head.is_valid() else []
    st.problems += [f"{p}: changed and not committed (alias changes are committed)" for p in dirty]
    log_bytes = at_head(repo, LOG) or b""
    st.entries, bad = _parse_log(log_bytes, f"{LOG} at HEAD")
    broken, st.aliases = check_chain(st.entries)
    st.problems += bad + [f"{LOG} at HEAD, {p}" for p in broken]
    if repo.head.is_valid():
        st.problems += _history(repo, st.entries)
    table_bytes = at_head(repo, TABLE)
    if table_bytes is None:
        if st.aliases:
            st.problems.append(f"{TABLE}: missing at HEAD; its log sets {', '.join(st.aliases)}")
        return st
    try:
        table = parse_table(table_bytes, f"{TABLE} at HEAD")
    except BadInput as exc:
        st.problems.append(f"{exc.headline}")
        return st
    for name in sorted(set(table) | set(st.aliases)):
        have, want = table.get(name), st.aliases.get(name)
        if have == want:
            continue
        if want is None:
            st.problems.append(f"{TABLE}: alias {name} is not set by any entry of its log")
        elif have is None:
            st.problems.append(f"{TABLE}: alias {name} is missing; its log sets it")
        else:
            keys = sorted(k for k in set(have) | set(want) if have.get(k) != want.get(k))
            st.problems.append(f"{TABLE}: alias {name} differs from its log in {', '.join(keys)}")
    if table_bytes.decode(errors="replace") != render_table(st.aliases) and not any(
        p.startswith(TABLE) for p in st.problems
    ):
        st.problems.append(f"{TABLE}: not the table its log derives (edited outside `alias set`)")
    return st


@dataclass
class Change:
    name: str
    old: dict[str, object] | None  # the target the log had
    new: dict[str, str]
    entry: dict[str, object] | None
    commit: str | None


def _signer(snap: Snapshot, envelope: Path, key: Path | None) -> tuple[str, VerifyReport]:
    """The verification by the pinned decision key that signed; a `--key` must be pinned.
    Waivers are judged with the waiver keys the house pins, under the signed rules."""
    pinned = list(snap.keys.get("decision", {}).values())
    if key is not None:
        pub = load_public(key)
        mine = snap.by_keyid("decision", keyid(pub))
        if mine is None:
            raise Refused(
                f"refused: {key} (keyid {keyid(pub)[:16]}) is not pinned to sign decisions; "
                f"trust is configured in {snap.where()}"
            )
        pinned = [mine]
    if not pinned:
        raise Refused(
            f"refused: the house pins no decision key; trust is configured in {snap.where()}"
        )
    reports = [
        (k.name, verify(envelope, k.pub, approvers=waivers.pinned(snap, snap.policy.waivers)))
        for k in pinned
    ]
    for name, report in reports:
        if report.statement is not None:
            return name, report
    why = "; ".join(p for _, r in reports for p in r.problems[:1])
    raise Refused(
        f"refused: {envelope} is not signed by a decision key pinned in {snap.where()}: {why}"
    )


def _time(text: object) -> datetime | None:
    try:
        return datetime.strptime(str(text), _TIME).replace(tzinfo=UTC)
    except ValueError:
        return None


def _bound(snap: Snapshot, report: VerifyReport, now: datetime) -> None:
    """Made under the house policy at HEAD (or one it still accepts), young enough, and every
    waiver it relies on still good now: signed by a pinned approver, committed, unexpired."""
    record = report.record
    assert record is not None and report.run is not None  # it verified
    made, head_rules = record.house.policy_sha256, snap.policy.rules().sha256
    if made != head_rules and made not in snap.policy.accept:
        raise Refused(
            f"refused: the decision was made under house policy {made[:16]}; the house policy "
            f"at HEAD ({str(snap.commit)[:12]}) is {head_rules[:16]} and does not accept it "
            f"(list it in `accept` of {snap.root}/house-policy.toml to allow it)"
        )
    decided = _time(record.decided_at)
    days = snap.policy.aliases.max_decision_age_days
    if decided is None or now - decided > timedelta(days=days):
        raise Refused(
            f"refused: the decision was made at {record.decided_at}; the house moves an "
            f"alias only on a decision younger than {days} days (aliases.max_decision_age_days "
            f"in {snap.root}/house-policy.toml): qualify the candidate again"
        )
    committed = {sha256_bytes(raw) for _, raw in snap.waivers(record.candidate)}
    keys = waivers.pinned(snap, snap.policy.waivers)
    bind = waivers.Binding(
        candidate=record.candidate,
        candidate_sha256=record.candidate_sha256,
        policy_sha256=record.policy_sha256,
        decided_at=now.strftime(_TIME),
        rules=snap.policy.waivers,
        run_signer=report.signer,
    )
    attempt = f"decision/attempt-{record.attempt:03d}"
    for w in report.waivers:
        if not w.accepted:
            continue
        assert w.evidence is not None
        raw = (report.run / attempt / w.evidence).read_bytes()
        if sha256_bytes(raw) not in committed:
            raise Refused(
                f"refused: waiver {w.path} is no longer committed in {snap.root} at HEAD "
                "(withdrawn or replaced); the decision relies on it"
            )
        now_check = waivers.judge(w.path, raw, keys, bind)
        if not now_check.accepted:  # judged with the approvers the house lists only
            raise Refused(f"refused: waiver {w.path} does not hold now: {now_check.why}")


def _gate(
    snap: Snapshot, envelope: Path, candidate: Path, key: Path | None, name: str, now: datetime
) -> dict[str, str]:
    """The new target, once the decision verifies by a pinned key, promotes under the house
    policy, names this alias, and its signed candidate copy is this candidate file as it is."""
    signer, report = _signer(snap, envelope, key)
    if not report.ok:
        raise Refused(f"refused: {envelope} does not verify: " + "; ".join(report.problems))
    record, view = report.record, report.view
    assert record is not None and view is not None and report.run is not None  # it verified
    if not record.promote:
        why = "; ".join(record.evaluation.reasons) or "no reason recorded"
        raise Refused(f"refused: the decision is {record.decision}: {why}")
    _bound(snap, report, now)
    copy = record.candidate_copy
    signed = next((s.sha256 for s in report.signed if s.name == copy), None)
    if copy is None or signed is None:
        raise Refused("refused: the decision signs no in-run copy of the candidate file")
    if sha256_bytes((report.run / copy).read_bytes()) != signed:  # verified just now
        raise Refused(f"refused: {copy} changed while the decision was being checked")
    declared = view.candidate.alias if view.candidate else None  # as verify read the copy
    if declared is None:
        raise Refused(
            f"refused: the decision's candidate ({copy}) names no alias in [alias]; "
            "a decision that gates no production alias moves none"
        )
    if declared.name != name:
        raise Refused(
            f"refused: the decision's candidate gates alias {declared.name!r}, not {name!r}"
        )
    try:
        got = sha256_bytes(candidate.read_bytes())  # the file is read once
    except OSError as exc:
        why = f"CANDIDATE: expected the candidate file ({exc.strerror or exc})"
        raise BadInput(f"{candidate} cannot be read", [why]) from None
    if got != signed:
        raise Refused(
            f"refused: {candidate} has sha256 {got[:16]} now; the signed copy {copy} "
            f"has {signed[:16]}"
        )
    return {
        "candidate": record.candidate,
        "candidate_path": str(candidate),
        "candidate_sha256": got,
        "decision_sha256": str(report.payload_sha256),
        "run_id": record.run_id,
        "signer": signer,
        "headline": record.headline,
    }


def set_alias(
    name: str,
    candidate: Path,
    envelope: Path,
    house: Path,
    key: Path | None = None,
    now: datetime | None = None,
) -> Change:
    """Point `name` at `candidate` on the strength of a verified promote decision, signed by a
    key the house pins, made under the house policy at HEAD, on a table bound to its log."""
    snap = snapshot(house)
    repo = repo_of(house)
    st = state(house)
    if st.problems:
        why = "; ".join(st.problems)
        raise Refused(
            f"refused to move an alias: the alias table of {house} is not bound to its log: {why}"
        )
    new = _gate(snap, envelope, candidate.resolve(), key, name, now or datetime.now(UTC))
    old = st.aliases.get(name)
    if old is not None and all(old.get(k) == new[k] for k in TARGET_KEYS):
        return Change(name, old, new, None, None)
    entries = st.entries
    entry: dict[str, object] = {
        "seq": len(entries) + 1,
        "alias": name,
        "old": old,
        "new": new,
        "decision_sha256": new["decision_sha256"],
        "at": utc_now(),
        "prev": entries[-1]["hash"] if entries else GENESIS,
    }
    entry["hash"] = entry_hash(entry)
    aliases = {**st.aliases, name: {**new, "set_at": entry["at"]}}
    log_text = (at_head(repo, LOG) or b"").decode()
    write_atomic(house / LOG, log_text + json.dumps(entry, sort_keys=True) + "\n")
    write_atomic(house / TABLE, render_table(aliases))
    was = old["candidate"] if old else "nothing"
    message = (
        f"alias {name}: {was} -> {new['candidate']}\n\n"
        f"Decision payload sha256 {new['decision_sha256']} (run {new['run_id']}); "
        f"candidate sha256 {new['candidate_sha256']}; log entry {entry['hash']}."
    )
    try:
        repo.git.add("--", TABLE, LOG)
        repo.git.commit("-m", message, "--", TABLE, LOG)
    except git.GitCommandError as exc:
        raise RunAborted(
            f"{house / TABLE} and its log were written but not committed: {exc.stderr.strip()}"
        ) from None
    return Change(name, old, new, entry, repo.head.commit.hexsha)
