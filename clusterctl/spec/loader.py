"""Read a YAML spec, apply ``--set`` overrides, validate, and map every problem to its line."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from clusterctl.errors import Problem, SpecError
from clusterctl.spec.consistency import check_consistency
from clusterctl.spec.messages import in_our_words
from clusterctl.spec.models import JobSpec
from clusterctl.spec.profiles import LoadedProfile, apply_profile, load_profile
from clusterctl.spec.yamlfile import (
    CoreLoader,
    PathKey,
    format_path,
    parse_yaml,
    read_small_text,
)

# Free-form mappings whose keys may themselves contain dots (Hydra overrides, env names).
_FREEFORM_KEYS = {"overrides", "args", "env", "nccl_env", "runtime_env"}


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
            value = yaml.load(raw, Loader=CoreLoader) if raw.strip() else ""
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


def load_spec(path: str | Path, overrides: Iterable[str] = ()) -> LoadedSpec:
    """Read and validate a spec file."""
    p = Path(path)
    try:
        text = read_small_text(p)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SpecError([Problem("", f"cannot read spec: {reason}", str(p))]) from None
    return load_spec_text(text, str(p), overrides)
