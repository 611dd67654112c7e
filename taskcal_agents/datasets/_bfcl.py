"""A tool-decision corpus built from the data the PyPI package ``bfcl-eval`` ships.

BFCL (the Berkeley Function Calling Leaderboard, Apache-2.0) pairs requests with the tools
that serve them and the calls that would be right. Three of its categories are read —
``simple_python``, ``multiple`` and ``live_multiple`` (:data:`BFCL_CATEGORIES`) — and never
the ones kept for independent evaluation (:data:`RESERVED_CATEGORIES`). Each request
becomes one item of one label:

``tool_call``
    the request as it is, with its own tools (``meta["possible_answer"]``: BFCL's accepted
    calls);
``request_for_info``
    the request with the phrase that carries one required argument's value removed
    ("... in Paris", "... for 3 nights"), as When2Call built its asks; the argument's name
    is ``meta["held_out_param"]``. A request qualifies only when the value appears once,
    inside a prepositional phrase or a short sentence of its own, and the rest still reads
    as a sentence (:func:`delete_argument`);
``cannot_answer``
    the request with the tools of another request that are closest to it in words (TF-IDF)
    yet cannot serve it: no tool whose name shares a content word with the right tool's,
    no tool whose text is close to the right tool's, no tool that answers anything (a web
    search, a question-answering model); one tool set serves at most
    :data:`TOOL_SET_USES` no-fits (hard negatives, :func:`hard_negatives`).

The requests are de-duplicated on their text and split once by :data:`CORPUS_SEED` into
``train``, ``dev`` and ``test`` (``meta["split"]``), near-duplicates together and each
category in the same shares. Within each split and category each request plays one role at
most: the asks are dealt first, in a seeded order, to the requests with a qualifying phrase,
then calls and no-fits in turn (a no-fit takes tools of its own split), an item whose words
repeat another's is dropped, and each label is cut to the least frequent one's count. Within
a split the labels are interleaved, so any prefix is balanced.

The source is the ``bfcl_eval`` wheel itself (``pip download --no-deps
bfcl-eval==2026.3.23``; its bytes are read, never installed or imported, and a pinned
version's SHA-256 is checked) or an unpacked ``bfcl_eval/data`` folder.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import zipfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from taskcal_agents._files import sha256_file
from taskcal_agents.datasets._format import DatasetItem
from taskcal_agents.datasets._tools import bfcl_tool
from taskcal_agents.errors import ConfigurationError, DataFileError

BFCL_CATEGORIES = ("simple_python", "multiple", "live_multiple")
"""The categories the corpus reads."""

RESERVED_CATEGORIES = ("live_simple", "irrelevance", "live_irrelevance")
"""Categories kept for independent evaluation: never read."""

BFCL_WHEELS = {
    "bfcl_eval-2026.3.23-py3-none-any.whl": (
        "3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a"
    ),
}
"""Pinned ``bfcl-eval`` wheels: file name → SHA-256."""

CORPUS_SEED = 20261203
"""The seed of the role deal and of the split, fixed before any fitting."""

SPLITS = ("train", "dev", "test")
SPLIT_SHARES = {"test": 0.36, "dev": 0.16}
"""Shares of each label's items in the locked test split and the development split; the
rest is ``train``."""

NEGATIVE_SIMILARITY_MAX = 0.2
"""A hard negative's tools may not be closer than this (TF-IDF cosine) to the right tool."""

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


# --------------------------------------------------------------------------------------
# reading the source


def _member_name(category: str, answers: bool) -> re.Pattern[str]:
    folder = "possible_answer/" if answers else "(?<!possible_answer/)"
    return re.compile(rf"(?:^|/){folder}BFCL_v\d+_{re.escape(category)}\.json$")


