"""Structured logs: one JSON line per event into the run's evidence (structlog).

Each event is scrubbed of the run's known secrets as a value (before JSON escaping could hide
one) and again as bytes by the stream it is written to."""

from __future__ import annotations

import json

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from qualify.evidence.store import ChunkedWriter


def configure(writer: ChunkedWriter | None) -> None:
    """Send every log event, as JSON, to the run's log file (or nowhere)."""

    def sink(_logger: WrappedLogger, _name: str, event: EventDict) -> str:
        if writer is not None:
            clean = writer.attempt.redactor.scrub(event)
            writer.write((json.dumps(clean, default=str) + "\n").encode())
        raise structlog.DropEvent

    processors: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        sink,
    ]
    structlog.configure(processors=processors, cache_logger_on_first_use=False)
