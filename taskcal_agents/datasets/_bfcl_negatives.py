"""No-fits of the BFCL corpus: the closest tools of other requests that cannot serve one.

:func:`hard_negatives` ranks the other requests' tool sets by TF-IDF closeness to a
request's words and keeps those that cannot serve it: no tool whose name shares a content
word with the right tool's, no tool whose text is close to the right tool's
(:data:`NEGATIVE_SIMILARITY_MAX`), no tool that answers anything (a web search, a
question-answering model). :func:`tool_text` gives the tools' words they are compared on.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from taskcal_agents.datasets._bfcl_source import Request

__all__ = ["NEGATIVE_SIMILARITY_MAX", "hard_negatives", "tool_text"]

NEGATIVE_SIMILARITY_MAX = 0.2
"""A hard negative's tools may not be closer than this (TF-IDF cosine) to the right tool."""


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
