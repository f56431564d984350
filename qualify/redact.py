"""Redaction of secrets from everything that enters the evidence.

Every byte the run writes goes through one `Redactor` per run: JSON and text files
(`Attempt.write_json`, `write_text`), raw files (`write_bytes`), and the streams (the servers'
stdout and stderr, the run log: `ChunkedWriter`), where a secret split across two writes is
held back until it is whole and then replaced."""

from __future__ import annotations

from dataclasses import dataclass, field

SECRET_HEADERS = {"authorization", "x-api-key", "api-key", "proxy-authorization", "cookie"}
REDACTED = "[REDACTED]"


@dataclass
class Redactor:
    """Replaces secret header values, and any known secret value wherever it appears."""

    secrets: set[str] = field(default_factory=set)

    def add(self, value: str | None) -> None:
        if value:
            self.secrets.add(value)

    def scrub_text(self, text: str) -> str:
        for s in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(s, REDACTED)
        return text

    def scrub_bytes(self, data: bytes) -> bytes:
        """Every known secret replaced in raw bytes (its UTF-8 form)."""
        for s in sorted(self.secrets, key=len, reverse=True):
            data = data.replace(s.encode(), REDACTED.encode())
        return data

    def held_back(self, data: bytes) -> int:
        """How many trailing bytes of `data` could begin a secret that the next write completes
        (a stream keeps them until it knows)."""
        longest = 0
        for s in self.secrets:
            b = s.encode()
            for n in range(min(len(b) - 1, len(data)), longest, -1):
                if data.endswith(b[:n]):
                    longest = n
                    break
        return longest

    def headers(self, headers: dict[str, str]) -> dict[str, str]:
        return {
            k: (REDACTED if k.lower() in SECRET_HEADERS else self.scrub_text(v))
            for k, v in headers.items()
        }

    def scrub(self, obj: object) -> object:
        if isinstance(obj, str):
            return self.scrub_text(obj) if self.secrets else obj
        if isinstance(obj, dict):
            return {
                k: REDACTED
                if str(k).lower() in SECRET_HEADERS and isinstance(v, str)
                else self.scrub(v)
                for k, v in obj.items()
            }
        if isinstance(obj, list | tuple):
            return [self.scrub(v) for v in obj]
        return obj
