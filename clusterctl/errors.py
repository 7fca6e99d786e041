"""Errors a user can act on: each names a field path and, where known, the YAML line."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec."""

    path: str
    message: str
    source: str = "<spec>"
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line else self.source
        field = f" {self.path}:" if self.path else ""
        return f"{where}:{field} {self.message}"


class SpecError(Exception):
    """The spec cannot be used; ``problems`` lists every reason, each once."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class UsageError(Exception):
    """A command was called in a way that cannot work (exit status 2)."""


class Unreachable(UsageError):
    """A host could not be reached over SSH; ``reason`` is why, in ssh's or paramiko's words."""

    def __init__(self, alias: str, reason: str) -> None:
        self.alias, self.reason = alias, reason
        super().__init__(f"cannot reach {alias}: {reason}")
