"""The evidence matcher of argument grounding: the conversation's text and its look-ups.

:class:`Evidence` indexes the text that counts as evidence (user, system and tool
messages) once per request: its canonical tokens
(:func:`~taskcal_agents.parsing._answer_clusters.answer_tokens`), their plural-free stems,
the words' initials, the times of day it states and whether the user's turns name a
relative day. Its
look-ups answer whether the text contains a run of tokens, a token (its stem or an
alias), a phrase, an alias or a language code of a value, or an acronym of
consecutive words. The rules that turn these answers into an argument's status are in
:mod:`taskcal_agents.parsing._grounding_rules`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from taskcal_agents.parsing._answer_tokens import answer_tokens
from taskcal_agents.parsing._grading import normalize_answer

# fmt: off
STOPWORDS = frozenset((
    "a", "an", "the", "of", "in", "on", "at", "for", "to", "and", "or", "is", "are", "be",
    "me", "my", "i", "you", "your", "please", "with", "by", "from", "it", "this", "that",
    "some", "any", "all", "can", "could", "would", "will", "do", "does", "what", "which",
    "us", "our", "we",
))
MONTH_NAMES = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
)
_RELATIVE_DAYS = frozenset((
    "today", "tonight", "tomorrow", "yesterday", "now", "weekend", "week",
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "morning",
    "evening", "afternoon", "night", "noon", "midnight",
))
# fmt: on

_ALIASES: dict[str, tuple[str, ...]] = {
    # places
    "nyc": ("new york",),
    "ny": ("new york",),
    "la": ("los angeles",),
    "sf": ("san francisco",),
    "dc": ("washington",),
    "uk": ("united kingdom", "britain", "england"),
    "usa": ("united states", "america"),
    "us": ("united states", "america"),
    "uae": ("emirates",),
    # currencies (ISO 4217 codes and the words and signs for them)
    "usd": ("dollar", "$"),
    "eur": ("euro", "€"),
    "gbp": ("pound", "sterling", "£"),
    "jpy": ("yen", "¥"),
    "cny": ("yuan", "renminbi"),
    "inr": ("rupee", "₹"),
    "chf": ("swiss franc",),
    "cad": ("canadian dollar",),
    "aud": ("australian dollar",),
}
"""Common abbreviations and codes, each with words that state it (either direction)."""

_LANGUAGE_CODES: dict[str, tuple[str, ...]] = {
    "en": ("english",),
    "it": ("italian",),
    "de": ("german", "deutsch"),
    "fr": ("french", "français"),
    "es": ("spanish", "español"),
    "pt": ("portuguese",),
    "nl": ("dutch",),
    "ru": ("russian",),
    "zh": ("chinese", "mandarin"),
    "ja": ("japanese",),
    "ko": ("korean",),
    "ar": ("arabic",),
    "hi": ("hindi",),
    "sv": ("swedish",),
    "pl": ("polish",),
    "tr": ("turkish",),
}
"""ISO 639-1 codes, each stated by the language's name; one direction only: a code in the
text ("de", "it", "hi") is too often a word to state a language named in a call."""

_US_STATES: dict[str, tuple[str, ...]] = {
    code: (name,)
    for code, name in (
        ("al", "alabama"), ("ak", "alaska"), ("az", "arizona"), ("ar", "arkansas"),
        ("ca", "california"), ("co", "colorado"), ("ct", "connecticut"), ("de", "delaware"),
        ("fl", "florida"), ("ga", "georgia"), ("hi", "hawaii"), ("id", "idaho"),
        ("il", "illinois"), ("in", "indiana"), ("ia", "iowa"), ("ks", "kansas"),
        ("ky", "kentucky"), ("la", "louisiana"), ("me", "maine"), ("md", "maryland"),
        ("ma", "massachusetts"), ("mi", "michigan"), ("mn", "minnesota"),
        ("ms", "mississippi"), ("mo", "missouri"), ("mt", "montana"), ("ne", "nebraska"),
        ("nv", "nevada"), ("nh", "new hampshire"), ("nj", "new jersey"),
        ("nm", "new mexico"), ("ny", "new york"), ("nc", "north carolina"),
        ("nd", "north dakota"), ("oh", "ohio"), ("ok", "oklahoma"), ("or", "oregon"),
        ("pa", "pennsylvania"), ("ri", "rhode island"), ("sc", "south carolina"),
        ("sd", "south dakota"), ("tn", "tennessee"), ("tx", "texas"), ("ut", "utah"),
        ("vt", "vermont"), ("va", "virginia"), ("wa", "washington"),
        ("wv", "west virginia"), ("wi", "wisconsin"), ("wy", "wyoming"),
        ("dc", "district of columbia"),
    )
}  # fmt: skip
"""US state codes, each stated by the state's name; one direction only, as language codes:
a code in the text ("in", "me", "or", "ok") is too often a word to state a state named in a
call."""

_WORD = re.compile(r"[A-Za-z][A-Za-z'’.-]*|\d+")
_NAMED_TIMES = {"noon": (12, 0), "midday": (12, 0), "midnight": (0, 0)}
_TIME_OF_DAY = re.compile(
    r"\b(\d{1,2})(?:[:.](\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)|\b(\d{1,2}):(\d{2})\b"
)
_PART_OF_DAY = re.compile(
    r"\b(?:at|around|about|by|for|until|till|from|to|before|after)\s+(\d{1,2})(?:[:.](\d{2}))?"
    r"\s+(?:o['’]?clock\s+)?(?:in\s+the\s+(morning|afternoon|evening)|at\s+(night))\b"
)
"""A time of day by the part of the day ("for 5 in the afternoon", "at 8 o'clock at night"),
the hour after a word that introduces a time ("March 5 in the afternoon" names no hour)."""


def stem(token: str) -> str:
    """A plural's singular, roughly: "cities" → "city", "boxes" → "box", "dates" → "date"."""
    if len(token) > 4 and token.endswith("ies"):
        return token[:-3] + "y"
    if len(token) > 4 and token.endswith(("ses", "xes", "zes", "ches", "shes")):
        return token[:-2]
    if len(token) > 3 and token.endswith("s") and not token.endswith(("ss", "us", "is")):
        return token[:-1]
    return token


