"""Errors that map to the documented exit codes."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class QualifyError(Exception):
    """Base class: carries the exit code the command line should return."""

    exit_code = 3  # the run could not finish


class BadInput(QualifyError):
    """Input a person must fix: one line per problem, exit 2."""

    exit_code = 2

    def __init__(self, headline: str, problems: list[str] | None = None) -> None:
        self.headline = headline
        self.problems = problems or []
        super().__init__("\n".join([f"qualify: {headline}", *(f"  {p}" for p in self.problems)]))

    def render(self) -> str:
        return str(self)


class RunAborted(QualifyError):
    """The run could not finish (server died, infrastructure broke): exit 3."""


class Refused(QualifyError):
    """A gated action was refused (alias change, verification): exit 1."""

    exit_code = 1


def format_validation_error(exc: ValidationError, skip: set[str] | None = None) -> list[str]:
    """One line per problem: field path, reason, and the value found."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        if skip and loc in skip:
            continue
        msg = err["msg"].removeprefix("Value error, ")
        got = err.get("input")
        if err["type"] == "missing" or isinstance(got, dict) or err["type"] == "value_error":
            lines.append(f"{loc}: {msg}")
            continue
        shown = repr(got)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        lines.append(f"{loc}: {msg} (got {shown})")
    return lines
