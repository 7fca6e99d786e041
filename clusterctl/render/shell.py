"""The one quoting filter through which every spec value reaches a shell."""

from __future__ import annotations

import shlex


def shell_quote(value: object) -> str:
    """Quote one value as a single shell word (POSIX single quotes; safe for bash)."""
    if isinstance(value, bool):
        value = "true" if value else "false"
    return shlex.quote(str(value))
