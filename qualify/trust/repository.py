"""The house repository: the git repository that owns production, and what it trusts.

    <house>/house-policy.toml            the house policy (qualify.trust.house)
    <house>/aliases.toml, .log.jsonl     the alias table and its hash-chained log
    <house>/trust/trust.log.jsonl        every pin and unpin, hash-chained, with the key itself
    <house>/trust/<role>/<name>.pub      the pinned public keys (role: decision or waiver)
    <house>/waivers/<candidate>/*.json   signed waivers (qualify.decision.waivers), committed

Trust is read from the commit at HEAD, never from the working tree: a key file dropped in by
hand, or a policy edited and not committed, counts for nothing. A key counts when the trust log
at HEAD pins it (chain intact) and its file at HEAD is the logged key. `pin` and `unpin` are the
only writers; each appends to the log and commits.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import git
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from qualify.errors import BadInput, Refused, RunAborted
from qualify.evidence.signing import canonical, keyid, load_public, pem
from qualify.evidence.store import utc_now, write_atomic
from qualify.trust import house as house_policy

Role = Literal["decision", "waiver"]
ROLES: tuple[Role, ...] = ("decision", "waiver")
TRUST_LOG = "trust/trust.log.jsonl"
GENESIS = "0" * 64
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
ENV = "QUALIFY_HOUSE"
WAIVERS = "waivers"
TABLE = "aliases.toml"  # the alias table (`qualify.alias`)


def house_dir(arg: Path | str | None) -> Path | None:
    """`--house DIR`, else $QUALIFY_HOUSE, else None."""
    value = arg or os.environ.get(ENV)
    return Path(value).expanduser().resolve() if value else None


def require_house(arg: Path | str | None) -> Path:
    """The house a command that moves or trusts something works on: named with `--house` or
    $QUALIFY_HOUSE, never guessed from the current directory."""
    found = house_dir(arg)
    if found is None:
        raise BadInput(
            "no house repository given",
            [
                f"--house: expected the house repository (or set ${ENV}); the current "
                "directory's git repository is never taken as the house"
            ],
        )
    return found


def key_rel(role: str, name: str) -> str:
    return f"trust/{role}/{name}.pub"


def uncommitted(repo: git.Repo, paths: list[str]) -> list[str]:
    """Each path (file or folder) whose working tree or index differs from HEAD, or that holds
    untracked files, as `git status` names it."""
    out = repo.git.status("--porcelain", "--untracked-files=all", "--", *paths)
    return [line[3:] for line in out.splitlines() if line.strip()]


def repo_of(root: Path) -> git.Repo:
    """The house's git repository; `root` must be its top."""
    try:
        repo = git.Repo(root)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise BadInput(
            f"{root} is not a house repository",
            [f"--house: expected the root of a git repository (`qualify house init {root}`)"],
        ) from None
    if repo.working_tree_dir is None or Path(repo.working_tree_dir).resolve() != root.resolve():
        raise BadInput(f"{root} is not the root of its git repository", ["--house: its root"])
    return repo


def at_head(repo: git.Repo, rel: str) -> bytes | None:
    """A file's bytes as committed at HEAD (None: not there, or no commit yet)."""
    try:
        blob = repo.head.commit.tree / rel
    except (KeyError, ValueError):
        return None
    data: bytes = blob.data_stream.read()
    return data


def _commit(repo: git.Repo, paths: list[str], message: str) -> str:
    try:
        repo.git.add("--", *paths)
        repo.git.commit("-m", message, "--", *paths)
    except git.GitCommandError as exc:
        raise RunAborted(f"written but not committed: {exc.stderr.strip()}") from None
    return repo.head.commit.hexsha


def init(root: Path, seed: Path | None = None) -> tuple[Path, str | None]:
    """A house repository at `root` with the default policy (or a copy of `seed`, validated);
    an existing policy is kept."""
    root = root.expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    try:
        repo = git.Repo(root)
    except git.InvalidGitRepositoryError:
        repo = git.Repo.init(root)
    with repo.config_reader() as cr:
        named = cr.has_option("user", "name") and cr.has_option("user", "email")
    if not named:
        with repo.config_writer() as cw:
            cw.set_value("user", "name", "qualify house")
            cw.set_value("user", "email", "house@qualify.invalid")
    policy = root / house_policy.POLICY_FILE
    if policy.exists():
        house_policy.load(policy)  # an existing policy must be valid; it is never replaced
    elif seed is not None:
        house_policy.load(seed)
        write_atomic(policy, seed.read_text())
    else:
        write_atomic(policy, house_policy.default_text())
    if at_head(repo, house_policy.POLICY_FILE) if repo.head.is_valid() else None:
        return policy, None
    return policy, _commit(repo, [house_policy.POLICY_FILE], "house: the house policy")


