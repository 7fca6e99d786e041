"""The lint rule registry: known multi-node failures, each with an id, a fix and its source."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

from clusterctl.spec.models import JobSpec

Severity = Literal["error", "warning"]
FieldPath = tuple[str | int, ...]
Check = Callable[[JobSpec], Iterable[tuple[FieldPath, str]]]


@dataclass(frozen=True)
class Rule:
    """One known failure: ``check`` yields (field path, message) for each place it applies."""

    id: str
    severity: Severity
    summary: str
    fix: str
    source: str
    check: Check
    allowable: bool = True  # False: no --allow or lint.allow can let it pass


@dataclass(frozen=True)
class Finding:
    rule: Rule
    path: FieldPath
    message: str
    severity: Severity | None = None  # where one rule errs or warns by degree (gpu-memory)

    @property
    def level(self) -> Severity:
        return self.severity or self.rule.severity


RULES: dict[str, Rule] = {}


def rule(
    id: str, severity: Severity, summary: str, fix: str, source: str, allowable: bool = True
) -> Callable[[Check], Check]:
    """Register a check function as a rule."""

    def register(check: Check) -> Check:
        if id in RULES:
            raise ValueError(f"duplicate lint rule id {id}")
        RULES[id] = Rule(id, severity, summary, fix, source, check, allowable)
        return check

    return register


def run_rules(spec: JobSpec) -> Iterator[Finding]:
    """Every finding of every rule, in registry order."""
    for r in RULES.values():
        for path, message in r.check(spec):
            yield Finding(r, path, message)
