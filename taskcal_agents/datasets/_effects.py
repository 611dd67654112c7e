"""The written rule that labels a dataset tool's effect from its name and description.

BFCL's and When2Call's tools carry no annotations, so the effect-aware evaluation labels
each tool with :func:`effect_by_rule`: ``read`` (no side effect: lookups, searches,
computations), ``write`` (changes state, reversibly) or ``irreversible`` (payments,
bookings, deletions, messages sent to others). The rule was written, from the verb lists
below, before any evaluation under it, and is versioned (:data:`EFFECT_RULE_VERSION`): a
changed rule is a new version, never a silent edit.

The rule:

1. The words are those of the description's first sentence (a description says what the
   tool does, most often in its first verb), then the tool name's (split on ``.``, ``_``,
   ``-``, digits and camelCase), the last dotted segment first (``api.TokenApi.get_tokens``
   reads ``get tokens`` before ``api token api``). Each word is lowercased
   and its ``-ing``, ``-ed``, ``-es`` or ``-s`` ending dropped when the rest is a listed
   verb (``booking`` → ``book``, ``deletes`` → ``delete``).
2. The first word that is a listed verb decides: :data:`IRREVERSIBLE_VERBS` →
   ``irreversible``, :data:`WRITE_VERBS` → ``write``, :data:`READ_VERBS` → ``read``.
3. No listed verb anywhere: ``write``, the library's default for a tool whose effect
   nothing states.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "EFFECT_RULE_VERSION",
    "IRREVERSIBLE_VERBS",
    "READ_VERBS",
    "WRITE_VERBS",
    "effect_by_rule",
    "tool_effects_by_rule",
]

EFFECT_RULE_VERSION = 1
"""The version of the rule (bumped whenever a list or a step changes)."""


def _verbs(words: str) -> frozenset[str]:
    return frozenset(words.split())


IRREVERSIBLE_VERBS = _verbs(
    "send transfer pay wire purchase buy sell order book reserve cancel delete remove "
    "destroy drop erase purge wipe terminate kill revoke publish email mail message "
    "sms tweet donate withdraw deposit submit trade invest unsubscribe ban share "
    "notify invite refund charge checkout dispatch broadcast"
)
"""Verbs of a call that cannot be taken back: money moves, bookings, deletions, messages."""

WRITE_VERBS = _verbs(
    "create add update set edit modify change put patch post schedule register save "
    "insert upload install uninstall start stop enable disable toggle turn move rename "
    "copy assign log record mark rate like follow subscribe configure adjust play "
    "pause resume open close lock unlock write store apply activate deactivate archive "
    "upgrade restart launch mute unmute manage reset import attach link tag increase "
    "decrease replace clear upsert commit merge push deploy run execute trigger"
)
"""Verbs of a call that changes state that can be changed back."""

READ_VERBS = _verbs(
    "get find search list calculate calc compute retrieve fetch lookup look check "
    "convert estimate predict analyze analyse count query read show view display "
    "describe compare solve evaluate measure locate recommend suggest identify detect "
    "translate summarize summarise generate determine validate verify track monitor "
    "forecast explore browse download sort filter format parse extract return fit "
    "simulate sum multiply divide subtract derive integrate differentiate plot draw "
    "test inspect scan resolve classify rank score match map provide give tell"
)
"""Verbs of a call with no side effect: lookups, searches, computations."""

_ENDINGS = ("ing", "ed", "es", "s")


def _words(text: str) -> list[str]:
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)
    return [w.lower() for w in re.split(r"[^A-Za-z]+", text) if w]


def _verb(word: str) -> str | None:
    for listed in (IRREVERSIBLE_VERBS, WRITE_VERBS, READ_VERBS):
        if word in listed:
            return word
    for ending in _ENDINGS:
        if word.endswith(ending) and len(word) > len(ending) + 2:
            stem = word[: -len(ending)]
            for candidate in (stem, stem + "e"):
                if any(
                    candidate in listed for listed in (IRREVERSIBLE_VERBS, WRITE_VERBS, READ_VERBS)
                ):
                    return candidate
    return None


def effect_by_rule(name: str, description: str = "") -> str:
    """The effect the written rule gives a tool (see the module docstring).

    Args:
        name: The tool's name.
        description: The tool's description.

    Returns:
        ``"read"``, ``"write"`` or ``"irreversible"``.
    """
    segments = name.split(".")
    first_sentence = re.split(r"(?<=[.!?])\s", description.strip(), maxsplit=1)[0]
    words = _words(first_sentence) + _words(segments[-1]) + _words(" ".join(segments[:-1]))
    for word in words:
        verb = _verb(word)
        if verb is None:
            continue
        if verb in IRREVERSIBLE_VERBS:
            return "irreversible"
        return "write" if verb in WRITE_VERBS else "read"
    return "write"


def tool_effects_by_rule(tools: list[Mapping[str, Any]]) -> dict[str, str]:
    """:func:`effect_by_rule` for each OpenAI-style tool of a dataset item, by name."""
    out: dict[str, str] = {}
    for tool in tools:
        function = tool.get("function", tool)
        name = str(function.get("name", ""))
        out[name] = effect_by_rule(name, str(function.get("description") or ""))
    return out