def _read_members(source: Path) -> dict[tuple[str, bool], tuple[str, str]]:
    """``(category, answers?) -> (name, text)`` for the categories read, from a wheel or folder."""
    wanted = {(c, a): _member_name(c, a) for c in BFCL_CATEGORIES for a in (False, True)}
    found: dict[tuple[str, bool], tuple[str, str]] = {}
    if source.is_dir():
        wheels = sorted(source.glob("bfcl_eval-*.whl"))
        if wheels:
            return _read_members(wheels[-1])
        for path in sorted(source.rglob("BFCL_v*.json")):
            rel = path.relative_to(source).as_posix()
            for key, pattern in wanted.items():
                if pattern.search(rel):
                    found[key] = (rel, path.read_text(encoding="utf-8"))
    else:
        pinned = BFCL_WHEELS.get(source.name)
        if pinned is None:
            msg = (
                f"not a pinned bfcl-eval wheel ({', '.join(BFCL_WHEELS)}): give one of them "
                "(pip download --no-deps bfcl-eval==2026.3.23) or an unpacked bfcl_eval/data "
                "folder."
            )
            raise DataFileError(msg, path=str(source))
        digest = sha256_file(source)
        if digest != pinned:
            msg = f"SHA-256 {digest} does not match the pinned {pinned}: a changed or broken file."
            raise DataFileError(msg, path=str(source))
        try:
            with zipfile.ZipFile(source) as archive:
                for name in archive.namelist():
                    for key, pattern in wanted.items():
                        if pattern.search(name):
                            found[key] = (name, archive.read(name).decode("utf-8"))
        except zipfile.BadZipFile as exc:
            msg = f"not a wheel (zip): {exc}."
            raise DataFileError(msg, path=str(source)) from exc
    missing = sorted(
        {f"{c}{' answers' if a else ''}" for (c, a) in wanted}
        - {f"{c}{' answers' if a else ''}" for (c, a) in found}
    )
    if missing:
        msg = f"BFCL files missing from the source: {', '.join(missing)}."
        raise DataFileError(msg, path=str(source))
    return found


def _jsonl(name: str, text: str) -> list[dict[str, Any]]:
    rows = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            msg = f"line is not valid JSON: {exc.msg}."
            raise DataFileError(msg, path=name, line=lineno) from exc
    return rows


@dataclass
class Request:
    """One usable BFCL request: a single user message, one right call among its tools."""

    id: str
    category: str
    question: str
    functions: list[dict[str, Any]]
    """The offered tools in BFCL's dialect."""
    answer: dict[str, dict[str, list[Any]]]
    """BFCL's possible answer: ``{function: {param: [accepted values]}}``."""
    text: str = ""
    """The tools' words: names, descriptions, parameter names and descriptions."""
    deletion: tuple[str, str, str] | None = field(default=None)
    """``(question without the phrase, deleted parameter, phrase)`` when one qualifies."""

    @property
    def function(self) -> str:
        return next(iter(self.answer))


def read_requests(source: Path) -> list[Request]:
    """The usable requests of :data:`BFCL_CATEGORIES`, in category then file order."""
    members = _read_members(source)
    requests: list[Request] = []
    for category in BFCL_CATEGORIES:
        q_name, q_text = members[category, False]
        a_name, a_text = members[category, True]
        answers = {row.get("id"): row.get("ground_truth") for row in _jsonl(a_name, a_text)}
        for row in _jsonl(q_name, q_text):
            turns, functions, truth = (
                row.get("question"),
                row.get("function"),
                answers.get(row.get("id")),
            )
            if not (isinstance(turns, list) and len(turns) == 1 and isinstance(truth, list)):
                continue
            messages = turns[0]
            if len(messages) != 1 or messages[0].get("role") != "user" or len(truth) != 1:
                continue
            answer = truth[0]
            names = {f.get("name") for f in functions or []}
            if not isinstance(answer, dict) or len(answer) != 1 or next(iter(answer)) not in names:
                continue
            question = str(messages[0].get("content") or "").strip()
            if question:
                offered = list(functions or [])
                requests.append(Request(str(row["id"]), category, question, offered, answer))
    return requests


# --------------------------------------------------------------------------------------
# asks: the phrase that carries a required argument's value removed


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


# --------------------------------------------------------------------------------------
# no tool fits: the closest tools that cannot serve the request


