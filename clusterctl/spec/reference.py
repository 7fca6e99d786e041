"""The spec reference in Markdown, generated from the models (docs/reference.md embeds it)."""

from __future__ import annotations

import json
import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from clusterctl.spec.models import JobSpec

START = "<!-- spec-reference:start -->"
END = "<!-- spec-reference:end -->"


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " \\| ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(a) for a in args if a is not type(None)]
        return " \\| ".join(dict.fromkeys(names)) + (" \\| null" if type(None) in args else "")
    if origin is list:
        return f"list[{_type_name(args[0])}]"
    if origin is dict:
        return f"map[{_type_name(args[0])}, {_type_name(args[1])}]"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation.__name__
    return getattr(annotation, "__name__", str(annotation))


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
        if isinstance(value, BaseModel):
            return "(section)"
        return f"`{json.dumps(value)}`"
    if info.default is PydanticUndefined:
        return "**required**"
    if info.default is None:
        desc = info.description or ""
        return "derived" if ("default from" in desc or "default per" in desc) else "unset"
    return f"`{json.dumps(info.default)}`"


def _models(model: type[BaseModel], path: str) -> list[tuple[str, type[BaseModel]]]:
    out = [(path, model)]
    for name, info in model.model_fields.items():
        for arg in [info.annotation, *typing.get_args(info.annotation)]:
            for inner in [arg, *typing.get_args(arg)]:
                if isinstance(inner, type) and issubclass(inner, BaseModel):
                    sub = f"{path}.{name}" if path else name
                    if inner.__name__.endswith("Workload"):
                        tag = typing.get_args(inner.model_fields["framework"].annotation)[0]
                        sub = f"workload (framework: {tag})"
                    if all(m is not inner for _, m in out):
                        out += _models(inner, sub)
    return out


def reference_markdown() -> str:
    """One table per section: key, type, default, meaning."""
    lines: list[str] = []
    for path, model in _models(JobSpec, "")[1:]:
        lines += [f"## `{path}`", ""]
        doc = (model.__doc__ or "").strip().splitlines()[0] if model.__doc__ else ""
        if doc and not doc.startswith("!!!"):
            lines += [doc, ""]
        lines += ["| key | type | default | meaning |", "|---|---|---|---|"]
        for name, info in model.model_fields.items():
            desc = (info.description or "").replace("|", "\\|")
            lines.append(
                f"| `{name}` | {_type_name(info.annotation)} | {_default(info)} | {desc} |"
            )
        lines.append("")
    return "\n".join(lines)
