"""Canonical answer tokens: answers compared on their words, numbers and dates by value.

:func:`answer_tokens` gives the tokens of the SQuAD normalisation
(:func:`~taskcal_agents.parsing._grading.normalize_answer`) with numbers and dates written
one way, so that answer clustering and argument grounding compare values, not spellings.

Canonical numbers and dates: "1,000" → "1000", "3.0" → "3", "3.50" → "3 point 5"; number
words → digits ("eight" → "8", "twenty-one" → "21", "five thousand seven hundred
seventy-eight" → "5778", "three point five" → "3 point 5"); ordinal suffixes dropped
("28th" → "28"); dates in day-month order ("December 14, 1983", "14th of Dec 1983" →
"14 december 1983"). Not handled: ordinal words ("first") and years read in pairs
("nineteen twenty-six").
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from taskcal_agents.parsing._grading import normalize_answer

# fmt: off
_SMALL_WORDS = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen",
)
_TENS_WORDS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_MONTHS = frozenset((
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
))
# fmt: on
_SMALL = {word: value for value, word in enumerate(_SMALL_WORDS)}
_TENS = {word: 10 * value for value, word in enumerate(_TENS_WORDS, start=2)}
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9}
_MONTH_ABBREVIATIONS = {
    "jan": "january",
    "feb": "february",
    "mar": "march",
    "apr": "april",
    "jun": "june",
    "jul": "july",
    "aug": "august",
    "sep": "september",
    "sept": "september",
    "oct": "october",
    "nov": "november",
    "dec": "december",
}
_DIGITS = re.compile(r"\d+(?:,\d{3})*(?!\d)(?:\.\d+)?")
_ORDINAL = re.compile(r"(\d+)(?:st|nd|rd|th)")


def _canonical_digits(match: re.Match[str]) -> str:
    text = match.group().replace(",", "")
    if "." not in text:
        return text
    whole, fraction = text.split(".")
    fraction = fraction.rstrip("0")
    return f"{whole} point {fraction}" if fraction else whole


def _below_hundred(tokens: Sequence[str], i: int) -> tuple[int, int] | None:
    token = tokens[i] if i < len(tokens) else None
    if token in _SMALL:
        return _SMALL[token], i + 1
    if token in _TENS:
        unit = _SMALL.get(tokens[i + 1], 0) if i + 1 < len(tokens) else 0
        if 1 <= unit <= 9:
            return _TENS[token] + unit, i + 2
        return _TENS[token], i + 1
    return None


def _below_thousand(tokens: Sequence[str], i: int) -> tuple[int, int] | None:
    first = _below_hundred(tokens, i)
    value, j = first if first is not None else (1, i)  # "a hundred" normalises to "hundred"
    if j < len(tokens) and tokens[j] == "hundred" and value >= 1:
        value, j = value * 100, j + 1
        k = j + 1 if j < len(tokens) and tokens[j] == "and" else j
        rest = _below_hundred(tokens, k)
        if rest is not None and rest[0] > 0:
            value, j = value + rest[0], rest[1]
        return value, j
    return first


def _read_number(tokens: Sequence[str], i: int) -> tuple[int, int] | None:
    """The value and end of the number-word run starting at ``tokens[i]``, or ``None``."""
    scaled = i + 1 < len(tokens) and tokens[i + 1] in _SCALES
    if i < len(tokens) and tokens[i].isdigit() and scaled and int(tokens[i]) < 1000:
        group: tuple[int, int] | None = (int(tokens[i]), i + 1)  # "5 million", "1.5 million"
    else:
        group = _below_thousand(tokens, i)
    if group is None and not (i < len(tokens) and tokens[i] in _SCALES):
        return None
    value, j = group if group is not None else (1, i)  # "a thousand"
    total, last_scale = 0, math.inf
    while j < len(tokens) and tokens[j] in _SCALES and _SCALES[tokens[j]] < last_scale:
        last_scale = _SCALES[tokens[j]]
        total, value, j = total + value * last_scale, 0, j + 1
        k = j + 1 if j < len(tokens) and tokens[j] == "and" else j
        following = _below_thousand(tokens, k)
        if following is None:
            break
        value, j = following
    return total + value, j


def _is_day(token: str) -> bool:
    return token.isdigit() and len(token) <= 2 and 1 <= int(token) <= 31


def _month_at(tokens: Sequence[str], i: int) -> bool:
    return i < len(tokens) and tokens[i] in _MONTHS


def _dates(tokens: list[str]) -> list[str]:
    """Expand month abbreviations next to a number; put day before month."""
    tokens = [
        _MONTH_ABBREVIATIONS[token]
        if token in _MONTH_ABBREVIATIONS
        and any(0 <= k < len(tokens) and tokens[k].isdigit() for k in (i - 1, i + 1))
        else token
        for i, token in enumerate(tokens)
    ]
    out: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if _is_day(token) and tokens[i + 1 : i + 2] == ["of"] and _month_at(tokens, i + 2):
            out += [token, tokens[i + 2]]  # "14 of december"
            i += 3
            continue
        if _month_at(tokens, i) and i + 1 < len(tokens) and _is_day(tokens[i + 1]):
            out += [tokens[i + 1], token]  # "december 14"
            i += 2
            continue
        out.append(token)
        i += 1
    return out


def answer_tokens(text: str) -> list[str]:
    """The tokens answers are compared on: normalised, numbers and dates canonical.

    Args:
        text: A raw answer (or question).

    Returns:
        The tokens of :func:`~taskcal_agents.parsing._grading.normalize_answer` with digit
        groups and decimals written canonically, ordinal suffixes dropped, number words as
        digits and dates in day-month order (see the module docstring); ``[]`` for text
        without words.
    """
    tokens = normalize_answer(_DIGITS.sub(_canonical_digits, text)).split()
    tokens = [match.group(1) if (match := _ORDINAL.fullmatch(token)) else token for token in tokens]
    words: list[str] = []
    i = 0
    while i < len(tokens):
        number = _read_number(tokens, i)
        if number is None:
            words.append(tokens[i])
            i += 1
        else:
            words.append(str(number[0]))
            i = number[1]
    return _dates(words)