def _words_of(name: str) -> str:
    return re.sub(r"([a-z])([A-Z])", r"\1 \2", re.sub(r"[._]", " ", name))


def tool_text(functions: Sequence[Mapping[str, Any]]) -> str:
    """Names, descriptions and parameter names and descriptions of *functions*, as words."""
    parts: list[str] = []
    for function in functions:
        parts += [_words_of(str(function.get("name", ""))), str(function.get("description", ""))]
        props = (function.get("parameters") or {}).get("properties") or {}
        for name, prop in props.items():
            parts += [
                _words_of(name),
                str(prop.get("description", "")) if isinstance(prop, dict) else "",
            ]
    return " ".join(parts)


_GENERIC_NAME_WORDS = frozenset(
    [
        "get",
        "find",
        "search",
        "list",
        "calculate",
        "calc",
        "retrieve",
        "fetch",
        "api",
        "info",
        "details",
        "data",
        "query",
        "lookup",
        "check",
        "create",
        "update",
        "delete",
        "add",
        "set",
        "book",
        "buy",
        "make",
    ]
)


def _name_words(name: str) -> set[str]:
    """The content words of a tool name ("Movies_1_FindMovies" -> {"movies"})."""
    words = re.findall(r"[a-z]+", _words_of(name).lower())
    return {w.rstrip("s") for w in words if len(w) >= 4 and w not in _GENERIC_NAME_WORDS}


_GENERIC_TOOL_WORDS = frozenset(
    [
        "search",
        "query",
        "web",
        "engine",
        "llm",
        "wqa",
        "hna",
        "qa",
        "general",
        "google",
        "bing",
        "ask",
        "tool",
        "news",
        "advice",
    ]
)


def _generic(name: str) -> bool:
    """Whether a tool could serve nearly any request.

    A web search or a question-answering model: "HNA_WQA.search", "web_search",
    "multilingual_llm".
    """
    words = set(re.findall(r"[a-z]+", _words_of(name).lower()))
    return bool(words & {"web", "llm", "wqa", "engine"}) or words <= _GENERIC_TOOL_WORDS


def hard_negatives(
    requests: Sequence[Request], split_of: Sequence[str] | None = None
) -> list[list[tuple[int, float]]]:
    """Per request, the other requests' tool sets that cannot serve it, closest first.

    A tool set qualifies when it comes from the same category, has no tool whose name
    shares a content word with the right one's ("weather", "movies", "case"; not "get",
    "find", ...), no generic tool (a web search, a question-answering model) and no tool
    within
    :data:`NEGATIVE_SIMILARITY_MAX` of the right tool's words; with *split_of*, only from
    the request's own split. Each entry is ``(index, cosine of the request to the tools'
    words)``; at most 20 per request.
    """
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer(stop_words="english", sublinear_tf=True, min_df=1)
    tool_sets = [tool_text(r.functions) for r in requests]
    vectorizer.fit(tool_sets + [r.question for r in requests])
    sets = vectorizer.transform(tool_sets)
    asks = vectorizer.transform([r.question for r in requests])
    singles: list[Any] = []
    owner: list[int] = []
    for i, r in enumerate(requests):
        for function in r.functions:
            singles.append(tool_text([function]))
            owner.append(i)
    single_vectors = vectorizer.transform(singles)
    right = vectorizer.transform(
        [tool_text([f for f in r.functions if f.get("name") == r.function]) for r in requests]
    )
    close = (right @ single_vectors.T).toarray()
    fit = (asks @ sets.T).toarray()
    out: list[list[tuple[int, float]]] = []
    for i, r in enumerate(requests):
        blocked = {
            owner[j] for j in range(close.shape[1]) if close[i, j] >= NEGATIVE_SIMILARITY_MAX
        }
        name = _name_words(r.function)
        ranked = sorted(range(len(requests)), key=lambda j: -fit[i, j])
        out.append(
            [
                (j, float(fit[i, j]))
                for j in ranked
                if j != i
                and j not in blocked
                and fit[i, j] > 0
                and requests[j].category == r.category
                and (split_of is None or split_of[j] == split_of[i])
                and all(
                    not name & _name_words(str(f.get("name", ""))) for f in requests[j].functions
                )
                and not any(_generic(str(f.get("name", ""))) for f in requests[j].functions)
            ][:20]
        )
    return out