def entry_hash(entry: Mapping[str, object]) -> str:
    return hashlib.sha256(canonical({k: v for k, v in entry.items() if k != "hash"})).hexdigest()


def _writable(root: Path, role: str, name: str) -> tuple[git.Repo, Snapshot | None]:
    """The house `pin` and `unpin` write on, with its snapshot (None before its first commit):
    only one whose trust folder is exactly HEAD's and whose HEAD is consistent, so that an
    uncommitted hand-made entry or key is never committed along."""
    if role not in ROLES:
        raise BadInput(f"no role {role!r}", [f"--role: expected one of {', '.join(ROLES)}"])
    if not _NAME.match(name):
        raise BadInput(f"bad key name {name!r}", ["--name: letters, digits, '.', '_' or '-'"])
    repo = repo_of(root)
    dirty = uncommitted(repo, ["trust"])
    if dirty:
        raise Refused(
            f"refused: {root}/trust has changes not committed through `qualify house pin`: "
            + ", ".join(dirty)
            + " (commit or remove them first; trust is read from HEAD)"
        )
    return repo, snapshot(root) if repo.head.is_valid() else None  # refuses an inconsistent house


def _append(
    root: Path, repo: git.Repo, snap: Snapshot | None, new: Mapping[str, object], msg: str
) -> str:
    """Log `new` after the entries at HEAD, and commit the log with the key file it names."""
    entries = snap.log if snap else []
    entry: dict[str, object] = {"seq": len(entries) + 1, **new, "at": utc_now()}
    entry["prev"] = entries[-1]["hash"] if entries else GENESIS
    entry["hash"] = entry_hash(entry)
    log = root / TRUST_LOG
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as fh:
        fh.write(json.dumps(entry, sort_keys=True) + "\n")
    return _commit(repo, [TRUST_LOG, key_rel(str(new["role"]), str(new["name"]))], msg)


def pin(root: Path, role: str, pub_path: Path, name: str, why: str) -> tuple[str, str]:
    """Pin a public key for a role; logged and committed. Returns (keyid, commit)."""
    repo, snap = _writable(root, role, name)
    pub = load_public(pub_path)
    text, kid = pem(pub), keyid(pub)
    if snap is not None and name in snap.keys.get(role, {}):
        raise BadInput(f"{role} key {name!r} is already pinned", ["--name: unpin it first"])
    write_atomic(root / key_rel(role, name), text)
    entry = {"action": "pin", "role": role, "name": name, "keyid": kid, "pem": text, "why": why}
    msg = f"trust: pin {role} key {name} ({kid[:16]})\n\n{why}"
    return kid, _append(root, repo, snap, entry, msg)


def unpin(root: Path, role: str, name: str, why: str) -> str:
    repo, snap = _writable(root, role, name)
    if name not in (snap or snapshot(root)).keys.get(role, {}):
        raise BadInput(f"no pinned {role} key {name!r}", ["NAME: see `qualify house show`"])
    (root / key_rel(role, name)).unlink()
    entry = {"action": "unpin", "role": role, "name": name, "why": why}
    msg = f"trust: unpin {role} key {name}\n\n{why}"
    return _append(root, repo, snap, entry, msg)


def add_waiver(root: Path, candidate: str, stem: str, data: bytes) -> tuple[Path, str]:
    """Commit a signed waiver under `waivers/<candidate>/`, written once: `<stem>.dsse.json`,
    and a renewal of the same ticket beside it as `<stem>.renewal-N.dsse.json` (each waiver is
    judged on its own; an expired one simply stops counting)."""
    if not _NAME.match(candidate) or not _NAME.match(stem):
        raise BadInput(f"bad waiver name {candidate}/{stem}", ["expected letters, digits, . _ -"])
    repo = repo_of(root)
    folder = root / WAIVERS / candidate
    folder.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        name = f"{stem}.dsse.json" if n == 1 else f"{stem}.renewal-{n}.dsse.json"
        try:
            with (folder / name).open("xb") as fh:
                fh.write(data)
            break
        except FileExistsError:
            n += 1
    rel = f"{WAIVERS}/{candidate}/{name}"
    return folder / name, _commit(repo, [rel], f"waiver: {candidate} {name}")


@dataclass
class PinnedKey:
    name: str
    keyid: str
    pub: Ed25519PublicKey
    pem: str  # as the trust log holds it, and the key's file at HEAD must


