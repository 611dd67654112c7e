"""Text of a completion: its content as a string, normalised for matching."""

from __future__ import annotations

import re

from langchain_core.messages import AIMessage

__all__ = [
    "message_text",
    "normalize_text",
]

# --------------------------------------------------------------------------- text helpers


def message_text(message: AIMessage) -> str:
    """Return the text of ``message`` (string content or its text blocks), stripped."""
    content = message.content
    if isinstance(content, str):
        return content.strip()
    return str(message.text).strip()


_WS = re.compile(r"\s+")
_EDGE_PUNCT = " \t\n\r.,;:!?\"'`*_-"


def normalize_text(text: str) -> str:
    """Lower-case, collapse whitespace and trim edge punctuation (for grouping samples)."""
    return _WS.sub(" ", text.lower()).strip(_EDGE_PUNCT)