def hour24(hour: int, half: str | None) -> int:
    """The hour on a 24-hour clock: ``hour`` with its "am" or "pm" (``None``: as it is)."""
    if half is None:
        return hour
    pm = half.startswith("p")
    return (hour % 12) + (12 if pm else 0)


class Evidence:
    """The text that one decision grounds in, indexed for the grounding rules' look-ups.

    Args:
        text: The conversation's evidence: the text of its user, system and tool messages.
        user: The part of ``text`` that the user's own turns wrote: the only words that
            name a relative day (:attr:`relative`). A tool result's "today" (an attacker
            may write it) or the system prompt's makes no date inferable.

    Attributes:
        lower: The text, lower-cased (for signs such as "$" and untokenised values).
        tokens: Its canonical tokens (:func:`answer_tokens`).
        relative: Whether the user's turns name a relative day ("tomorrow", "next Friday").
        clock: The times of day it states, as (hour 0-23, minute).
        durations: The lengths of time it states, in minutes ("1 hour long", "for one
            hour", "90 minutes", "an hour and a half", "1h30"; :func:`_durations`).
        numbers: The numbers it writes in forms its tokens lose (:func:`_numbers`): with a
            unit attached ("6cm"), in scientific notation ("1e-9"), as a percentage ("10%"
            also as 0.1), as the items of a bracketed list ("[200,300]").
    """

    __slots__ = (
        "_cased", "_flat", "_initials", "_norm", "_stems", "clock", "durations", "lower",
        "numbers", "relative", "tokens",
    )  # fmt: skip

    def __init__(self, text: str, *, user: str = "") -> None:
        self.lower = text.lower()
        tokens = answer_tokens(text)
        self._norm = " " + " ".join(tokens) + " "
        self.tokens = frozenset(tokens)
        self._stems = frozenset(stem(t) for t in tokens)
        self.relative = bool(set(answer_tokens(user)) & _RELATIVE_DAYS)
        self._initials = _WORD.findall(text)
        self.clock = _clock_times(self.lower)
        self.durations = _durations(self.lower, self._norm)
        self.numbers = _numbers(self.lower)
        self._flat = " ".join(self.lower.split())
        cased = " ".join(text.split())  # the case of each character of ``_flat``, where known
        self._cased = cased if cased.lower() == self._flat else None

    def has_whole(self, value: str) -> bool:
        """Whether the text holds all of ``value``, not inside a longer word or number.

        Case and runs of white space do not matter; nor does a web address's scheme or
        trailing slash ("https://www.x.com/" is held by "www.x.com"), nor the spaces and
        hyphens of a long number ("GB29 NWBK 6016" by "GB29NWBK6016").
        """
        form = " ".join(value.lower().split())
        forms = {form, _WEB_PREFIX.sub("", form).rstrip("/")} - {""}
        if any(_bounded(self._flat, f, self._cased) for f in forms):
            return True
        compact = _SEPARATORS.sub("", form)
        if 8 <= len(compact) <= 64 and sum(c.isdigit() for c in compact) >= 6:
            spaced = r"[\s-]?".join(re.escape(c) for c in compact)
            return re.search(rf"(?<![\w]){spaced}(?![\w])", self._flat) is not None
        return False

    def has_date(self, year: int, month: int, day: int) -> bool:
        """Whether the text states the date ``year``-``month``-``day`` (a valid month).

        With its year, in numbers, the day and month zero-padded or not, in any order of
        day and month ("2024-05-19", "2024-5-19", "19/05/2024", "05/19/2024"); without a
        year, by the month's name ("19 May", "May 19th"), as a day and a month without
        padding ("19 5", "5 19"), or as a padded pair joined by a slash ("05/19",
        "19/05") that is no part of a longer date. A padded pair alone is not enough:
        "16:05" is a time of day, not 16 May.
        """
        y, days, months = str(year), (str(day), f"{day:02d}"), (str(month), f"{month:02d}")
        for d in days:
            if self.has_run([d, MONTH_NAMES[month - 1]]):
                return True
            for m in months:
                if any(self.has_run(run) for run in ([y, m, d], [d, m, y], [m, d, y])):
                    return True
        if self.has_run([str(day), str(month)]) or self.has_run([str(month), str(day)]):
            return True
        pairs = ((f"0?{month}", f"0?{day}"), (f"0?{day}", f"0?{month}"))
        return any(
            re.search(rf"(?<![\d/]){a}/{b}(?!\d|/\d)", self._flat) is not None for a, b in pairs
        )

    def has_number(self, value: float) -> bool:
        """Whether the text writes the number ``value`` (its size: the sign is not read).

        In one of the forms of :attr:`numbers`; a number its tokens hold as it stands is
        :meth:`has_run`'s.
        """
        size = abs(float(value))
        return any(math.isclose(size, n, rel_tol=1e-9) for n in self.numbers)

    @property
    def norm(self) -> str:
        """The canonical tokens joined by spaces, with a space at each end."""
        return self._norm

    def has_run(self, tokens: Sequence[str]) -> bool:
        """Whether the text holds ``tokens`` as consecutive tokens."""
        return f" {' '.join(tokens)} " in self._norm

    def has_token(self, token: str) -> bool:
        """Whether the text states ``token``: itself, its stem or an alias.

        A longer word that merely begins with it does not ("everyone" states no "Eve");
        "euros" states "eur" as the code's alias.
        """
        if token in self.tokens or stem(token) in self._stems:
            return True
        if token in _ALIASES:
            return any(self.has_phrase(p) for p in _ALIASES[token])
        return False

    def has_word(self, token: str) -> bool:
        """Whether the text states ``token`` as a whole word: itself or an alias, no stem.

        For a recipient's or an address's words: "bills" states no "Bill".
        """
        if token in self.tokens:
            return True
        return token in _ALIASES and any(self.has_phrase(p) for p in _ALIASES[token])

    def has_phrase(self, phrase: str) -> bool:
        """Whether the text holds each word of ``phrase`` (a sign such as "$" as it stands)."""
        if not phrase.isalnum() and len(phrase) == 1:
            return phrase in self.lower
        tokens = answer_tokens(phrase)
        return bool(tokens) and all(t in self.tokens or stem(t) in self._stems for t in tokens)

    def has_alias(self, value: str) -> bool:
        """Whether the text states ``value`` by an alias or, for a code, what it names.

        A language code by the language's name; a US state's code (written in capitals,
        "CA") by the state's name ("California").
        """
        key = normalize_answer(value).replace(" ", "")
        codes = _LANGUAGE_CODES.get(key, ()) + (
            _US_STATES.get(key, ()) if value.strip().isupper() else ()  # "CA", not "ca"
        )
        words = _ALIASES.get(key, ()) + codes
        if any(self.has_phrase(p) for p in words):
            return True
        norm = normalize_answer(value)
        return any(norm in phrases and short in self.tokens for short, phrases in _ALIASES.items())

    def has_acronym(self, value: str) -> bool:
        """``value`` (2-5 capitals) spells the initials of consecutive words of the text.

        A word of at most three letters may give all its letters ("US dollars" for USD).
        """
        letters = value.strip()
        if not (2 <= len(letters) <= 5 and letters.isalpha() and letters.isupper()):
            return False
        target = letters.lower()
        words = [w.lower().strip(".'’-") for w in self._initials]
        return any(_spells(target, words, start) for start in range(len(words)))


