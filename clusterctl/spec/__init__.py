"""The job spec: models, presets, loading with line-accurate errors.

The names below load on first use (PEP 562): importing a light module of this package
(``clusterctl.spec.presets``) must not import pydantic, which ``clusterctl --help`` never needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clusterctl.spec.loader import LoadedSpec, load_spec, load_spec_text
    from clusterctl.spec.models import JobSpec

__all__ = ["JobSpec", "LoadedSpec", "load_spec", "load_spec_text"]
_HOME = {
    "JobSpec": "models",
    "LoadedSpec": "loader",
    "load_spec": "loader",
    "load_spec_text": "loader",
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
