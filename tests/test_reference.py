"""The spec reference (docs/reference.md) is generated from the models and must stay in step."""

from __future__ import annotations

import os

from clusterctl.spec.models import spec_json_schema
from clusterctl.spec.reference import END, START, reference_markdown
from tests.conftest import ROOT


def embedded() -> str:
    text = (ROOT / "docs" / "reference.md").read_text()
    return text.split(START, 1)[1].split(END, 1)[0].strip("\n")


def test_readme_reference_matches_the_models() -> None:
    generated = reference_markdown().strip("\n")
    if os.environ.get("UPDATE_GOLDEN") == "1":
        readme = ROOT / "docs" / "reference.md"
        head, rest = readme.read_text().split(START, 1)
        readme.write_text(f"{head}{START}\n{generated}\n{END}{rest.split(END, 1)[1]}")
    assert embedded() == generated, "docs/reference.md is stale: UPDATE_GOLDEN=1 pytest"


def test_reference_covers_every_schema_field() -> None:
    schema = spec_json_schema()
    text = embedded()
    for definition in schema["$defs"].values():
        for name in definition.get("properties", {}):
            assert f"| `{name}` |" in text, name
