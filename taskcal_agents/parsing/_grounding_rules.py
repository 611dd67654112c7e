"""The rules of argument grounding: how the conversation supports one argument value.

An argument value is checked by two ordered tuples of named rules. Each :class:`Rule`
either decides (returns a status and the ``how`` of
:class:`~taskcal_agents.parsing._grounding.ArgumentCheck`) or passes (``None``); the first
rule that decides wins:

- :data:`VALUE_RULES`, for any value against its schema property: a boolean, the schema's
  default or a "no preference" value it names, an optional argument's enum value are
  inferable; an enum value is stated by a form of its word ("add" for ``addition``); an
  identifier (an account number, an e-mail address, a URL, a path, an ID) is stated only
  where the text holds its whole value; a recipient or an address only by every one of its
  words (:data:`WORD_RULES`: no stem, qualifier or share of its words); a count of one is
  implied by "a" where the text states no other count; a list and an object are as
  supported as their least supported member; a number must be stated (also with a unit
  attached, in scientific notation, as a percentage for its fraction, or as an item of a
  bracketed list). A value no rule decides is checked as a string.
- :data:`STRING_RULES`, for a string against the conversation (the look-ups of
  :class:`~taskcal_agents.parsing._evidence.Evidence`): a date or clock time (a
  date-time by its date and its time of day, each as the text writes it; "07-10-2022"
  only with the year the text states), a value
  without words, the value's tokens as they stand, an alias, an acronym, a place with a
  short qualifier ("Orlando, FL"), the value's content tokens. A string no rule states is
  unsupported.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from taskcal_agents.parsing._answer_tokens import answer_tokens
from taskcal_agents.parsing._argument_kinds import identifier_shape
from taskcal_agents.parsing._evidence import MONTH_NAMES, STOPWORDS, Evidence, hour24

ArgumentStatus = Literal["stated", "inferable", "unsupported"]
"""How the conversation supports one argument value."""

Verdict = tuple[ArgumentStatus, str]
"""A rule's decision: the status and how it was decided (``ArgumentCheck.how``)."""

_ABSENT: Verdict = ("unsupported", "absent")

NAME_MARK = "x-taskcal-name"
"""The key under which the grounding context gives a value rule the argument's name."""

IDENTIFIER_MARK = "x-taskcal-identifier"
"""The key that marks a schema property as an identifier's (set by the grounding context
from the argument's kind, :func:`~taskcal_agents.parsing._argument_kinds.is_identifier`)."""

WORDS_MARK = "x-taskcal-words"
"""The key that marks a schema property whose string value must be stated word for word: a
recipient's or an address's (set by the grounding context from the argument's kind)."""

_ISO_DATE = re.compile(
    r"^\s*(\d{4})-(\d{1,2})-(\d{1,2})(?:[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?Z?)?\s*$"
)
_NUMERIC_DATE = re.compile(r"^\s*(\d{1,2})[/.](\d{1,2})(?:[/.](\d{2,4}))?\s*$")
_DASHED_DATE = re.compile(r"^\s*(\d{1,2})-(\d{1,2})-(\d{4})\s*$")
"""A date of numbers joined by hyphens, with its year ("07-10-2022"): without one, "7-10"
is as likely a range."""
_CLOCK = re.compile(r"^\s*(\d{1,2}):(\d{2})(?::\d{2})?\s*(am|pm)?\s*$", re.IGNORECASE)
_HOUR = re.compile(r"^\s*(\d{1,2})\s*(am|pm|a\.m\.|p\.m\.)\s*$", re.IGNORECASE)
_NAMED_DATE = re.compile(
    r"^\s*(?:[A-Za-z]+,?\s+)?(?:(\d{1,2})(?:st|nd|rd|th)?\s+([A-Za-z]+)|([A-Za-z]+)\s+"
    r"(\d{1,2})(?:st|nd|rd|th)?)(?:,?\s+(\d{4}))?\s*$"
)
_TIME_ZONE = re.compile(r"^\s*[A-Z][A-Za-z]+(?:/[A-Za-z_-]+){1,2}\s*$")
_COUNT_NAME = re.compile(
    r"(?:^|_)(?:quantity|qty|count|num|number|tickets?|seats?|rooms?|guests?|people|persons?|"
    r"passengers?|travell?ers?|adults?|copies|items?|units?|nights?|pieces?)(?:$|_)"
)
_ONE_WORD = re.compile(r"\b(?:a|an|one|single)\b")

