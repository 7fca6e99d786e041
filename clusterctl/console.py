"""How every command reports a user's mistake: plain lines, exit status 2, no traceback."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click

from clusterctl.errors import SpecError, UsageError

EXIT_INVALID = 2


@contextmanager
def user_errors() -> Iterator[None]:
    """Report spec and usage errors as plain lines and exit 2: no traceback."""
    try:
        yield
    except SpecError as exc:
        for problem in exc.problems:
            click.echo(f"error: {problem}", err=True)
        n = len(exc.problems)
        click.echo(f"{n} problem{'s' if n != 1 else ''}; nothing was written", err=True)
        sys.exit(EXIT_INVALID)
    except UsageError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_INVALID)
