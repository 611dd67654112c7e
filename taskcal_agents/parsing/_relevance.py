"""Evidence that no offered tool can serve a request, apart from "an argument is missing".

Three kinds, each a number in [0, 1] per request:

- **Lexical fit** (:func:`lexical_fit`): the share of the request's content words that the
  best-fitting tool's words hold: its name split into words, its description, its
  parameters' names and descriptions. Words are compared as the grounding compares them
  (:func:`~taskcal_agents.parsing._answer_clusters.answer_tokens`, plurals folded, stop words
  dropped). It reads only the request and the tools, so it is the same before any sample.
- **What the samples say** (:func:`sample_signals`): the share of samples that call a tool
  that was not offered, the share that refuse (parsed ``cannot_answer``), the share of plain
  text that neither calls nor parses, and the disagreement on which tool to call (one minus
  the modal tool's share of the calls, 0 with fewer than two calls).
- **Agreement on the call** (``call_agreement``): the share of samples that make the modal
  call, the same tools with the same normalised arguments
  (:func:`~taskcal_agents.parsing._grounding.call_agreement`). Not a relevance signal but the
  samples' evidence for calling: a model that fills the arguments the same way each time
  knows what to call. On the BFCL development split it lowered the cross-fitted cost of the
  logistic calibrator from 0.516 to 0.475 (Qwen2.5-Coder-0.5B, 219 items; paired saving
  0.041 ± 0.035, within noise). A call that repeats one already made and answered counts
  here as a call (it is unparsed in p̂), at run time and in evaluation alike.

:func:`relevance_features` puts them in one fixed order, :data:`RELEVANCE_FEATURES`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage

from taskcal_agents.parsing._answer_tokens import answer_tokens
from taskcal_agents.parsing._evidence import STOPWORDS as _GROUNDING_STOPWORDS
from taskcal_agents.parsing._evidence import stem
from taskcal_agents.parsing._tool_calls import extract_tool_calls

__all__ = [
    "RELEVANCE_FEATURES",
    "SAMPLE_SIGNALS",
    "lexical_fit",
    "relevance_features",
    "sample_signals",
]

SAMPLE_SIGNALS = ("unoffered_share", "refusal_share", "text_share", "tool_disagreement")
"""What :func:`sample_signals` returns, in order."""

RELEVANCE_FEATURES = (
    "lexical_fit",
    "unoffered_share",
    "refusal_share",
    "text_share",
    "tool_disagreement",
    "call_agreement",
)
"""The relevance features, in the order :func:`relevance_features` returns them."""

_STOPWORDS = _GROUNDING_STOPWORDS | frozenset(
    [
        "get",
        "find",
        "give",
        "tell",
        "want",
        "need",
        "like",
        "help",
        "know",
        "show",
        "also",
        "just",
        "about",
        "how",
        "there",
        "then",
        "than",
        "if",
        "so",
        "am",
        "was",
        "were",
        "have",
        "has",
        "had",
        "not",
        "no",
        "yes",
        "hi",
        "hello",
        "hey",
        "let",
        "make",
        "use",
        "using",
        "one",
        "up",
        "out",
        "into",
        "its",
        "their",
        "them",
    ]
)
"""The grounding's stop words, and the verbs and fillers of a request that name no tool."""


def _content_words(text: str) -> set[str]:
    words = re.sub(r"([a-z])([A-Z])", r"\1 \2", re.sub(r"[._]", " ", text))
    return {
        stem(t)
        for t in answer_tokens(words)
        if t not in _STOPWORDS and not t.isdigit() and len(t) > 1
    }


def _function(tool: Any) -> Mapping[str, Any]:
    if isinstance(tool, Mapping):
        inner = tool.get("function")
        return inner if isinstance(inner, Mapping) else tool
    name = getattr(tool, "name", None)
    return {"name": name or "", "description": getattr(tool, "description", "") or ""}


def _tool_words(tool: Any) -> set[str]:
    function = _function(tool)
    parts = [str(function.get("name") or ""), str(function.get("description") or "")]
    props = (function.get("parameters") or {}).get("properties") or {}
    if isinstance(props, Mapping):
        for name, prop in props.items():
            parts.append(str(name))
            if isinstance(prop, Mapping):
                parts.append(str(prop.get("description") or ""))
    return _content_words(" ".join(parts))


def lexical_fit(request: str, tools: Iterable[Any]) -> float:
    """The share of the request's content words found in the best-fitting tool's words.

    Args:
        request: The user's words (the conversation's user turns).
        tools: OpenAI tool schemas, bare function blocks or LangChain tools.

    Returns:
        A share in [0, 1]; 0 when no tool is offered or the request has no content word.
    """
    words = _content_words(request)
    if not words:
        return 0.0
    return max((len(words & _tool_words(t)) / len(words) for t in tools), default=0.0)


def sample_signals(
    messages: Sequence[AIMessage],
    labels: Sequence[str | None],
    tool_names: Iterable[str],
    *,
    refusal_label: str = "cannot_answer",
) -> dict[str, float]:
    """What the samples say about the offered tools' fit.

    Args:
        messages: The sampled completions.
        labels: Their parsed labels (``None``: unparsed), as the task's parser gave them.
        tool_names: The offered tools' names.
        refusal_label: The label of a refusal.

    Returns:
        ``unoffered_share``, ``refusal_share``, ``text_share`` and ``tool_disagreement``,
        each in [0, 1] (all 0 without samples).
    """
    n = len(messages)
    if n == 0:
        return dict.fromkeys(SAMPLE_SIGNALS, 0.0)
    offered = set(tool_names)
    called: list[str] = []
    unoffered = text = 0
    for message, label in zip(messages, labels, strict=True):
        names = [str(c.get("name") or "") for c in extract_tool_calls(message)]
        names += [str(c.get("name") or "") for c in message.invalid_tool_calls]
        if names:
            called.append(names[0])
            unoffered += any(name not in offered for name in names)
        elif label is None:
            text += 1
    modal = Counter(called).most_common(1)[0][1] if len(called) >= 2 else len(called)
    return {
        "unoffered_share": unoffered / n,
        "refusal_share": sum(label == refusal_label for label in labels) / n,
        "text_share": text / n,
        "tool_disagreement": 1.0 - modal / len(called) if len(called) >= 2 else 0.0,
    }


def relevance_features(
    request: str,
    tools: Sequence[Any],
    messages: Sequence[AIMessage],
    labels: Sequence[str | None],
    *,
    refusal_label: str = "cannot_answer",
    modal_calls: int,
) -> tuple[float, ...]:
    """:data:`RELEVANCE_FEATURES` for one request and its samples.

    Args:
        request: The user's words.
        tools: The offered tools.
        messages: The sampled completions.
        labels: Their parsed labels.
        refusal_label: The label of a refusal.
        modal_calls: How many samples make the modal call
            (:func:`~taskcal_agents.parsing._grounding.call_agreement` of their groundings).

    Returns:
        The six features, in :data:`RELEVANCE_FEATURES` order.
    """
    if not 0 <= modal_calls <= len(messages):
        msg = f"modal_calls must lie in [0, {len(messages)}] (the samples), got {modal_calls!r}."
        raise ValueError(msg)
    names = [str(_function(t).get("name") or "") for t in tools]
    signals = sample_signals(messages, labels, names, refusal_label=refusal_label)
    agreement = modal_calls / len(messages) if messages else 0.0
    return (lexical_fit(request, tools), *(signals[k] for k in SAMPLE_SIGNALS), agreement)
