"""The Jinja environment: strict about undefined names, one quoting filter for shell values."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import jinja2

from clusterctl.render.shell import shell_quote


def templates_dir() -> Path:
    """templates/ ships inside the wheel as clusterctl/templates; a checkout has it at the top."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "templates", package.parent / "templates"):
        if (candidate / "job.sbatch.j2").is_file():
            return candidate
    raise FileNotFoundError("clusterctl templates not found (broken install?)")


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        # bash uses ${#array[@]}: move Jinja comments out of its way.
        comment_start_string="{#%",
        comment_end_string="%#}",
    )
    env.filters["q"] = shell_quote
    return env


def render_template(name: str, **context: object) -> str:
    return environment().get_template(name).render(**context)