@dataclass
class Snapshot:
    """The house at one commit: its policy and the keys it pins, per role."""

    root: Path
    commit: str | None
    policy: house_policy.HousePolicy
    keys: dict[str, dict[str, PinnedKey]] = field(default_factory=dict)
    log: list[dict[str, object]] = field(default_factory=list)  # raw log JSON, chain checked

    def by_keyid(self, role: str, kid: str) -> PinnedKey | None:
        return next((k for k in self.keys.get(role, {}).values() if k.keyid == kid), None)

    def waivers(self, candidate: str) -> list[tuple[str, bytes]]:
        """The waivers committed for one candidate: (path in the house, bytes), by name."""
        with repo_of(self.root) as repo:
            try:
                tree = repo.commit(self.commit).tree / f"{WAIVERS}/{candidate}"
            except (KeyError, ValueError):
                return []
            return sorted((str(b.path), bytes(b.data_stream.read())) for b in tree.blobs)

    def where(self) -> str:
        return f"{self.root}/{TRUST_LOG} (pin with `qualify house pin --house {self.root}`)"


def snapshot(root: Path) -> Snapshot:
    """The house policy and the pinned keys as committed at HEAD."""
    with repo_of(root) as repo:  # closed: no git process outlives the snapshot
        if not repo.head.is_valid():
            raise BadInput(f"{root} has no commit", [f"--house: run `qualify house init {root}`"])
        text = at_head(repo, house_policy.POLICY_FILE)
        if text is None:
            raise BadInput(
                f"{root} has no committed {house_policy.POLICY_FILE}",
                [f"--house: run `qualify house init {root}` and commit the policy"],
            )
        where = f"{root / house_policy.POLICY_FILE} (at HEAD)"
        policy = house_policy.parse(text.decode(errors="replace"), where)
        log_text = (at_head(repo, TRUST_LOG) or b"").decode(errors="replace")
        where, entries, prev = f"{root / TRUST_LOG} (at HEAD)", [], GENESIS
        for n, line in enumerate(log_text.splitlines(), 1):  # the hash chain, checked
            try:
                e = json.loads(line)
            except ValueError:
                raise Refused(f"{where} line {n} is not JSON: the trust log was altered") from None
            if not isinstance(e, dict) or e.get("prev") != prev or e.get("hash") != entry_hash(e):
                raise Refused(f"{where} entry {n}: the trust log chain is broken")
            prev = str(e["hash"])
            entries.append(e)
        keys: dict[str, dict[str, PinnedKey]] = {r: {} for r in ROLES}
        for e in entries:
            role, name = str(e.get("role")), str(e.get("name"))
            if e.get("action") == "pin":
                logged = str(e.get("pem"))
                pub = serialization.load_pem_public_key(logged.encode())
                if not isinstance(pub, Ed25519PublicKey) or keyid(pub) != e.get("keyid"):
                    raise Refused(
                        f"refused: trust log entry {e.get('seq')} holds a key that is not its id"
                    )
                keys.setdefault(role, {})[name] = PinnedKey(name, str(e.get("keyid")), pub, logged)
            else:
                keys.get(role, {}).pop(name, None)
        try:  # every file committed at HEAD under trust/
            tree = (repo.head.commit.tree / "trust").traverse()
            files = {str(b.path): b.data_stream.read() for b in tree if isinstance(b, git.Blob)}
        except (KeyError, ValueError):
            files = {}
        pinned = {
            key_rel(r, n): k.pem.encode() for r, named in keys.items() for n, k in named.items()
        }
        for rel, data in pinned.items():
            if files.get(rel) != data:
                raise Refused(
                    f"refused: {root / rel} at HEAD is not the key the trust log pins: keys change "
                    "only through `qualify house pin`"
                )
        for rel in sorted(set(files) - set(pinned) - {TRUST_LOG}):
            raise Refused(
                f"refused: {root / rel} is committed at HEAD but the trust log pins no such key: "
                "keys change only through `qualify house pin`"
            )
        return Snapshot(root, repo.head.commit.hexsha, policy, keys, entries)


def default_house() -> Path:
    """$QUALIFY_HOUSE, else the root of the git repository holding the current directory.

    Only for reading what an alias points at (the incumbent); a command that moves an alias
    takes its house explicitly (`qualify.trust.repository.require_house`)."""
    found = house_dir(None)
    if found is not None:
        return found
    try:
        root = git.Repo(Path.cwd(), search_parent_directories=True).working_tree_dir
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        root = None
    return Path(root or Path.cwd()).resolve()


def read_table(table: Path) -> dict[str, dict[str, Any]]:  # raw TOML
    """The table file as it is on disk, unchecked: for showing what an alias points at."""
    if not table.is_file():
        return {}
    return parse_table(table.read_bytes(), str(table))


def parse_table(data: bytes, where: str) -> dict[str, dict[str, Any]]:  # raw TOML
    try:
        parsed = tomllib.loads(data.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BadInput(f"{where} is not valid TOML", [str(exc)]) from None
    aliases = parsed.get("aliases", {})
    return aliases if isinstance(aliases, dict) else {}
