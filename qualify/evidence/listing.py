"""The evidence listing of a run: every file of its sealed attempts and run.json with its
digest, the attempts still open, the files that broke their attempt's manifest."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from qualify.evidence.signing import sha256_bytes
from qualify.evidence.store import MANIFEST, RunDir, sha256_file

ENVELOPE_RE = re.compile(r"^decision/attempt-(\d{3,})\.dsse\.json$")
_ATTEMPT_NO = re.compile(r"attempt-(\d{3,})$")


def attempt_number(attempt_rel: str) -> int:
    m = _ATTEMPT_NO.search(attempt_rel)
    return int(m.group(1)) if m else 0


@dataclass
class Listing:
    """Every evidence file of a run with its digest, and what could not be covered."""

    files: dict[str, str] = field(default_factory=dict)
    unsealed: list[str] = field(default_factory=list)
    integrity: list[str] = field(default_factory=list)

    @property
    def root(self) -> str:
        text = "".join(f"{digest}  {name}\n" for name, digest in sorted(self.files.items()))
        return sha256_bytes(text.encode())

    def attempts(self) -> set[str]:
        """The sealed attempt directories (`stage/attempt-NNN`) the listing holds files of."""
        split = (name.split("/") for name in self.files)
        return {f"{p[0]}/{p[1]}" for p in split if len(p) >= 3 and _ATTEMPT_NO.search(p[1])}


def check_manifests(run: RunDir, listing: Listing) -> None:
    """Name every listed file that no longer matches its attempt's manifest."""
    for attempt in sorted(listing.attempts()):
        try:
            manifest = json.loads((run.path / attempt / MANIFEST).read_text())
            recorded = {k: v["sha256"] for k, v in manifest["files"].items()}
        except (OSError, ValueError, KeyError, TypeError):
            listing.integrity.append(f"{attempt}/{MANIFEST}: unreadable")
            continue
        for name, digest in recorded.items():
            got = listing.files.get(f"{attempt}/{name}")
            if got != digest:
                state = "missing" if got is None else "differs from its manifest"
                listing.integrity.append(f"{attempt}/{name}: {state}")


def evidence_listing(run: RunDir, skip: set[str] | None = None) -> Listing:
    """Files of sealed attempts and run.json; envelopes and attempts in `skip` are left out."""
    skip = skip or set()
    listing = Listing()
    for p in run.all_files():
        rel = p.relative_to(run.path)
        parts = rel.parts
        in_attempt = len(parts) >= 3 and _ATTEMPT_NO.search(parts[1])
        name, attempt = rel.as_posix(), f"{parts[0]}/{parts[1]}" if in_attempt else None
        if ENVELOPE_RE.match(name) or (attempt is not None and attempt in skip):
            continue
        if attempt is not None and not (run.path / attempt / MANIFEST).is_file():
            if attempt not in listing.unsealed:
                listing.unsealed.append(attempt)
            continue
        listing.files[name] = sha256_file(p)
    check_manifests(run, listing)
    return listing
