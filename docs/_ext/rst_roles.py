"""A griffe extension for the docs build: Sphinx roles in docstrings read as inline code.

The docstrings are Google style but name other objects with Sphinx roles
(``:class:`~taskcal_agents.decision.Decision```), which Markdown shows verbatim. This
extension rewrites each role to an inline code span of its display text (the last
component under ``~``, the text before ``<target>`` when given) and turns a paragraph
ending in ``::`` before an indented block into one ending in ``:``. Only the rendered
site changes; the docstrings in the code stay as they are.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(
    r":(?:py:)?(?:func|meth|class|mod|attr|data|exc|obj|const|term|ref)"
    r":`(?P<tilde>~?)(?P<body>[^`]+)`"
)
_LITERAL_BLOCK = re.compile(r"(\S)::\n(\n[ \t]+\S)")


def _display(match: re.Match[str]) -> str:
    body = match.group("body").strip()
    explicit = re.fullmatch(r"(?P<text>.+?)\s*<(?P<target>[^>]+)>", body)
    if explicit:
        text = explicit.group("text")
    elif match.group("tilde"):
        text = body.rsplit(".", 1)[-1]
    else:
        text = body
    return f"`{text}`"


def rewrite(text: str) -> str:
    """Return ``text`` with Sphinx roles as inline code and ``::`` blocks introduced by ``:``."""
    return _LITERAL_BLOCK.sub(r"\1:\n\2", _ROLE.sub(_display, text))


class RstRoles(griffe.Extension):
    """Rewrite Sphinx roles in every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite the docstring of each object as it is loaded."""
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