_SENTINELS = frozenset(("any", "dontcare", "don't care", "all", "none", "n/a"))

_RANK: dict[str, int] = {"stated": 0, "inferable": 1, "unsupported": 2}


@dataclass(frozen=True)
class Rule:
    """One grounding rule: its name and the function that decides a value or passes.

    Attributes:
        name: What the rule checks.
        decide: Called with the evidence and the value (for a value rule also the
            schema property and whether the argument is required; for a string rule also
            the value's tokens); returns a :data:`Verdict`, or ``None`` to pass.
    """

    name: str
    decide: Callable[..., Verdict | None]


def _first(rules: Sequence[Rule], *args: Any) -> Verdict | None:
    """The verdict of the first rule that decides, ``None`` when all pass."""
    for rule in rules:
        verdict = rule.decide(*args)
        if verdict is not None:
            return verdict
    return None


def check_value(
    evidence: Evidence, value: Any, prop: Mapping[str, Any], *, required: bool
) -> Verdict:
    """How ``evidence`` supports a non-empty ``value`` of the schema property ``prop``.

    Applies :data:`VALUE_RULES` in order, then :func:`check_string` to ``str(value)``.
    """
    verdict = _first(VALUE_RULES, evidence, value, prop, required)
    return verdict if verdict is not None else check_string(evidence, str(value))


def check_string(evidence: Evidence, value: str) -> Verdict:
    """How ``evidence`` supports the string ``value``: :data:`STRING_RULES` in order."""
    verdict = _first(STRING_RULES, evidence, value, answer_tokens(value))
    return verdict if verdict is not None else _ABSENT


# ------------------------------------------------------------------------ value rules


def _boolean(
    evidence: Evidence, value: Any, prop: Mapping[str, Any], required: bool
) -> Verdict | None:
    """A boolean (or "true"/"false" for a boolean property) needs no statement."""
    if isinstance(value, bool) or (
        prop.get("type") == "boolean" and str(value).strip().lower() in ("true", "false")
    ):
        return "inferable", "boolean"
    return None


def _schema_default(
    evidence: Evidence, value: Any, prop: Mapping[str, Any], required: bool
) -> Verdict | None:
    """The schema's default needs no statement."""
    if "default" in prop and _same(value, prop["default"]):
        return "inferable", "default"
    return None


def _no_preference(
    evidence: Evidence, value: Any, prop: Mapping[str, Any], required: bool
) -> Verdict | None:
    """A "no preference" value the schema names (``'dontcare'``) counts as its default."""
    if isinstance(value, str) and _sentinel(value, prop):
        return "inferable", "default"
    return None


def _optional_enum(
    evidence: Evidence, value: Any, prop: Mapping[str, Any], required: bool
) -> Verdict | None:
    """An optional argument's enum value needs no statement."""
    enum = prop.get("enum")
    if isinstance(enum, list) and not required and any(_same(value, e) for e in enum):
        return "inferable", "enum"
    return None


def _whole_identifier(
    evidence: Evidence, value: Any, prop: Mapping[str, Any], required: bool
) -> Verdict | None:
    """An identifier is stated only as a whole.

    An account number, an e-mail address, a URL, a path or an ID (a property marked
    :data:`IDENTIFIER_MARK`, or any string of an identifier's shape, also inside a list or
    an object: :func:`~taskcal_agents.parsing._argument_kinds.identifier_shape`) is
    supported where the text holds all of it
    (:meth:`~taskcal_agents.parsing._evidence.Evidence.has_whole`), never by a token
    overlap or an alias.
    """
    if not isinstance(value, str):
        return None
    if not prop.get(IDENTIFIER_MARK) and identifier_shape(value) is None:
        return None
    return ("stated", "whole") if evidence.has_whole(value) else _ABSENT


