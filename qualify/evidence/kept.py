"""One sealed attempt read through its signed files (`AttemptView`), its kept exchanges read
back (`exchange_of`), and the comparison of a record with the one its kept evidence gives
(`differences`).

A stage's `rebuild(view)` derives its record from an `AttemptView`: `qualify.stage.finish` runs
it over the attempt the stage has just written (the record it signs), and `verify` runs it
again over the sealed attempt; what it cannot take from the kept files it takes from the record
and says so (`AttemptView.trust`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from qualify.httpclient.client import Exchange, SSEEvent
from qualify.records import GateResult, StageRecord, StageResult

if TYPE_CHECKING:
    from qualify.candidate import Candidate

_PART = re.compile(r"^(?P<name>.+)\.part(?P<n>\d{3})$")


class NotKept(Exception):
    """The attempt did not keep what its data is rebuilt from (a refusal: a sealed attempt of a
    re-judged stage must keep it)."""


@dataclass
class AttemptView:
    """One sealed attempt of a run, read only through its signed files."""

    run: Path
    attempt: str
    files: dict[str, str]
    result: StageResult
    candidate: Candidate | None = None
    control: Candidate | None = None
    trusted: list[str] = field(default_factory=list)
    earlier: dict[str, str] = field(default_factory=dict)
    said: list[str] = field(default_factory=list)
    # A probe stage's rebuild runs its checks again over the kept exchanges and sets the gates
    # they give here; a judge stage's rebuilt data is judged by its gate files instead.
    judged: list[GateResult] | None = None
    # The house's accepted check codes per stage (`PolicyRules.check_codes`); None: any.
    accepted: dict[str, list[str]] | None = None

    def other_code(self, recorded: str | None, stage: str, now: str) -> None:
        """A record of check code other than this installation's (`now`): refused when the
        house lists the codes it accepts for `stage` and the record's is not one of them."""
        allowed = (self.accepted or {}).get(stage)
        if allowed is not None and recorded not in allowed:
            raise NotKept(
                f"its check_code {str(recorded)[:12]} is neither this installation's "
                f"({now[:12]}) nor one the house accepts for {stage} (check_codes)"
            )

    @property
    def stage(self) -> str:
        return self.attempt.split("/", 1)[0]

    @property
    def sealed(self) -> dict[str, Any]:  # the sealed record's data, raw JSON
        """The sealed record's data (what the rebuilt data is compared with)."""
        return self.result.data

    def names(self) -> list[str]:
        """The files of this attempt, by name, parts joined (`x.json.part000` is `x.json`)."""
        out: set[str] = set()
        prefix = self.attempt + "/"
        for rel in self.files:
            if rel.startswith(prefix) and "/" not in rel[len(prefix) :]:
                base = rel[len(prefix) :]
                m = _PART.match(base)
                out.add(m.group("name") if m else base)
        return sorted(out)

    def read_bytes(self, name: str) -> bytes:
        """A signed file of this attempt (its parts joined); `NotKept` when it is none."""
        rel = f"{self.attempt}/{name}"
        if rel in self.files:
            return (self.run / rel).read_bytes()
        parts = sorted(p for p in self.files if _PART.match(p) and p.startswith(rel + ".part"))
        if not parts:
            raise NotKept(f"{rel}: not a signed file of the run")
        return b"".join((self.run / p).read_bytes() for p in parts)

    def read_json(self, name: str) -> Any:  # the file's JSON, raw
        try:
            return json.loads(self.read_bytes(name))
        except ValueError as exc:
            raise NotKept(f"{self.attempt}/{name}: not JSON ({exc})") from None

    def exchange(self, name: str) -> Exchange:
        """A kept exchange (`StageContext.keep`) read back as the `Exchange` it was."""
        return exchange_of(self.read_json(name), f"{self.attempt}/{name}")

    def earlier_form(self, checks: list[str], why: str) -> None:
        """The record is of an earlier form that had no gates of these checks: a gate of one of
        them that the sealed result lacks is named in the notes, not judged."""
        self.earlier.update(dict.fromkeys(checks, why))

    def trust(self, what: str) -> None:
        """Say that `what` is taken from the sealed record (not kept raw)."""
        if what not in self.trusted:
            self.trusted.append(what)


def exchange_of(kept: Any, where: str) -> Exchange:  # raw JSON, checked as read
    """An `Exchange` from its evidence form (`Exchange.evidence`): the request as sent, the
    status, headers, body or text, every SSE event with its arrival time, the end time and the
    error. Arrival times are kept to the microsecond."""
    try:
        req, resp, tm = kept["request"], kept["response"], kept.get("timing") or {}
        ex = Exchange(
            method=str(req.get("method")),
            url=str(req.get("url")),
            request_headers=dict(req.get("headers") or {}),
            request_body=req.get("body"),
            status=resp.get("status"),
            response_headers=dict(resp.get("headers") or {}),
            body=resp.get("body"),
            text=resp.get("text"),
            events=[SSEEvent(float(t), str(e), str(d)) for t, e, d in resp.get("sse") or []],
            t_headers=tm.get("t_headers_s"),
            t_end=tm.get("t_end_s"),
            error=kept.get("error"),
            error_kind=kept.get("error_kind"),
            bytes_received=int(tm.get("bytes") or 0),
            stale_retries=int(tm.get("stale_retries") or 0),
        )
        ex.chunk_times = [0.0] * int(tm.get("network_chunks") or 0)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise NotKept(f"{where}: not a kept exchange ({exc!r})") from None
    return ex


# -- comparing figures ---------------------------------------------------------------------------

# Arrival times are kept to the microsecond, so a figure computed from them may differ from the
# one computed at run time in its last digits; anything beyond is a different figure.
REL_TOL = 1e-3
ABS_TOL = 1e-4
ABS_TOL_MS = 1e-2


def _walk(path: str, key: str, a: object, b: object) -> Iterator[str]:
    if isinstance(a, int | float) and isinstance(b, int | float) and bool not in {type(a), type(b)}:
        tol = ABS_TOL_MS if key.endswith("_ms") or "_ms_" in key else ABS_TOL
        if not math.isclose(float(a), float(b), rel_tol=REL_TOL, abs_tol=tol):
            yield path
    elif isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a:  # a field the sealed record's form does not have: nothing it claims
                continue
            if k not in b:
                yield f"{path}.{k}" if path else str(k)
                continue
            yield from _walk(f"{path}.{k}" if path else str(k), str(k), a[k], b[k])
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            yield f"{path} (length {len(a)}, from the exchanges {len(b)})"
            return
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _walk(f"{path}[{i}]", key, x, y)
    elif a != b:
        yield path


def as_table(rebuilt: StageRecord | dict[str, object]) -> dict[str, object]:
    """A rebuilt record (a stage's typed record, or a table) as `result.json`'s `data` holds it."""
    return rebuilt.model_dump(mode="json") if isinstance(rebuilt, BaseModel) else rebuilt


def differences(sealed: object, rebuilt: StageRecord | dict[str, object]) -> list[str]:
    """The field paths where the sealed data differs from the rebuilt one (numbers compared to
    the precision the kept arrival times allow)."""
    return list(_walk("", "", sealed, as_table(rebuilt)))


def value_at(data: Any, path: str) -> Any:  # raw JSON, walked by path
    cur = data
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path.split(" ")[0]):
        try:
            cur = cur[int(part[1:-1])] if part.startswith("[") else cur[part]
        except (KeyError, IndexError, TypeError, ValueError):
            return None
    return cur


def short(value: object) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
