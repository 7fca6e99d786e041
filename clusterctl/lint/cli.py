"""``clusterctl rules``: list the lint rules."""

from __future__ import annotations

import json

import click


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the rules as JSON.")
def rules(as_json: bool) -> None:
    """List the lint rules that validate and render run."""
    from clusterctl.lint.engine import RULES
    from clusterctl.lint.frameworks import FIDELITY_RULES
    from clusterctl.lint.memory import GPU_MEMORY

    every = [*RULES.values(), *FIDELITY_RULES, GPU_MEMORY]
    if as_json:
        click.echo(
            json.dumps(
                [
                    {
                        "id": r.id,
                        "severity": r.severity,
                        "summary": r.summary,
                        "fix": r.fix,
                        "source": r.source,
                    }
                    for r in every
                ],
                indent=2,
            )
        )
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("id", "severity", "what", "fix", show_lines=False)
    for r in every:
        table.add_row(r.id, r.severity, r.summary, r.fix)
    Console().print(table)
