"""Run the lint rules over a loaded spec: errors block rendering unless allowed by id."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from clusterctl.errors import Problem, SpecError
from clusterctl.lint import rules as _rules  # noqa: F401  (registers the rules)
from clusterctl.lint.memory import GPU_MEMORY
from clusterctl.lint.registry import RULES, Finding, Rule, run_rules
from clusterctl.spec.loader import LoadedSpec

__all__ = ["RULES", "Finding", "Rule", "lint", "lint_or_raise"]


def lint(loaded: LoadedSpec) -> list[Finding]:
    """Every finding for the spec, framework fidelity checks included."""
    from clusterctl.lint.frameworks import fidelity_findings
    from clusterctl.lint.memory import memory_findings

    return [*run_rules(loaded.spec), *fidelity_findings(loaded.spec), *memory_findings(loaded.spec)]


def _problem(loaded: LoadedSpec, finding: Finding) -> Problem:
    message = f"[{finding.rule.id}] {finding.message}; fix: {finding.rule.fix}"
    return loaded.problem(finding.path, message)


@dataclass(frozen=True)
class LintOutcome:
    """What did not block: warnings to show, and errors the spec or --allow let pass (the
    spec's author said those are expected, so commands do not repeat them)."""

    warnings: list[Problem]
    allowed: list[Problem]


def lint_or_raise(loaded: LoadedSpec, allowed: Iterable[str] = ()) -> LintOutcome:
    """Raise SpecError for every error-level finding not allowed."""
    allow = set(loaded.spec.lint.allow) | set(allowed)
    unknown = sorted(allow - set(RULES) - {GPU_MEMORY.id})
    if unknown:
        raise SpecError(
            [
                loaded.problem(("lint", "allow"), f"unknown rule id {u!r} (see clusterctl rules)")
                for u in unknown
            ]
        )
    errors, warnings, passed = [], [], []
    for finding in lint(loaded):
        problem = _problem(loaded, finding)
        if finding.rule.allowable and finding.rule.id in allow:
            passed.append(problem)
        elif finding.level == "error":
            errors.append(problem)
        else:
            warnings.append(problem)
    if errors:
        raise SpecError(errors)
    return LintOutcome(warnings, passed)