_WEB_PREFIX = re.compile(r"^[a-z][a-z0-9+.-]*://")
_SEPARATORS = re.compile(r"[\s-]+")


_JOINERS = frozenset("._-+@/\\:")
"""Characters that join the parts of an identifier ("john.smith@x.com", "/home/alice/tmp")."""


def _bounded(text: str, value: str, cased: str | None = None) -> bool:
    """Whether ``value`` occurs in ``text`` as a whole identifier, not part of a longer one.

    Before it: no letter, digit or joining character (a URL's ``scheme://`` may precede
    it); after it: no letter or digit, and no joining character followed by one (a
    sentence's full stop may follow it; so may a URL's path when ``value`` is a web
    address). ``cased`` is ``text`` in its own case: a web or e-mail address may end at
    a full stop that starts the next sentence with no space ("www.x.com.They sent"), a
    capitalised word that a space or a punctuation mark ends; a lowercase or dotted
    continuation ("www.x.com.evil.io", "www.x.com.Evil.io") is a longer host.
    """
    web = "." in value and "@" not in value and value[:1].isalnum()
    start = text.find(value)
    while start >= 0:
        end = start + len(value)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        following = text[end + 1] if end + 1 < len(text) else " "
        scheme = text[max(0, start - 3) : start] == "://"
        open_before = not (before.isalnum() or before in _JOINERS) or (scheme and web)
        joined = after in _JOINERS and (following.isalnum() or following in "_/")
        if joined and after == "." and "." in value and cased is not None:
            joined = _SENTENCE.match(cased, end + 1) is None  # "www.x.com.They sent"
        open_after = not (after.isalnum() or after == "_") and (
            not joined or (web and after == "/")
        )
        if open_before and open_after:
            return True
        start = text.find(value, start + 1)
    return False