def _whole_words(
    evidence: Evidence, value: Any, prop: Mapping[str, Any], required: bool
) -> Verdict | None:
    """A recipient or an address (a property marked :data:`WORDS_MARK`) is stated word for word.

    As written, by an alias, or each content word as a whole word of the text
    (:meth:`~taskcal_agents.parsing._evidence.Evidence.has_word`): no stem or longer word
    ("bills" states no "Bill"), no free qualifier after a comma ("12 Baker Street,
    Mallory Town"), no three words in four ("221 Baker Street Manchester").
    """
    if not isinstance(value, str) or not prop.get(WORDS_MARK):
        return None
    verdict = _first(WORD_RULES, evidence, value, answer_tokens(value))
    return verdict if verdict is not None else _ABSENT


def _each_item(
    evidence: Evidence, value: Any, prop: Mapping[str, Any], required: bool
) -> Verdict | None:
    """A list is as supported as its least supported non-empty item."""
    if not isinstance(value, list):
        return None
    items = _mapping(prop.get("items"))
    for mark in (IDENTIFIER_MARK, WORDS_MARK):
        if prop.get(mark):
            items = {**items, mark: True}
    results = [check_value(evidence, v, items, required=required) for v in value if not is_empty(v)]
    return _worst(results) if results else ("inferable", "empty")


def _each_field(
    evidence: Evidence, value: Any, prop: Mapping[str, Any], required: bool
) -> Verdict | None:
    """An object is as supported as its least supported non-empty field.

    A required object that leaves a field it requires empty is unsupported.
    """
    if not isinstance(value, Mapping):
        return None
    sub = _mapping(prop.get("properties"))
    inner = prop.get("required")
    inner = set(inner) if isinstance(inner, list) else set()
    if required and any(is_empty(value.get(k)) for k in inner):
        return "unsupported", "empty"  # a required field of a required object
    results = [
        check_value(evidence, v, _mapping(sub.get(k)), required=required and k in inner)
        for k, v in value.items()
        if not is_empty(v)
    ]
    return _worst(results) if results else ("inferable", "empty")


def _number(
    evidence: Evidence, value: Any, prop: Mapping[str, Any], required: bool
) -> Verdict | None:
    """A number is stated by value, else unsupported.

    As its tokens ("25", "twenty five"), or in a form they lose
    (:meth:`~taskcal_agents.parsing._evidence.Evidence.has_number`): a unit attached ("6cm"
    for 6), scientific notation ("1e-9"), a percentage for its fraction ("5%" for 0.05), an
    item of a bracketed list ("[200,300]" for 300).
    """
    if not isinstance(value, int | float):
        return None
    text = str(int(value)) if float(value).is_integer() else repr(float(value))
    tokens = answer_tokens(text)
    if (tokens and evidence.has_run(tokens)) or evidence.has_number(value):
        return "stated", "number"
    return _ABSENT


def _enum_word(
    evidence: Evidence, value: Any, prop: Mapping[str, Any], required: bool
) -> Verdict | None:
    """An enum value named by a form of its word.

    "add" for ``"addition"``, "adding" for ``"add"``, "sorted" for ``"SORT"``. Only for a
    value the schema lists (the call picks among its options), each of whose words of three
    letters or more is a form of a word of the text (:func:`_word_form`), and only when no
    other listed value is: a text that names two options names neither.
    """
    enum = prop.get("enum")
    if not isinstance(value, str) or not isinstance(enum, list):
        return None
    if not any(_same(value, e) for e in enum):
        return None
    named = [e for e in enum if isinstance(e, str) and _names_option(e, evidence.tokens)]
    if len(named) == 1 and _same(value, named[0]):
        return "stated", "enum_word"
    return None


