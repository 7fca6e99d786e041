"""Render a resolved spec into a bundle: job.sbatch, a Dockerfile, the resolved spec.

The names below load on first use (PEP 562), so that a light module of this package
(``clusterctl.render.templates``) does not import the spec models.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clusterctl.render.bundle import Bundle, render_bundle, write_bundle

__all__ = ["Bundle", "render_bundle", "write_bundle"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.bundle"), name)
