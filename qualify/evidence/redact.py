"""Redaction of secrets from everything that enters the evidence."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
        for s in self.secrets:
            text = text.replace(s, REDACTED)
        return text

    def headers(self, headers: dict[str, str]) -> dict[str, str]:
        return {
            k: (REDACTED if k.lower() in SECRET_HEADERS else self.scrub_text(v))
            for k, v in headers.items()
        }

    def scrub(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.scrub_text(obj) if self.secrets else obj
        if isinstance(obj, dict):
            out = {}
            for k, v in obj.items():
                if isinstance(k, str) and k.lower() in SECRET_HEADERS and isinstance(v, str):
                    out[k] = REDACTED
                else:
                    out[k] = self.scrub(v)
            return out
        if isinstance(obj, list | tuple):
            return [self.scrub(v) for v in obj]
        return obj