def _names_option(option: str, tokens: frozenset[str]) -> bool:
    parts = re.split(r"[\s_/-]+|(?<=[a-z])(?=[A-Z])", option)
    words = [w.lower() for w in parts if len(w) >= 3]
    return bool(words) and all(_word_form(w, tokens) for w in words)


_FORM_ENDINGS = ("s", "es", "ed", "ing", "ion", "ions", "ition", "itions", "ation", "ations")
"""The endings that make one word a form of another ("adds", "added", "adding", "addition")."""


def _word_form(word: str, tokens: frozenset[str]) -> bool:
    """Whether a word of the text is ``word`` with one of :data:`_FORM_ENDINGS`, or the reverse.

    "adding" for "add", "add" for "addition", "running" for "run" (a doubled last consonant);
    three letters at least, never a stop word ("can" is no form of "cancel", "address" none
    of "add", "player" none of "play").
    """
    for t in tokens:
        if not t.isalpha() or t in STOPWORDS or len(t) < 3:
            continue
        short, long = (word, t) if len(word) <= len(t) else (t, word)
        if short == long:
            return True
        for base in (short, short + short[-1]):
            if long.startswith(base) and long[len(base) :] in _FORM_ENDINGS:
                return True
    return False


def _implied_one(
    evidence: Evidence, value: Any, prop: Mapping[str, Any], required: bool
) -> Verdict | None:
    """A count of one implied by "a", "an" or "single" ("book a room": ``rooms=1``).

    Only for an argument named as a count (``quantity``, ``tickets``, ``num_rooms``, ...)
    and only where the text states no other count (no number from 2 to 99).
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or value != 1:
        return None
    name = str(prop.get(NAME_MARK) or "").lower()
    if not _COUNT_NAME.search(name) or not _ONE_WORD.search(evidence.lower):
        return None
    if any(t.isdigit() and 2 <= int(t) <= 99 for t in evidence.tokens):
        return None
    return "inferable", "implied_one"


VALUE_RULES: tuple[Rule, ...] = (
    Rule("boolean", _boolean),
    Rule("schema_default", _schema_default),
    Rule("no_preference", _no_preference),
    Rule("optional_enum", _optional_enum),
    Rule("enum_word", _enum_word),
    Rule("whole_identifier", _whole_identifier),
    Rule("whole_words", _whole_words),
    Rule("implied_one", _implied_one),
    Rule("list", _each_item),
    Rule("object", _each_field),
    Rule("number", _number),
)
"""The rules for any value, in order; a value they pass is checked as a string."""


# ----------------------------------------------------------------------- string rules


def _date(evidence: Evidence, value: str, tokens: Sequence[str]) -> Verdict | None:
    """A date or clock value: stated by value, or inferable from a relative day."""
    iso = _ISO_DATE.match(value)
    numeric = (_NUMERIC_DATE.match(value) or _DASHED_DATE.match(value)) if iso is None else None
    clock = _CLOCK.match(value) if iso is None and numeric is None else None
    bare = _HOUR.match(value) if iso is None and numeric is None and clock is None else None
    if bare is not None:  # "3pm": a time of day, stated as "3 pm", "15:00" or "3:00 pm"
        h = hour24(int(bare.group(1)), bare.group(2).lower())
        return ("stated", "date") if (h, 0) in evidence.clock else _ABSENT
    if iso is None and numeric is None and clock is None:
        return _named_date(evidence, value)
    if iso is not None:
        return _iso_date(evidence, iso, tokens)
    if numeric is not None:
        first, second = int(numeric.group(1)), int(numeric.group(2))
        pairs = ((first, second), (second, first))
        if not any(1 <= m <= 12 and 1 <= d <= 31 for d, m in pairs):
            return None  # "12.50" is no date
        if evidence.has_run(tokens):
            return "stated", "date"  # "5/3/2024" written as it stands
        year = numeric.group(3)
        # 04/23/2023 (month first) or 23/04/2023 (day first), against "April 23"
        for day, month in ((second, first), (first, second)):
            if not (1 <= month <= 12 and 1 <= day <= 31):
                continue
            if year is None:
                if evidence.has_run([str(day), MONTH_NAMES[month - 1]]):
                    return "stated", "date"
                continue
            years = [int(year)] if len(year) == 4 else [2000 + int(year), 1900 + int(year)]
            if len(year) in (2, 4) and any(
                evidence.has_date(y, month, day) and not _other_year(evidence, y, month, day)
                for y in years
            ):
                return "stated", "date"
    elif clock is not None:
        # A time of day is stated or invented: "tonight" names no hour.
        hour, minute, half = clock.groups()
        hours = {hour24(int(hour), half)}
        if half is None and 1 <= int(hour) <= 11:
            hours.add(int(hour) + 12)  # "19:30" may be written "7:30"
        if any((h, int(minute)) in evidence.clock for h in hours):
            return "stated", "date"
        return _ABSENT
    if evidence.relative:
        return "inferable", "relative_date"
    return _ABSENT


def _iso_date(evidence: Evidence, iso: re.Match[str], tokens: Sequence[str]) -> Verdict | None:
    """An ISO date ("2024-05-19") or date-time ("2024-05-19 16:00", "2024-05-19T16:00:00").

    Stated as written, or by its date in any form the text writes it
    (:meth:`~taskcal_agents.parsing._evidence.Evidence.has_date`) and, for a date-time, its
    time of day as well ("16:00", "4 pm", "4:00 PM"): a date-time whose date alone is
    stated has an invented time. Inferable from a relative day ("tomorrow at 4 pm") only
    with its time stated. ``None`` for a value that is no date ("2024-13-40").
    """
    year, month, day = ymd = tuple(int(g) for g in iso.group(1, 2, 3))
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    if evidence.has_run(tokens):
        return "stated", "date"  # "2024-05-19 16:00" written as it stands
    hour, minute, second = iso.group(4, 5, 6)
    timed = hour is None or (
        int(second or 0) == 0 and (int(hour), int(minute)) in evidence.clock
    )  # the seconds too: "16:00" states no "16:00:30"
    if timed and evidence.has_date(year, month, day) and not _other_year(evidence, *ymd):
        return "stated", "date"
    if timed and evidence.relative:
        return "inferable", "relative_date"
    return _ABSENT


def _other_year(evidence: Evidence, year: int, month: int, day: int) -> bool:
    """Whether the text writes this day and month with a year, never with ``year``.

    "July 10, 2022" names 2022: a call's 2023-07-10 or 07-10-2023 is invented, though the
    day and month are stated. A day and month written without a year name none.
    """
    written = set(re.findall(rf" {day} {MONTH_NAMES[month - 1]} (\d{{4}}) ", evidence.norm))
    return bool(written) and str(year) not in written


def clock_time(value: Any) -> tuple[int, int] | None:
    """The time of day (hour, minute) of an ISO date-time value, else ``None``."""
    iso = _ISO_DATE.match(value) if isinstance(value, str) else None
    if iso is None or iso.group(4) is None:
        return None
    return int(iso.group(4)), int(iso.group(5))


def _named_date(evidence: Evidence, value: str) -> Verdict | None:
    """A date with its month named ("March 8, 2023"), stated in another form.

    "2023-03-08", "8 March", "3/8/2023"; ``None`` for a value that is no such date.
    """
    match = _NAMED_DATE.match(value)
    if match is None:
        return None
    day_s, month_s = (match.group(1), match.group(2)) if match.group(1) else (
        match.group(4), match.group(3))  # fmt: skip
    month_name = month_s.lower()
    months = [m for m in MONTH_NAMES if len(month_name) >= 3 and m.startswith(month_name)]
    day = int(day_s)
    if len(months) != 1 or not 1 <= day <= 31:
        return None
    month = MONTH_NAMES.index(months[0]) + 1
    year = match.group(5)
    forms = [[str(day), months[0]], [f"{month:02d}", f"{day:02d}"], [str(month), str(day)]]
    if year is not None:
        forms += [[year, f"{month:02d}", f"{day:02d}"], [year, str(month), str(day)]]
    if any(evidence.has_run(f) for f in forms):
        return "stated", "date"
    return ("inferable", "relative_date") if evidence.relative else _ABSENT


def _time_zone(evidence: Evidence, value: str, tokens: Sequence[str]) -> Verdict | None:
    """A time zone named by its city ("Asia/Tokyo", "America/New_York") with the city stated."""
    if not _TIME_ZONE.match(value):
        return None
    city = value.strip().rsplit("/", 1)[-1].replace("_", " ")
    verdict = check_string(evidence, city)
    return ("stated", "time_zone") if verdict[0] == "stated" else None


def _without_words(evidence: Evidence, value: str, tokens: Sequence[str]) -> Verdict | None:
    """A value without words ("$", "!!") is stated only as it stands in the text."""
    if tokens:
        return None
    if value.strip() and value.strip().lower() in evidence.lower:
        return "stated", "text"
    return _ABSENT


def _as_written(evidence: Evidence, value: str, tokens: Sequence[str]) -> Verdict | None:
    """The value's tokens stand in the text, in order."""
    return ("stated", "text") if evidence.has_run(tokens) else None


