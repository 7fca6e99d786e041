"""The README and docs/: every relative link resolves, every #anchor names a heading."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as dashes."""
    found = set()
    in_code = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and (heading := re.match(r"^#{1,6} (.*)", line)):
            text = re.sub(r"[^\w\- ]", "", heading[1].strip().lower())
            found.add(text.replace(" ", "-"))
    return found


def links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return [t for t in LINK.findall(text) if not t.startswith(("http://", "https://"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_of_the_page_resolves(page: Path) -> None:
    for target in links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.exists(), f"{page.name}: {target} does not exist"
        if anchor:
            assert anchor in anchors(resolved), f"{page.name}: no heading #{anchor} in {path}"


def test_the_readme_opens_with_the_pitch_the_set_up_and_every_doc() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 250
    assert "## Set-up: two commands" in readme
    linked = {Path(t).name for t in links(ROOT / "README.md")}
    assert {p.name for p in PAGES[1:]} <= linked  # every page of docs/ is reachable
