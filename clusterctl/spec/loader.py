"""Read a YAML spec, apply ``--set`` overrides, validate, and map every problem to its line."""

from __future__ import annotations

import difflib
import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml
from pydantic import BaseModel, ValidationError

from clusterctl.errors import Problem, SpecError
from clusterctl.spec.consistency import check_consistency
from clusterctl.spec.messages import in_our_words
from clusterctl.spec.models import JobSpec
from clusterctl.spec.profiles import LoadedProfile, apply_profile, load_profile

PathKey = tuple[str | int, ...]

# Free-form mappings whose keys may themselves contain dots (Hydra overrides, env names).
_FREEFORM_KEYS = {"overrides", "args", "env", "nccl_env", "runtime_env"}

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


class _Loader(_BaseLoader):  # type: ignore[misc]
    """The safe loader with YAML 1.2 core-schema scalars."""

    yaml_implicit_resolvers: ClassVar[dict[str, list[tuple[str, re.Pattern[str]]]]] = (
        _core_schema_resolvers()
    )


@dataclass
class LoadedSpec:
    """A validated spec plus what is needed to point back into its source (and into the
    profile that filled some of its values)."""

    spec: JobSpec
    source: str
    lines: dict[PathKey, int] = field(default_factory=dict)
    profile: LoadedProfile | None = None

    def where(self, path: Sequence[str | int]) -> tuple[str, int | None]:
        """The file and line that define PATH: the spec's, or the profile's for a value only
        the profile gave."""
        return _where(self.source, self.lines, self.profile, path)

    def problem(self, path: Sequence[str | int], message: str) -> Problem:
        return Problem(format_path(path), message, *self.where(path))


def _where(
    source: str,
    lines: Mapping[PathKey, int],
    profile: LoadedProfile | None,
    path: Sequence[str | int],
) -> tuple[str, int | None]:
    key = tuple(path)
    while key:
        if key in lines:
            return source, lines[key]
        if profile is not None and key in profile.lines:
            return profile.source, profile.lines[key]
        key = key[:-1]
    return source, lines.get((), None)


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
    for event in yaml.parse(text, Loader=_Loader):
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
        loader = _Loader(text)
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


def _split_assignment(assignment: str) -> tuple[str, str]:
    if "=" not in assignment:
        raise SpecError([Problem("", f"--set {assignment!r}: expected KEY.PATH=VALUE", "--set")])
    key, _, value = assignment.partition("=")
    if not key.strip():
        raise SpecError([Problem("", f"--set {assignment!r}: empty key", "--set")])
    return key.strip(), value


def apply_overrides(data: dict[str, Any], assignments: Iterable[str]) -> list[PathKey]:
    """Apply ``a.b.c=value`` assignments in place; values are parsed as YAML scalars.

    Inside free-form mappings (Hydra overrides, args, env) the rest of the dotted path is one
    key, so ``workload.overrides.trainer.total_epochs=3`` sets the override
    ``trainer.total_epochs``.
    """
    touched: list[PathKey] = []
    for assignment in assignments:
        key, raw = _split_assignment(assignment)
        try:
            value = yaml.load(raw, Loader=_Loader) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        parts = key.split(".")
        node: dict[str, Any] = data
        path: list[str] = []
        while len(parts) > 1:
            if path and path[-1] in _FREEFORM_KEYS:
                break
            head = parts.pop(0)
            child = node.get(head)
            if child is None:
                child = node[head] = {}
            if not isinstance(child, dict):
                raise SpecError(
                    [Problem(format_path([*path, head]), f"--set {key}: not a mapping", "--set")]
                )
            node = child
            path.append(head)
        leaf = ".".join(parts)
        node[leaf] = value
        touched.append((*path, leaf))
    return touched