def _alias(evidence: Evidence, value: str, tokens: Sequence[str]) -> Verdict | None:
    """An alias ("NYC" for "New York") or a language's name for its code."""
    return ("stated", "alias") if evidence.has_alias(value) else None


def _acronym(evidence: Evidence, value: str, tokens: Sequence[str]) -> Verdict | None:
    """The initials of consecutive words ("US dollars" for USD)."""
    return ("stated", "acronym") if evidence.has_acronym(value) else None


def _qualified(evidence: Evidence, value: str, tokens: Sequence[str]) -> Verdict | None:
    """A place with qualifiers: the head stated, each other part stated or a qualifier.

    "Paris, France", "Orlando, FL": a short qualifier that follows the head may be the
    model's knowledge of where the head is.
    """
    parts = [p for p in re.split(r"\s*[,;]\s*", value) if p.strip()]
    if len(parts) < 2:
        return None
    head = check_string(evidence, parts[0])
    if head[0] == "stated" and all(
        check_string(evidence, p)[0] == "stated" or _qualifier(p) for p in parts[1:]
    ):
        return "stated", head[1]
    return None


def _content_tokens(evidence: Evidence, value: str, tokens: Sequence[str]) -> Verdict | None:
    """Every content token stated (itself, its stem, an alias), or 3 in 4 of a long one.

    A long query (four content tokens or more) may be the model's rephrasing.
    """
    content = [t for t in tokens if t not in STOPWORDS] or tokens
    hits = sum(evidence.has_token(t) for t in content)
    if hits == len(content):
        return "stated", "tokens"
    if len(content) >= 4 and hits >= 0.75 * len(content):
        return "stated", "tokens"  # a long query the model rephrased
    return None


