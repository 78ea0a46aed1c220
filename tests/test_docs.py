"""The front page stays a front page (≤ 150 lines), and every relative link in README.md, ARCHITECTURE.md and
docs/*.md points at a file that exists (sections that left the README are linked from it)."""

from __future__ import annotations

import re

import pytest

from helpers import ROOT

PAGES = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_readme_is_a_front_page():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    assert text.index("make quickstart") < text.index("##") and "make test" in text.split("##")[0]
    for moved in ("usage", "results", "measurements", "reliability", "troubleshooting"):
        assert f"(docs/{moved}.md)" in text, f"docs/{moved}.md (moved from the README) is not linked from it"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page):
    for target in LINK.findall(page.read_text()):
        if "://" not in target:
            assert (page.parent / target).exists(), f"{page.name}: link to {target} is broken"