def _model_fields_at(path: Sequence[str | int], data: Any) -> list[str]:
    """Field names of the model that sits at ``path`` (for did-you-mean)."""
    model: Any = JobSpec
    node = data
    for part in path:
        if isinstance(part, int):
            node = node[part] if isinstance(node, list) and part < len(node) else None
            continue
        fields = getattr(model, "model_fields", None)
        info = fields.get(part) if isinstance(fields, dict) else None
        if info is None:
            return []
        node = node.get(part) if isinstance(node, dict) else None
        model = _unwrap_model(info.annotation, node)
    return (
        list(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []
    )


def _unwrap_model(annotation: Any, value: Any) -> Any:
    """Find the pydantic model inside Optional[...], list[...] or a tagged union."""
    args = getattr(annotation, "__args__", None)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if not args:
        metadata = getattr(annotation, "__metadata__", None)
        return _unwrap_model(annotation.__origin__, value) if metadata else None
    candidates = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
    if not candidates:
        for arg in args:
            found = _unwrap_model(arg, value)
            if found is not None:
                return found
        return None
    if len(candidates) > 1 and isinstance(value, dict):
        for cand in candidates:
            tag = cand.model_fields.get("framework")
            if tag is not None and value.get("framework") in getattr(
                tag.annotation, "__args__", ()
            ):
                return cand
    return candidates[0]


def _data_path(loc: Sequence[str | int], data: Any, missing: bool) -> list[str | int]:
    """Drop union/tag members from a pydantic ``loc``: keep only keys present in the data."""
    out: list[str | int] = []
    node = data
    tag_skipped = False
    for i, part in enumerate(loc):
        if (
            not tag_skipped
            and isinstance(node, dict)
            and part == node.get("framework")
            and i < len(loc) - 1
        ):
            tag_skipped = True
            continue  # the tag of the workload union, not a key
        in_dict = isinstance(node, dict) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if in_dict or in_list:
            out.append(part)
            node = node[part]
        elif missing and i == len(loc) - 1:
            out.append(part)
    return out


def _problems_from_validation(
    exc: ValidationError,
    data: dict[str, Any],
    lines: Mapping[PathKey, int],
    source: str,
    set_paths: Sequence[PathKey],
    profile: LoadedProfile | None = None,
) -> list[Problem]:
    by_path: dict[tuple[str | int, ...], Problem] = {}
    for err in exc.errors(include_url=False):
        kind = err["type"]
        path = tuple(_data_path(err["loc"], data, missing=kind == "missing"))
        if path in by_path:
            continue  # one message per field: a union reports once per member
        if kind == "extra_forbidden":
            name = str(path[-1]) if path else ""
            options = _model_fields_at(path[:-1], data)
            near = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
            hint = (
                f"; did you mean {near[0]!r}?"
                if near
                else (f"; known keys: {', '.join(options)}" if options else "")
            )
            message = f"unknown key{hint}"
        elif kind == "missing":
            message = "required field is missing"
        else:
            message = in_our_words(err)
            if "input" in err and not isinstance(err["input"], (dict, list)):
                shown = repr(err["input"])
                message += f" (got {shown[:60]}{'...' if len(shown) > 60 else ''})"
        where = ("--set", None) if path in set_paths else _where(source, lines, profile, path)
        by_path[path] = Problem(format_path(path), message, *where)
    return list(by_path.values())


# Control characters other than tab and newline: bash drops NUL from a word and docker would
# receive a different string; the others are invisible in a terminal and in logs.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _control_characters(node: Any, path: PathKey = ()) -> Iterator[tuple[PathKey, str]]:
    """(path, message) for every key or string value holding a control character."""
    if isinstance(node, dict):
        for key, value in node.items():
            child = (*path, key)
            if isinstance(key, str) and _CONTROL.search(key):
                yield child, "the key holds a control character"
            yield from _control_characters(value, child)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _control_characters(item, (*path, index))
    elif isinstance(node, str):
        found = _CONTROL.search(node)
        if found:
            yield path, f"control character U+{ord(found.group()):04X} in the value (refused)"


def load_spec_text(text: str, source: str = "<spec>", overrides: Iterable[str] = ()) -> LoadedSpec:
    """Validate spec text; raises SpecError listing every problem once."""
    data, lines = parse_yaml(text, source)
    profile = None
    if isinstance(data.get("profile"), str):
        profile = load_profile(data["profile"], source, lines.get(("profile",)))
        apply_profile(data, profile)
    set_paths = apply_overrides(data, overrides)
    control = [
        Problem(
            format_path(path),
            message,
            *(("--set", None) if path in set_paths else _where(source, lines, profile, path)),
        )
        for path, message in _control_characters(data)
    ]
    if control:
        raise SpecError(control)
    try:
        spec = JobSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(
            _problems_from_validation(exc, data, lines, source, set_paths, profile)
        ) from None
    loaded = LoadedSpec(spec=spec, source=source, lines=lines, profile=profile)
    problems = [loaded.problem(path, message) for path, message in check_consistency(spec)]
    if problems:
        raise SpecError(problems)
    return loaded


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


def load_spec(path: str | Path, overrides: Iterable[str] = ()) -> LoadedSpec:
    """Read and validate a spec file."""
    p = Path(path)
    try:
        text = read_small_text(p)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SpecError([Problem("", f"cannot read spec: {reason}", str(p))]) from None
    return load_spec_text(text, str(p), overrides)