# --------------------------------------------------------------------------------------
# the corpus


def _tools(functions: Sequence[Mapping[str, Any]], source: str) -> list[dict[str, Any]]:
    return [bfcl_tool(dict(f), path=Path(source), line=0) for f in functions]


TOOL_SET_USES = 3
"""The most no-fit items one tool set (the same tool names) is offered in."""

NEAR_DUPLICATE = 0.8
"""Requests whose words are this close (TF-IDF cosine) share a split."""


def _near_duplicate_groups(requests: Sequence[Request]) -> list[int]:
    """A group id per request: near-duplicates (:data:`NEAR_DUPLICATE`) share one."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectors = TfidfVectorizer(sublinear_tf=True).fit_transform([r.question for r in requests])
    close = (vectors @ vectors.T).toarray() >= NEAR_DUPLICATE
    parent = list(range(len(requests)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in zip(*np.nonzero(np.triu(close, 1)), strict=True):
        parent[root(int(a))] = root(int(b))
    return [root(i) for i in range(len(requests))]


def _assign_splits(requests: Sequence[Request], rng: random.Random) -> list[str]:
    """A split per request: whole near-duplicate groups, in shares per category.

    A group goes whole to one split, even when its members are of several categories.
    """
    groups = _near_duplicate_groups(requests)
    everyone: dict[int, list[int]] = {}
    for i, g in enumerate(groups):
        everyone.setdefault(g, []).append(i)
    split_of = [""] * len(requests)
    targets = {"test": SPLIT_SHARES["test"], "dev": SPLIT_SHARES["dev"]}
    targets["train"] = 1.0 - sum(targets.values())
    for category in BFCL_CATEGORIES:
        keys = sorted({groups[i] for i, r in enumerate(requests) if r.category == category})
        rng.shuffle(keys)
        total = sum(r.category == category for r in requests)
        count = dict.fromkeys(SPLITS, 0)
        for i, r in enumerate(requests):
            if r.category == category and split_of[i]:  # placed with an earlier category
                count[split_of[i]] += 1
        for key in keys:  # each group to the split furthest below its share
            if split_of[everyone[key][0]]:
                continue
            split = max(SPLITS, key=lambda s: targets[s] * total - count[s])
            for i in everyone[key]:
                split_of[i] = split
                count[split] += requests[i].category == category
    return split_of


def build_corpus(source: Path, seed: int = CORPUS_SEED) -> list[DatasetItem]:
    """The whole corpus: every item with ``meta["split"]``, splits in :data:`SPLITS` order.

    Requests are split first, near-duplicates together and each category in the same
    shares; then, within each split and category, the roles are dealt (asks first to the
    requests with a removable phrase, then calls and no-fits in turn, a no-fit taking the
    closest unused tool set of its own split), and each label is cut to the least
    frequent one's count, so every split holds each label alike within each category.
    """
    requests = read_requests(source)
    seen: set[str] = set()
    unique = []
    for r in requests:
        key = re.sub(r"\W+", " ", r.question.lower()).strip()
        if key not in seen:
            seen.add(key)
            unique.append(r)
    rng = random.Random(seed)
    for r in unique:
        r.text = tool_text(r.functions)
        function = next(f for f in r.functions if f.get("name") == r.function)
        r.deletion = delete_argument(r.question, function, r.answer[r.function], rng)
    split_of = _assign_splits(unique, rng)
    negatives = hard_negatives(unique, split_of)
    order = list(range(len(unique)))
    rng.shuffle(order)
    labels = ("tool_call", "request_for_info", "cannot_answer")
    used_sets: Counter[str] = Counter()
    texts: set[str] = set()
    items: list[DatasetItem] = []
    for split in SPLITS:
        per_label: dict[str, list[DatasetItem]] = {k: [] for k in labels}
        for category in BFCL_CATEGORIES:
            mine = [i for i in order if unique[i].category == category and split_of[i] == split]
            eligible = [i for i in mine if unique[i].deletion is not None]
            size = min(len(eligible), len(mine) // 3)
            asks = eligible[:size]
            rest = [i for i in mine if i not in set(asks)]
            roles = [(i, "request_for_info") for i in asks]
            roles += [(i, labels[0] if n % 2 == 0 else labels[2]) for n, i in enumerate(rest)]
            made: dict[str, list[DatasetItem]] = {k: [] for k in labels}
            for i, label in roles:
                item = _item(unique, i, label, negatives[i], split_of, used_sets, source)
                if item is None:
                    continue
                text = re.sub(r"\W+", " ", item.messages[0]["content"].lower()).strip()
                if text in texts:  # the same words as an item already made
                    _release(item, used_sets)
                    continue
                texts.add(text)
                made[label].append(item)
            least = min(len(v) for v in made.values())
            for label in labels:
                per_label[label] += made[label][:least]
                for item in made[label][least:]:  # cut: free its words and its tool set
                    texts.discard(re.sub(r"\W+", " ", item.messages[0]["content"].lower()).strip())
                    _release(item, used_sets)
        for k in range(max(len(v) for v in per_label.values())):
            for label in labels:
                if k < len(per_label[label]):
                    item = per_label[label][k]
                    items.append(item.model_copy(update={"meta": {**item.meta, "split": split}}))
    return items


def _tool_set_key(names: Iterable[str]) -> str:
    return json.dumps(sorted(names))


def _release(item: DatasetItem, used_sets: Counter[str]) -> None:
    """Give back the tool-set use of a no-fit item that is not kept."""
    if item.label == "cannot_answer":
        used_sets[_tool_set_key(t["function"]["name"] for t in item.tools)] -= 1


def _item(
    unique: Sequence[Request],
    i: int,
    label: str,
    negatives: Sequence[tuple[int, float]],
    split_of: Sequence[str],
    used_sets: Counter[str],
    source: Path,
) -> DatasetItem | None:
    """Request *i* in the role *label*, or ``None`` when it cannot play it."""
    r = unique[i]
    meta: dict[str, Any] = {"source": "bfcl", "bfcl_id": r.id, "category": r.category}
    if label == "tool_call":
        question, functions = r.question, r.functions
        meta["possible_answer"] = r.answer
        meta["target_tool"] = r.function
    elif label == "request_for_info":
        assert r.deletion is not None
        question, functions = r.deletion[0], r.functions
        meta.update(held_out_param=r.deletion[1], removed=r.deletion[2], target_tool=r.function)
    else:
        for j, _ in negatives:
            key = _tool_set_key(str(f.get("name")) for f in unique[j].functions)
            if split_of[j] == split_of[i] and used_sets[key] < TOOL_SET_USES:
                used_sets[key] += 1
                break
        else:  # no unused hard negative of its split left: the request plays no role
            return None
        question, functions = r.question, unique[j].functions
        meta.update(tools_from=unique[j].id, right_tool=r.function)
    return DatasetItem(
        id=f"bfcl-{label}-{r.id}",
        messages=[{"role": "user", "content": question}],
        tools=_tools(functions, str(source)),
        label=label,
        meta=meta,
    )


def convert_bfcl(source: Path, split: str | None = None) -> list[DatasetItem]:
    """The BFCL tool-decision corpus (see the module docstring), or one split of it.

    Args:
        source: The ``bfcl_eval`` wheel, a folder holding it, or an unpacked
            ``bfcl_eval/data`` folder.
        split: ``train``, ``dev`` or ``test``; ``None`` keeps all (each item's
            ``meta["split"]`` says which).

    Raises:
        ConfigurationError: Unknown split.
        DataFileError: The source is missing, unpinned, changed or malformed.
    """
    if split is not None and split not in SPLITS:
        msg = f"split must be one of {list(SPLITS)} or None, got {split!r}."
        raise ConfigurationError(msg)
    items = build_corpus(source)
    return [i for i in items if split is None or i.meta["split"] == split]