def _every_word(evidence: Evidence, value: str, tokens: Sequence[str]) -> Verdict | None:
    """Every content token a whole word of the text, itself or an alias."""
    content = [t for t in tokens if t not in STOPWORDS] or tokens
    return ("stated", "tokens") if all(evidence.has_word(t) for t in content) else None


STRING_RULES: tuple[Rule, ...] = (
    Rule("date", _date),
    Rule("without_words", _without_words),
    Rule("as_written", _as_written),
    Rule("alias", _alias),
    Rule("acronym", _acronym),
    Rule("time_zone", _time_zone),
    Rule("qualified", _qualified),
    Rule("content_tokens", _content_tokens),
)
"""The rules for a string, in order; a string they all pass is unsupported."""

WORD_RULES: tuple[Rule, ...] = (
    Rule("without_words", _without_words),
    Rule("as_written", _as_written),
    Rule("alias", _alias),
    Rule("every_word", _every_word),
)
"""The rules for a recipient's or an address's string (:func:`_whole_words`), in order."""


# ------------------------------------------------------------------ a span's end time

_END_WORDS = frozenset(("end", "ends", "ending", "until", "till", "finish", "finishes"))
_START_WORDS = frozenset(("start", "starts", "starting", "begin", "begins", "from", "since"))


def _name_parts(name: str) -> list[str]:
    """A name's words, lower-cased: ``new_end_time`` and ``newEndTime`` → new, end, time."""
    return [p.lower() for p in re.split(r"[\W_]+|(?<=[a-z])(?=[A-Z])", name) if p]


