"""A spec or profiles file as YAML text: read safely, parsed with YAML 1.2's core schema,
each key's line kept for messages, and paths written as users write them."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import yaml

from clusterctl.errors import Problem, SpecError

PathKey = tuple[str | int, ...]

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available

# Bounds checked on the event stream before anything is composed: a spec is a few levels deep
# and uses aliases for small reuse. Deeper documents crash the composer (RecursionError, or a
# segfault in libyaml's), and alias bombs (billion laughs) expand exponentially.
MAX_DEPTH = 64
MAX_ALIAS_EXPANSION = 100_000  # nodes that aliases may add beyond the document's own

# Plain scalars are typed as YAML 1.2's core schema types them (yaml.org/spec/1.2.2 10.3.2),
# not as PyYAML's YAML 1.1 does: 12:00:00 stays the string SLURM expects (1.1: the base-60
# integer 43200, a 30-day limit), off / yes / y stay strings (1.1: booleans, so
# WANDB_MODE: off became "false"), 0755 and 0x1F stay what the user wrote (1.1: octal and hex
# integers; 1.2 would read 0755 as 755), and 1e-6 is a float (1.1 wants a dot: a learning
# rate became a string).
_CORE_RESOLVERS: list[tuple[str, re.Pattern[str], str]] = [
    # before int and float: a leading zero (0755, a mode or an id) keeps its text
    ("tag:yaml.org,2002:str", re.compile(r"^[-+]?0[0-9_]+$"), "-+0"),
    ("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), "tTfF"),
    ("tag:yaml.org,2002:int", re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$"), "-+0123456789"),
    (
        "tag:yaml.org,2002:float",
        re.compile(
            r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
            r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
        ),
        "-+.0123456789",
    ),
]


def _core_schema_resolvers() -> dict[str, list[tuple[str, re.Pattern[str]]]]:
    out: dict[str, list[tuple[str, re.Pattern[str]]]] = {}
    kept = ("tag:yaml.org,2002:null", "tag:yaml.org,2002:merge")
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items():
        out[first] = [(tag, regexp) for tag, regexp in resolvers if tag in kept]
    for tag, regexp, firsts in _CORE_RESOLVERS:
        for first in firsts:
            out.setdefault(first, []).append((tag, regexp))
    return out


class CoreLoader(_BaseLoader):  # type: ignore[misc]
    """The safe loader with YAML 1.2 core-schema scalars."""

    yaml_implicit_resolvers: ClassVar[dict[str, list[tuple[str, re.Pattern[str]]]]] = (
        _core_schema_resolvers()
    )


def line_for(lines: Mapping[PathKey, int], path: Sequence[str | int]) -> int | None:
    """The line of the longest prefix of ``path`` that the YAML defines."""
    key = tuple(path)
    while key:
        if key in lines:
            return lines[key]
        key = key[:-1]
    return lines.get((), None)


def format_path(path: Sequence[str | int]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif "." in part or not part:
            out += f'["{part}"]'
        else:
            out += f".{part}" if out else part
    return out


def _map_lines(
    node: yaml.Node, path: PathKey, lines: dict[PathKey, int], dups: list[Problem], source: str
) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key_node, value_node in node.value:
            key = key_node.value
            if key in seen:
                dups.append(
                    Problem(
                        format_path((*path, key)),
                        "duplicate key",
                        source,
                        key_node.start_mark.line + 1,
                    )
                )
            seen.add(key)
            child = (*path, key)
            lines[child] = key_node.start_mark.line + 1
            _map_lines(value_node, child, lines, dups, source)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = (*path, index)
            lines[child] = item.start_mark.line + 1
            _map_lines(item, child, lines, dups, source)


def _check_shape(text: str, source: str) -> None:
    """Refuse documents nested deeper than MAX_DEPTH or whose aliases expand past the bound.

    One pass over the parser's events (libyaml's parser is not recursive): the size of every
    anchored node is known when it ends, and each alias adds that size again.
    """
    sizes: dict[str, int] = {}
    stack: list[tuple[str | None, int]] = []  # (anchor, nodes so far) per open collection
    expanded = 0
    for event in yaml.parse(text, Loader=CoreLoader):
        line = event.start_mark.line + 1 if event.start_mark is not None else None
        if isinstance(event, yaml.CollectionStartEvent):
            if len(stack) >= MAX_DEPTH:
                raise SpecError(
                    [Problem("", f"the YAML nests deeper than {MAX_DEPTH} levels", source, line)]
                )
            stack.append((event.anchor, 1))
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, size = stack.pop()
            if anchor is not None:
                sizes[anchor] = size
        elif isinstance(event, yaml.ScalarEvent):
            anchor, size = event.anchor, 1
            if anchor is not None:
                sizes[anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor in {anchor for anchor, _ in stack}:
                message = (
                    f"the alias *{event.anchor} lies inside &{event.anchor} itself: a spec "
                    "cannot hold recursive data"
                )
                raise SpecError([Problem("", message, source, line)])
            size = sizes.get(event.anchor or "", 1)
            expanded += size
            if expanded > MAX_ALIAS_EXPANSION:
                raise SpecError(
                    [
                        Problem(
                            "",
                            f"YAML aliases expand to more than {MAX_ALIAS_EXPANSION} nodes "
                            "(an alias bomb?); write the values out",
                            source,
                            line,
                        )
                    ]
                )
        else:
            continue
        if stack:
            parent_anchor, parent_size = stack[-1]
            stack[-1] = (parent_anchor, parent_size + size)


def parse_yaml(text: str, source: str) -> tuple[dict[str, Any], dict[PathKey, int]]:
    """Parse a spec document; returns the data and a path -> line map."""
    try:
        _check_shape(text, source)
        loader = CoreLoader(text)
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError([Problem("", f"malformed YAML: {reason}", source, line)]) from None
    if node is None or not isinstance(data, dict):
        kind = "empty" if node is None else type(data).__name__
        raise SpecError(
            [
                Problem(
                    "",
                    f"the spec must be a YAML mapping, got {kind}",
                    source,
                    node.start_mark.line + 1 if node is not None else None,
                )
            ]
        )
    lines: dict[PathKey, int] = {}
    dups: list[Problem] = []
    _map_lines(node, (), lines, dups, source)
    if dups:
        raise SpecError(dups)
    return data, lines


MAX_FILE_BYTES = 1 << 20  # a spec or profiles file; real ones are a few KiB


def read_small_text(path: Path) -> str:
    """A regular file's UTF-8 text, at most MAX_FILE_BYTES. Opened without blocking and
    judged by the opened file itself: a FIFO would hang the read, a device (/dev/zero)
    never ends. OSError or UnicodeDecodeError say why it cannot be read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file")
        data = handle.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise OSError(0, f"larger than {MAX_FILE_BYTES >> 20} MiB (a spec is a few KiB)")
    return data.decode("utf-8")
