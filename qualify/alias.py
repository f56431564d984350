"""Production aliases: changed only on a verified promote decision, logged in a hash chain.

The table lives in the house repository (`qualify.decision.trust`): `aliases.toml` holds the
current target of each alias; `aliases.log.jsonl` beside it holds every change (old target, new
target, decision digest, time, previous entry's hash). Both are committed together with git,
the message naming the decision digest. A change needs a decision that verifies by a decision
key the house pins at HEAD (the requester's own key counts for nothing), that `verify` derives
again, that was made under the house policy at HEAD (or one it still accepts), whose waivers
are signed by pinned approvers, and whose signed in-run copy of the candidate is the file given.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import git

from qualify.decision.signing import canonical, keyid, load_public, sha256_bytes
from qualify.decision.trust import Snapshot, house_dir, snapshot
from qualify.decision.verify import VerifyReport, verify
from qualify.errors import BadInput, Refused, RunAborted
from qualify.evidence.store import sha256_file, utc_now, write_atomic

GENESIS = "0" * 64
TARGET_KEYS = ("candidate", "candidate_path", "candidate_sha256", "decision_sha256", "run_id")
TABLE = "aliases.toml"


def default_house() -> Path:
    """$QUALIFY_HOUSE, else the root of the git repository holding the current directory."""
    found = house_dir(None)
    if found is not None:
        return found
    try:
        root = git.Repo(Path.cwd(), search_parent_directories=True).working_tree_dir
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        root = None
    return Path(root or Path.cwd()).resolve()


def log_path(table: Path) -> Path:
    return table.with_name(table.stem + ".log.jsonl")


def read_table(table: Path) -> dict[str, dict[str, Any]]:
    if not table.is_file():
        return {}
    try:
        data = tomllib.loads(table.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BadInput(f"{table} is not valid TOML", [str(exc)]) from None
    aliases = data.get("aliases", {})
    return aliases if isinstance(aliases, dict) else {}


def _toml(aliases: dict[str, dict[str, Any]]) -> str:
    """The table as TOML; every value is a string, written as a JSON-escaped basic string."""
    lines = [
        "# Production aliases. Changed only by `qualify alias set`, which verifies a signed",
        "# promote decision; every change is in the hash-chained log beside this file.",
        "version = 1",
    ]
    for name in sorted(aliases):
        lines += ["", f"[aliases.{json.dumps(name)}]"]
        lines += [f"{k} = {json.dumps(str(v))}" for k, v in aliases[name].items()]
    return "\n".join(lines) + "\n"


def entry_hash(entry: dict[str, Any]) -> str:
    return sha256_bytes(canonical({k: v for k, v in entry.items() if k != "hash"}))


def read_log(table: Path) -> list[dict[str, Any]]:
    p = log_path(table)
    if not p.is_file():
        return []
    out = []
    for n, line in enumerate(p.read_text().splitlines(), 1):
        try:
            out.append(json.loads(line))
        except ValueError:
            raise Refused(f"{p} line {n} is not JSON: the alias log was altered") from None
    return out


def check_chain(entries: list[dict[str, Any]]) -> list[str]:
    """Every break in the chain: an entry whose hash or previous-hash link does not hold."""
    problems, prev = [], GENESIS
    for n, e in enumerate(entries, 1):
        if e.get("prev") != prev:
            problems.append(
                f"entry {n}: previous hash {str(e.get('prev'))[:12]}, expected {prev[:12]}"
            )
        if e.get("hash") != entry_hash(e):
            problems.append(f"entry {n}: its hash does not match its content")
        prev = str(e.get("hash"))
    return problems


@dataclass
class Change:
    name: str
    old: dict[str, Any] | None
    new: dict[str, Any]
    entry: dict[str, Any] | None
    commit: str | None


def _signer(snap: Snapshot, envelope: Path, key: Path | None) -> tuple[str, VerifyReport]:
    """The verification by the pinned decision key that signed; a `--key` must be pinned."""
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
    reports = [(k.name, verify(envelope, k.pub)) for k in pinned]
    for name, report in reports:
        if report.statement is not None:
            return name, report
    why = "; ".join(p for _, r in reports for p in r.problems[:1])
    raise Refused(
        f"refused: {envelope} is not signed by a decision key pinned in {snap.where()}: {why}"
    )


def _bound(snap: Snapshot, pred: dict[str, Any]) -> None:
    """The decision was made under the house policy at HEAD, or one it still accepts."""
    house = pred.get("house") or {}
    made = str(house.get("policy_sha256"))
    now = snap.policy.rules().sha256
    if made != now and made not in snap.policy.accept:
        raise Refused(
            f"refused: the decision was made under house policy {made[:16]}; the house policy "
            f"at HEAD ({str(snap.commit)[:12]}) is {now[:16]} and does not accept it "
            f"(list it in `accept` of {snap.root}/house-policy.toml to allow it)"
        )
    for w in pred.get("waivers") or []:
        if not w.get("accepted"):
            continue
        k = snap.by_keyid("waiver", str(w.get("signer_keyid")))
        if k is None or not any(fnmatchcase(k.name, p) for p in snap.policy.waivers.approvers):
            raise Refused(
                f"refused: waiver {w.get('path')} is signed by key "
                f"{str(w.get('signer_keyid'))[:16]}, not a waiver approver pinned in {snap.where()}"
            )


def _gate(
    snap: Snapshot, envelope: Path, candidate: Path, key: Path | None, name: str
) -> dict[str, Any]:
    """The new target, once the decision verifies by a pinned key, promotes under the house
    policy, and names this candidate file as it is now."""
    signer, report = _signer(snap, envelope, key)
    if not report.ok:
        raise Refused(f"refused: {envelope} does not verify: " + "; ".join(report.problems))
    pred = report.predicate
    if pred.get("decision") != "promote":
        reasons = (pred.get("evaluation") or {}).get("reasons") or []
        why = "; ".join(str(r) for r in reasons) or "no reason recorded"
        raise Refused(f"refused: the decision is {pred.get('decision')}: {why}")
    _bound(snap, pred)
    copy = str(pred.get("candidate_copy"))
    subject = next((s for s in report.subjects_with("candidate") if s.get("name") == copy), None)
    if subject is None:
        raise Refused("refused: the decision signs no in-run copy of the candidate file")
    if not candidate.is_file():
        raise BadInput(f"{candidate} cannot be read", ["CANDIDATE: expected the candidate file"])
    declared = _declared_alias(candidate)
    if declared is not None and declared != name:
        raise Refused(f"refused: {candidate} declares alias {declared!r}, not {name!r}")
    now, signed = sha256_file(candidate), subject["digest"]["sha256"]
    if now != signed:
        raise Refused(
            f"refused: {candidate} has sha256 {now[:16]} now; the signed copy {copy} "
            f"has {signed[:16]}"
        )
    return {
        "candidate": str(pred.get("candidate")),
        "candidate_path": str(candidate),
        "candidate_sha256": now,
        "decision_sha256": sha256_file(envelope),
        "run_id": str(pred.get("run_id")),
        "signer": signer,
        "headline": str(pred.get("headline")),
    }


def _declared_alias(candidate: Path) -> str | None:
    try:
        alias = tomllib.loads(candidate.read_text()).get("alias")
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None  # its digest matched a verified decision; the name check is advisory
    return str(alias["name"]) if isinstance(alias, dict) and "name" in alias else None


def _repo(table: Path) -> git.Repo:
    try:
        return git.Repo(table.parent, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise BadInput(
            f"{table} is not inside a git repository",
            ["--table: expected a path in a git repository (alias changes are committed)"],
        ) from None


def set_alias(
    name: str, candidate: Path, envelope: Path, house: Path, key: Path | None = None
) -> Change:
    """Point `name` at `candidate` on the strength of a verified promote decision, signed by a
    key the house pins, made under the house policy at HEAD."""
    snap = snapshot(house)
    table = (house / TABLE).resolve()
    repo = _repo(table)
    new = _gate(snap, envelope, candidate.resolve(), key, name)
    aliases, entries = read_table(table), read_log(table)
    broken = check_chain(entries)
    if broken:
        raise Refused("refused: the alias log chain is broken: " + "; ".join(broken))
    old = aliases.get(name)
    if old is not None and all(old.get(k) == new[k] for k in TARGET_KEYS):
        return Change(name, old, new, None, None)
    entry: dict[str, Any] = {
        "seq": len(entries) + 1,
        "alias": name,
        "old": old,
        "new": new,
        "decision_sha256": new["decision_sha256"],
        "at": utc_now(),
        "prev": entries[-1]["hash"] if entries else GENESIS,
    }
    entry["hash"] = entry_hash(entry)
    aliases[name] = {**new, "set_at": entry["at"]}
    write_atomic(table, _toml(aliases))
    with log_path(table).open("a") as fh:
        fh.write(json.dumps(entry, sort_keys=True) + "\n")
    paths = [str(table), str(log_path(table))]
    was = old["candidate"] if old else "nothing"
    message = (
        f"alias {name}: {was} -> {new['candidate']}\n\n"
        f"Decision sha256 {new['decision_sha256']} (run {new['run_id']}); "
        f"candidate sha256 {new['candidate_sha256']}."
    )
    try:
        repo.git.add("--", *paths)
        repo.git.commit("-m", message, "--", *paths)
    except git.GitCommandError as exc:
        raise RunAborted(
            f"{table} and its log were written but not committed: {exc.stderr.strip()}"
        ) from None
    return Change(name, old, new, entry, repo.head.commit.hexsha)