def _without(parts: list[str], words: frozenset[str]) -> list[str] | None:
    """``parts`` less its one word from ``words``; ``None`` unless exactly one is there."""
    found = [i for i, p in enumerate(parts) if p in words]
    return parts[: found[0]] + parts[found[0] + 1 :] if len(found) == 1 else None


def span_start(name: str, names: Iterable[str]) -> str | None:
    """The argument among ``names`` that starts the span ``name`` ends, else ``None``.

    ``name`` must say end, until or finish (``end_time``, ``new_end_time``, ``endTime``,
    ``until``); its start is the one other name that says start, begin or from in its
    place and is otherwise the same (``start_time``, ``new_start_time``, ``startTime``,
    ``from``).
    """
    rest = _without(_name_parts(name), _END_WORDS)
    if rest is None:
        return None
    found = [n for n in names if n != name and _without(_name_parts(n), _START_WORDS) == rest]
    return found[0] if len(found) == 1 else None


def span_minutes(start: Any, end: Any) -> int | None:
    """The whole minutes from ``start`` to ``end``, ``None`` unless ``end`` comes later.

    Both ISO date-times with a time of day ("2024-05-19 16:00") or both times of day
    ("16:00", "4:30 pm"); a date alone or a mix gives ``None``.
    """
    moments = [_moment(v) for v in (start, end)]
    if moments[0] is None or moments[1] is None or moments[0][0] != moments[1][0]:
        return None
    minutes = moments[1][1] - moments[0][1]
    return minutes if minutes > 0 else None


def _moment(value: Any) -> tuple[str, int] | None:
    """A date-time or a time of day as (its kind, minutes since a fixed point), else ``None``."""
    if not isinstance(value, str):
        return None
    iso = _ISO_DATE.match(value)
    if iso is not None:
        if iso.group(4) is None or int(iso.group(6) or 0):
            return None
        year, month, day, hour, minute = (int(g) for g in iso.group(1, 2, 3, 4, 5))
        try:
            moment = datetime(year, month, day, hour, minute)  # naive: no time zone, no DST
        except ValueError:
            return None
        return "datetime", moment.toordinal() * 1440 + hour * 60 + minute
    clock = _CLOCK.match(value)
    if clock is None:
        return None
    half = clock.group(3).lower() if clock.group(3) else None
    hours, minutes = hour24(int(clock.group(1)), half), int(clock.group(2))
    if minutes > 59 or hours > 23:
        return None
    return "clock", hours * 60 + minutes


# ---------------------------------------------------------------------------- helpers


def is_empty(value: Any) -> bool:
    """None, "" or a list or object with nothing but empty members."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return True
    if isinstance(value, list):
        return all(is_empty(v) for v in value)
    if isinstance(value, dict):
        return all(is_empty(v) for v in value.values())
    return False


def _qualifier(part: str) -> bool:
    """A short place qualifier: "FL", "France", "United States"."""
    words = part.split()
    return 1 <= len(words) <= 3 and all(w[:1].isupper() for w in words)


def _sentinel(value: str, prop: Mapping[str, Any]) -> bool:
    """A "no preference" value the schema offers ("Use 'dontcare' if you have none")."""
    text = value.strip().lower()
    if text not in _SENTINELS:
        return False
    description = str(prop.get("description") or "").lower()
    return (
        f"'{text}'" in description
        or f'"{text}"' in description
        or text in [str(e).lower() for e in prop.get("enum") or []]
    )


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().lower() == b.strip().lower()
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


def _worst(results: Sequence[Verdict]) -> Verdict:
    return max(results, key=lambda r: _RANK[r[0]])