_SENTENCE = re.compile(r"[A-Z][a-z]+(?=[\s,;:!?])")
"""A sentence's first word: a capital, lowercase letters, then a space or a punctuation
mark (never a dot: "Evil.io" is a host's labels)."""


def _clock_times(lower: str) -> frozenset[tuple[int, int]]:
    """The times of day the text states, as (hour 0-23, minute).

    "7pm", "19:30", "7.30 am" ("7:30" also as 19:30), "noon", "midnight", "for 5 in the
    afternoon" (17:00), "at 10 in the morning", "at 1 at night" (01:00).
    """
    out = {time for word, time in _NAMED_TIMES.items() if re.search(rf"\b{word}\b", lower)}
    for m in _PART_OF_DAY.finditer(lower):
        hour, minute, part, night = int(m.group(1)), int(m.group(2) or 0), m.group(3), m.group(4)
        if 1 <= hour <= 12 and minute < 60:
            # "at night": 5 to 11 pm, then 12 (midnight) to 4 am
            am = part == "morning" or (night is not None and (hour == 12 or hour <= 4))
            out.add((hour24(hour, "am" if am else "pm"), minute))
    for m in _TIME_OF_DAY.finditer(lower):
        if m.group(3):
            out.add((hour24(int(m.group(1)), m.group(3)), int(m.group(2) or 0)))
        else:
            hour, minute = int(m.group(4)), int(m.group(5))
            out.add((hour, minute))
            if 1 <= hour <= 11:
                out.add((hour + 12, minute))
    return frozenset(out)


_UNITS = (
    "mm cm m km in ft yd mi mg g kg t lb lbs oz ml l hz khz mhz ghz ms s sec secs min mins "
    "h hr hrs kb mb gb tb w kw kwh v mah mph kmh"
)
_NUMBER = re.compile(
    r"(?<![\w.,:#/-])(\d+(?:\.\d+)?|\.\d+)(?![.,]\d)"
    rf"(?:e([-+]?\d{{1,3}})\b|(\s?(?:%|percent\b|per cent\b))|({'|'.join(_UNITS.split())})\b)?"
)
"""A number not inside a longer word, number or identifier ("1,000", "v1.2", "16:05",
"#2e8b57" and "3a616ae" are no such number), and what follows it: an exponent, a percent
sign or a unit of measure."""
_BRACKETED = re.compile(r"\[(\s*\d+(?:\.\d+)?(?:\s*,\s*\d+(?:\.\d+)?)+\s*)\]")
"""A bracketed list of numbers ("[200,300,400]"), whose commas separate items."""


