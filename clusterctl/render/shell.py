"""The one quoting filter through which every spec value reaches a shell."""

from __future__ import annotations


def shell_quote(value: object) -> str:
    """Quote one value as a single shell word.

    Numbers stay bare (bash arithmetic reads them); everything else is single-quoted, with
    embedded single quotes closed, escaped and reopened. Inside single quotes bash expands
    nothing: no $(), backticks, variables, globs, and newlines stay literal.
    """
    if isinstance(value, bool):
        value = "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return "'" + str(value).replace("'", "'\\''") + "'"
