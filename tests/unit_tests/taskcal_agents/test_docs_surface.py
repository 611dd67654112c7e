"""What the changelog, the README and the docs say about the size of the public surface is true.

The surface is counted as ``test_exports.py`` counts it (the unique names over every public
module's ``__all__``, plus the names a lazy ``__getattr__`` serves); every "N public names"
(or "N names in all") written in ``CHANGELOG.md``, ``README.md`` or ``docs/*.md`` must be
that number, so a new public name is caught in the prose as well as in ``SURFACE_SIZE``.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.unit_tests.taskcal_agents.test_exports import ROOT, _surface

_COUNT = re.compile(r"\b(?P<n>\d[\d,]*)\s+(?:public\s+names|names\s+in\s+all)\b")
"""A stated count: "140 public names", "140 names in all" (a line break may fall inside)."""


def _documents() -> list[Path]:
    return [ROOT / "CHANGELOG.md", ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _stated_counts(text: str) -> list[tuple[int, int]]:
    """``(line, count)`` of each public-name count stated in *text* (1-based lines)."""
    return [
        (text.count("\n", 0, m.start()) + 1, int(m["n"].replace(",", "")))
        for m in _COUNT.finditer(text)
    ]


def test_the_pattern_finds_the_stated_counts() -> None:
    text = (
        "users need: 1,040 public\nnames in all (367 names in 68 modules before); a public "
        "name.\nThe 12 names in all\n"
    )
    assert _stated_counts(text) == [(1, 1040), (3, 12)]


def test_the_changelog_states_the_count() -> None:
    """The changelog states the count (else a reworded sentence would go unchecked)."""
    assert _stated_counts((ROOT / "CHANGELOG.md").read_text(encoding="utf-8"))


def test_every_stated_count_of_public_names_is_the_surface_size() -> None:
    size = len(_surface())
    wrong = [
        f"{path.relative_to(ROOT)}:{line} says {count} public names"
        for path in _documents()
        for line, count in _stated_counts(path.read_text(encoding="utf-8"))
        if count != size
    ]
    assert not wrong, (
        f"The public surface holds {size} names (test_exports.py counts them), but "
        f"{'; '.join(wrong)}; write {size} there."
    )