def _numbers(lower: str) -> frozenset[float]:
    """The numbers a text writes in forms its tokens lose.

    With a unit of measure attached ("6cm" → 6, "5hz" → 5), in scientific notation ("1e-9"
    → 1e-09), as a percentage also as the fraction ("10%" → 0.1; 10 is a token), each item
    of a bracketed list ("[200,300,400]" → 200, 300 and 400, which the tokens join into one
    number; "[1,000]" stays a thousand). A number written alone is its tokens'
    (:meth:`Evidence.has_run`). No number is 0 or unbounded ("1e-400", "9e308").
    """
    out: set[float] = set()
    for m in _NUMBER.finditer(lower):
        number, exponent, percent, unit = m.groups()
        if exponent is not None:
            out.add(float(f"{number}e{exponent}"))
        elif percent is not None:
            out.add(float(number) / 100)
        elif unit is not None:
            out.add(float(number))
    for m in _BRACKETED.finditer(lower):
        items = [item.strip() for item in m.group(1).split(",")]
        spaced = re.search(r",\s", m.group(1)) is not None
        grouped = all(len(i) == 3 and i.isdigit() for i in items[1:]) and len(items[0]) <= 3
        if spaced or not grouped or (len(items) >= 3 and len(items[0]) == 3):
            out.update(float(item) for item in items)  # "[1,000]" is a thousand
    return frozenset(n for n in out if math.isfinite(n) and n != 0)


_HOURS = r"(?:hours?|hrs?)"
_MINUTES = r"(?:minutes?|mins?)"
_TOKEN_DURATION = re.compile(
    rf" (\d+) (?:and half {_HOURS}|{_HOURS} and half)(?= )"  # 2 and a half hours
    rf"| (\d+)(?: point (\d+))? (?:{_HOURS}|h)(?: (?:and )?(\d+) {_MINUTES})?(?= )"  # 1.5 hours
    rf"| (\d+) {_MINUTES}(?= )"  # 90 minutes
    rf"| (?<!\d )(half|quarter of|quarter) hour(?= )"  # half an hour, a quarter of an hour
)
"""Durations in the canonical tokens (numbers as digits, articles dropped)."""
_TEXT_DURATION = re.compile(
    r"(?<!half )(?<!of )\ban hour\b( and a half\b)?|\b(\d{1,2})h(\d{2})?\b|\b(\d{1,3})mins?\b"
)
"""Durations the tokens lose: "an hour" (the article is dropped), "1h30", "90min"."""


def _durations(lower: str, norm: str) -> frozenset[int]:
    """The lengths of time a text states, in whole minutes.

    ``lower`` is the text lower-cased, ``norm`` its canonical tokens joined by spaces (with
    a space at each end). "1 hour long", "for one hour", "4 hours", "1.5 hours", "2 hours
    30 minutes", "two and a half hours", "90 minutes", "half an hour", "an hour", "an hour
    and a half", "1h30"; each match is read whole ("2 hours 30 minutes" states no 30
    minutes, "an hour and a half" no hour). A time of day ("1:30") is no duration.
    """
    out: set[int] = set()
    for m in _TOKEN_DURATION.finditer(norm):
        and_half, hours, fraction, minutes, alone, part = m.groups()
        if and_half is not None:
            out.add(int(and_half) * 60 + 30)
        elif hours is not None:
            extra = float(f"0.{fraction}") * 60 if fraction is not None else 0.0
            if extra.is_integer():  # "1.33 hours" is no whole number of minutes
                out.add(int(hours) * 60 + int(extra) + int(minutes or 0))
        elif alone is not None:
            out.add(int(alone))
        elif part is not None:
            out.add(30 if part == "half" else 15)
    for m in _TEXT_DURATION.finditer(lower):
        half, hours, minutes, alone = m.groups()
        if m.group().startswith("an hour"):
            out.add(90 if half else 60)
        elif hours is not None:
            out.add(int(hours) * 60 + int(minutes or 0))
        elif alone is not None:
            out.add(int(alone))
    out.discard(0)
    return frozenset(out)


def _spells(target: str, words: Sequence[str], start: int) -> bool:
    pos, i = 0, start
    while pos < len(target):
        if i >= len(words) or not words[i]:
            return False
        word = words[i]
        if len(word) <= 3 and target.startswith(word, pos) and pos + len(word) <= len(target):
            pos += len(word)
        elif word[0] == target[pos]:
            pos += 1
        else:
            return False
        i += 1
    return i - start >= 2 or (len(words[start]) <= 3 and words[start] == target)
