"""Structured logs: one JSON line per event into the run's evidence (structlog).

Each event is scrubbed of the run's known secrets as a value (before JSON escaping could hide
one) and again as bytes by the stream it is written to."""

from __future__ import annotations

import json

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from qualify.evidence.store import ChunkedWriter


class _EvidenceSink:
    def __init__(self, writer: ChunkedWriter) -> None:
        self.writer = writer

    def __call__(self, _logger: WrappedLogger, _name: str, event: EventDict) -> str:
        clean = self.writer.redactor.scrub(event)
        self.writer.write((json.dumps(clean, default=str) + "\n").encode())
        raise structlog.DropEvent


def configure(writer: ChunkedWriter | None) -> None:
    """Send every log event, as JSON, to the run's log file (or nowhere)."""
    processors: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if writer is not None:
        processors.append(_EvidenceSink(writer))
    else:
        processors.append(lambda _l, _n, _e: (_ for _ in ()).throw(structlog.DropEvent))
    structlog.configure(processors=processors, cache_logger_on_first_use=False)
