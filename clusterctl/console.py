"""How every command reports a user's mistake: plain lines, exit status 2, no traceback."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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


def write_new_file(path: Path, text: str) -> None:
    """Write a file the user names, never over one that exists; a failure is one UsageError."""
    if path.exists() or path.is_symlink():
        raise UsageError(f"{path} exists; not overwriting it")
    try:
        # O_EXCL: never follows a (dangling) symlink, never truncates what appeared since
        with path.open("x", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
