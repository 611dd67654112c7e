"""Asks of the BFCL corpus: a request with the phrase that carries one argument removed.

:func:`delete_argument` removes the phrase that carries one required argument's value
("... in Paris", "... for 3 nights"), as When2Call built its asks, when the value appears
once, inside a prepositional phrase or a short sentence of its own, and the rest still
reads as a sentence.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["delete_argument"]

_PREPOSITIONS = frozenset(
    [
        "in",
        "at",
        "for",
        "of",
        "from",
        "to",
        "on",
        "with",
        "by",
        "near",
        "about",
        "named",
        "called",
        "into",
        "between",
        "within",
        "under",
        "over",
        "per",
        "around",
        "using",
        "via",
        "during",
        "after",
        "before",
        "since",
        "until",
        "titled",
    ]
)
_DETERMINERS = frozenset(
    ["the", "a", "an", "my", "our", "your", "his", "her", "their", "this", "that"]
)
_JOINERS = frozenset(["and", "or", "but"]) | _PREPOSITIONS | _DETERMINERS
_QUOTES = "'\"`‘’“”"
_TOKEN = re.compile(r"\S+")


def _renderings(value: Any) -> list[str]:
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, int):
        return [str(value)]
    if isinstance(value, float):
        return [str(int(value)), str(value)] if value.is_integer() else [str(value)]
    if isinstance(value, str) and len(value.strip()) >= 2:
        return [value.strip()]
    return []


def _occurrences(question: str, texts: Sequence[str]) -> list[tuple[int, int]]:
    spans: set[tuple[int, int]] = set()
    for text in texts:
        pattern = rf"(?<![\w.]){re.escape(text)}(?![\w])"
        spans.update((m.start(), m.end()) for m in re.finditer(pattern, question, re.IGNORECASE))
    return sorted(spans)


def _word(token: str) -> str:
    return token.strip(_QUOTES + ",.;:!?()").lower()


def _tidy(text: str) -> str:
    text = re.sub(r"\s+", " ", text)
    text = re.sub(r"\s+([,.;:!?])", r"\1", text)
    text = re.sub(r"([,;:])(?=[.!?])", "", text)
    text = re.sub(r",\s*,", ",", text)
    text = re.sub(r"\(\s*\)", "", text)
    text = re.sub(r"^[\s,;:]+", "", text)
    text = re.sub(r"\s+", " ", text).strip()
    return text[:1].upper() + text[1:]


def _phrase(question: str, start: int, end: int, numeric: bool) -> tuple[int, int] | None:
    """The span of the prepositional phrase around ``question[start:end]``, or ``None``."""
    while start > 0 and question[start - 1] in _QUOTES + "$":
        start -= 1
    while end < len(question) and question[end] in _QUOTES + "%":
        end += 1
    state = re.match(r",\s*[A-Z]{2}\b", question[end:])  # "Portland, OR"
    if state:
        end += state.end()
    after = list(_TOKEN.finditer(question, end))
    if numeric and after:
        unit = after[0]
        word = _word(unit.group())
        is_unit = re.fullmatch(r"[a-z][\w/^°%-]*", word) is not None  # "nights", "m/s^2"
        if unit.start() == end + 1 and is_unit and word not in _JOINERS:
            end = unit.start() + len(unit.group().rstrip(",.;:!?)"))
    before = [m for m in _TOKEN.finditer(question[:start])]
    k = len(before) - 1
    while k >= 0 and _word(before[k].group()) in _DETERMINERS:
        k -= 1
    if k >= 0 and _word(before[k].group()) in _PREPOSITIONS:
        token = before[k].group()
        if token[-1:] in ",.;:!?(":  # the preposition ends a clause: not this phrase's
            return None
        return before[k].start(), end
    return None


def _sentence(question: str, start: int, end: int) -> tuple[int, int] | None:
    """The span of a short sentence holding the value, when another sentence remains."""
    bounds = [0, *[m.end() for m in re.finditer(r"[.!?](?:\s+|$)", question)]]
    if bounds[-1] != len(question):
        bounds.append(len(question))
    for lo, hi in itertools.pairwise(bounds):
        if lo <= start and end <= hi:
            words = question[lo:hi].split()
            rest = len(question[:lo].split()) + len(question[hi:].split())
            lead = " ".join(_word(w) for w in words[:2])
            asks = (
                question[lo:hi].rstrip().endswith("?")
                or _word(words[0]) in _REQUEST_WORDS
                or lead in _REQUEST_LEADS
            )
            if len(words) <= 10 and rest >= 4 and not asks:  # never the request itself
                return lo, hi
    return None


_REQUEST_WORDS = frozenset(
    [
        "find",
        "get",
        "check",
        "book",
        "search",
        "calculate",
        "show",
        "give",
        "tell",
        "list",
        "fetch",
        "retrieve",
        "provide",
        "help",
        "can",
        "could",
        "would",
        "will",
        "please",
        "make",
        "set",
        "play",
        "order",
        "send",
        "create",
        "update",
        "delete",
        "add",
        "use",
        "look",
        "buy",
        "rent",
        "reserve",
        "schedule",
    ]
)
_REQUEST_LEADS = frozenset(
    ["i need", "i want", "i would", "i'd like", "i'm looking", "we need", "we want"]
)
"""First words (or :data:`_REQUEST_LEADS`) of a sentence that asks for something: such a
sentence is never removed."""


_COPULAS = frozenset(["is", "are", "was", "were", "be", "been", "being"])
_CONTINUERS = (
    _PREPOSITIONS
    | _DETERMINERS
    | frozenset(
        [
            "and",
            "with",
            "please",
            "that",
            "which",
            "who",
            "where",
            "when",
            "if",
            "so",
            "then",
            "using",
            "today",
            "tomorrow",
            "tonight",
            "now",
            "yesterday",
            "right",
            "next",
            "last",
            "every",
            "again",
            "too",
            "also",
            "instead",
            "first",
        ]
    )
)
_RANGE = frozenset(
    ["and", "or", "to", "through", "till", "until", "vs", "versus", "-", "&", "x", "by", "times"]
)


_PARTICIPLES = frozenset(
    [
        "located",
        "based",
        "scheduled",
        "released",
        "born",
        "priced",
        "named",
        "called",
        "held",
        "set",
        "planned",
        "booked",
    ]
)
_STATE_WORDS = frozenset(
    [
        "currently",
        "now",
        "here",
        "there",
        "located",
        "based",
        "staying",
        "living",
        "going",
        "travelling",
        "traveling",
    ]
)


def _clause_words(question: str, span: tuple[int, int]) -> int:
    """Words left in the clause that held ``question[span]`` once it is cut out."""
    lo = max((m.end() for m in re.finditer(r"[.!?;](?:\s+|$)", question[: span[0]])), default=0)
    stop = re.search(r"[.!?;](?:\s+|$)", question[span[1] :])
    hi = span[1] + stop.start() if stop else len(question)
    return len((question[lo : span[0]] + " " + question[span[1] : hi]).split())


def _reads_on(
    question: str, span: tuple[int, int], numeric: bool, *, sentence: bool = False
) -> bool:
    """Whether the question still reads once ``question[span]`` is cut out.

    The phrase must not be half of a pair or range ("between Boston and ...", "from 1 to
    2", "of 100 and 120"), nor a modifier inside a noun phrase ("of human cell"), nor the
    complement of a copula ("the server is called X"); nor may a joining word be left
    dangling before a stop ("... and?").
    """
    if sentence:  # a whole sentence of its own goes cleanly
        return True
    before = question[: span[0]].split()
    after = question[span[1] :]
    nxt = after.split()[0] if after.split() else ""
    lead = _word(question[span[0] :].split()[0])
    if after[:1] not in ("", " ") and not re.match(r"[,.;:!?)]", after):
        return False
    if before and _word(before[-1]) in _COPULAS:
        return False
    if before and _word(before[-1]) in _JOINERS and re.match(r"\s*([,.;:!?]|$)", after):
        return False
    verb = before and (
        re.fullmatch(r"[a-z]{3,}ing", _word(before[-1])) or _word(before[-1]) in _PARTICIPLES
    )
    if re.match(r"\s*([,.;:!?]|$)", after) and verb:
        return False  # "... starting." / "... located.": a verb left without its phrase
    if before and _word(before[-1]) in _STATE_WORDS and re.match(r"\s*[,.;:!?]", after):
        return False  # "I'm currently in Chicago, and ..." -> "I'm currently, and ..."
    if not sentence and _clause_words(question, span) < 3:
        return False  # "I live in Berlin." -> "I live.": too little of the clause is left
    if nxt and not re.match(r"[,.;:!?)]", after.lstrip()):
        word = _word(nxt)
        if (lead in ("between", "from") or numeric) and word in _RANGE:
            return False
        later = after.split()[1:2]
        if word in ("and", "or") and later and re.match(r"['\"]?[A-Z0-9$]", later[0]):
            return False  # "in Paris and London": one of a pair of values
        if word.isalpha() and word not in _CONTINUERS and nxt[:1].islower():
            return False
        if lead == "between":
            return False
    return True


def delete_argument(
    question: str,
    function: Mapping[str, Any],
    answer: Mapping[str, Sequence[Any]],
    rng: random.Random,
) -> tuple[str, str, str] | None:
    """Remove the phrase that carries one required argument's value from *question*.

    A required parameter qualifies when one accepted value (a string of two or more
    characters, or a number) occurs exactly once in the question, inside a prepositional
    phrase ("in Paris", "for 3 nights", "named 'latte'") or a short sentence of its own
    ("My city is Berlin."), and when no accepted value of it is left after the removal and
    the rest still reads (:func:`_reads_on`: no dangling word, no half of a pair, enough of
    the clause left). A parameter that BFCL accepts the call without (an accepted value
    ``""``) never qualifies. One qualifying parameter is chosen with *rng*.

    Returns:
        ``(new question, parameter, removed phrase)``, or ``None`` when none qualifies.
    """
    params = function.get("parameters") or {}
    required = [p for p in params.get("required") or [] if p in answer]
    rng.shuffle(required)
    for param in required:
        if any(v in ("", None) for v in answer[param]):
            continue  # BFCL accepts the call without it: not a missing argument
        accepted = list(answer[param])
        texts = [t for v in accepted for t in _renderings(v)]
        if not texts:
            continue
        spans = _occurrences(question, texts)
        if len({s for s, _ in spans}) != 1:
            continue
        start, end = max(spans, key=lambda s: s[1] - s[0])
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in accepted)
        tries = [(_phrase(question, start, end, numeric), False)]
        tries.append((_sentence(question, start, end), True))
        span = next(
            (x for x, whole in tries if x and _reads_on(question, x, numeric, sentence=whole)),
            None,
        )
        if span is None:
            continue
        left, right = question[: span[0]], question[span[1] :]
        new = _tidy(left + " " + right)
        if _occurrences(new, texts) or len(new.split()) < 3:
            continue
        return new, param, question[span[0] : span[1]].strip()
    return None
