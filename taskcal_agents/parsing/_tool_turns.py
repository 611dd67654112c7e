"""The turn after a tool result: which calls are answered, and what the user is told.

A decision taken right after a tool result differs from one on a user turn: the usual
right move is to answer from the result, and a model that does not take the result in
re-emits the call it already made (``get_weather('Paris')`` again and again). The front
doors (:class:`~taskcal_agents.langchain.TaskCalibrationMiddleware`,
:class:`~taskcal_agents.langchain.TaskCalibratedRunnable`, the LangGraph example) use
these helpers, so the rule lives in one place:

* :func:`is_tool_result_turn`: the last message is a tool result (decide with
  :func:`taskcal_agents.decision.after_tool_result_for` the task, which keeps its trust
  policy);
* :func:`answered_tool_calls` and :func:`is_repeat_call`: a sampled call identical to one
  already made and answered in the current user turn is a *repeat*, never new evidence
  for calling and never executed again (see :meth:`Decider.decide
  <taskcal_agents.decision.Decider.decide>`); a later user turn may ask for it again;
* :func:`tool_result_reply`: the message that tells the user what the tools returned,
  when no sampled answer exists or a limit stopped the run; never an empty message;
* :func:`unusable_reply`: why the model's own reply right after a tool result cannot be
  shown as the answer (a repeated call, a call written as text, an empty or off-topic
  message).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from taskcal_agents.parsing._text import message_text
from taskcal_agents.parsing._tool_calls import (
    canonical_tool_calls,
    extract_tool_calls,
    has_written_call,
)

__all__ = [
    "answered_tool_calls",
    "call_text",
    "is_repeat_call",
    "is_tool_result_turn",
    "last_tool_results",
    "tool_result_reply",
    "unusable_reply",
]

_MAX_RESULT_CHARS = 500
"""Tool results longer than this are cut in :func:`tool_result_reply`."""


def is_tool_result_turn(messages: Sequence[BaseMessage]) -> bool:
    """Whether the last message is a tool result (the model is about to act on it)."""
    return bool(messages) and isinstance(messages[-1], ToolMessage)


def answered_tool_calls(messages: Sequence[BaseMessage]) -> frozenset[str]:
    """The calls made and answered in the current user turn, each as its canonical key.

    The current user turn is everything after the last ``HumanMessage`` (the whole
    conversation when there is none): a call answered in an earlier turn is not a repeat
    when the user asks for it again ("check the Paris weather again"), so it does not
    count. A call is answered when a ``ToolMessage`` with its ``tool_call_id`` follows
    in that turn; its key is :func:`~taskcal_agents.parsing._tool_calls.canonical_tool_calls` of
    the one call (name plus sorted-key JSON arguments), so argument order does not
    matter.

    Args:
        messages: The conversation.

    Returns:
        The keys (empty when no call was answered in the current turn, e.g. when the
        last message is the user's).
    """
    start = 0
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            start = i + 1
            break
    turn = messages[start:]
    answered = {m.tool_call_id for m in turn if isinstance(m, ToolMessage)}
    if not answered:
        return frozenset()
    return frozenset(
        canonical_tool_calls([call])
        for m in turn
        if isinstance(m, AIMessage)
        for call in m.tool_calls
        if call.get("id") in answered
    )


def is_repeat_call(message: AIMessage, answered: Collection[str]) -> bool:
    """Whether ``message`` makes a call already made and answered in this user turn.

    One such call is enough: executing the message would run that call again. Calls are
    those of :func:`~taskcal_agents.parsing.extract_tool_calls` (native or written in
    the content).

    Args:
        message: A sampled completion.
        answered: Keys from :func:`answered_tool_calls`.
    """
    if not answered:
        return False
    return any(canonical_tool_calls([call]) in answered for call in extract_tool_calls(message))


def call_text(call: Mapping[str, Any]) -> str:
    """A tool call as the user reads it: ``get_weather(city='Paris')``."""
    args = ", ".join(f"{k}={v!r}" for k, v in (call.get("args") or {}).items())
    return f"{call['name']}({args})"


def last_tool_results(messages: Sequence[BaseMessage]) -> list[tuple[str, str]]:
    """The tool results at the end of ``messages``, as ``(call, result text)`` pairs.

    ``call`` is written ``name(arg=value, …)`` when the call that asked for the result
    is in the conversation, else the tool message's ``name`` (or ``"tool"``).
    """
    tail = _tail_results(messages)
    if not tail:
        return []
    calls = _calls_by_id(messages)
    out = []
    for result in tail:
        call = calls.get(result.tool_call_id)
        described = call_text(call) if call is not None else result.name or "tool"
        text = message_text(result).strip()  # type: ignore[arg-type]  # same content shape
        if len(text) > _MAX_RESULT_CHARS:
            text = text[:_MAX_RESULT_CHARS] + "…"
        out.append((described, text or "(empty result)"))
    return out


def _tail_results(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    """The tool messages at the end of ``messages``, in order."""
    tail: list[ToolMessage] = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        tail.append(message)
    return tail[::-1]


def _calls_by_id(messages: Sequence[BaseMessage]) -> dict[Any, Any]:
    """The tool calls the AI messages of ``messages`` made, by call id."""
    return {
        call.get("id"): call for m in messages if isinstance(m, AIMessage) for call in m.tool_calls
    }


def tool_result_reply(messages: Sequence[BaseMessage], *, stopped: str | None = None) -> AIMessage:
    """A message for the user reporting the last tool results, never empty.

    Used when the run must end without a sampled answer: the decision after a tool
    result is to answer but no sample wrote one (for example every sample repeated the
    call), or a limit stopped the run (``stopped`` names it).

    Args:
        messages: The conversation so far.
        stopped: Why the run stopped early (e.g. ``"the limit of 2 tool rounds"``), or
            ``None`` when it did not.

    Returns:
        ``"<stop note> Here is what the tools returned: get_weather(city='Paris') → sunny."``
        or, without tool results, the stop note alone (or a plain "no answer" note).
    """
    results = last_tool_results(messages)
    note = f"I stopped after reaching {stopped}." if stopped else ""
    if not results:
        body = "I have no tool result to report yet." if stopped else "I have no answer yet."
        return AIMessage(content=f"{note} {body}".strip())
    lines = [f"{call} → {text}" for call, text in results]
    lead = (
        "Here is what the tool returned:" if len(lines) == 1 else "Here is what the tools returned:"
    )
    body = f"{lead} {lines[0]}" if len(lines) == 1 else "\n".join([lead, *lines])
    return AIMessage(content=f"{note} {body}".strip())


def unusable_reply(reply: AIMessage, messages: Sequence[BaseMessage]) -> str | None:
    """Why ``reply``, the model's answer right after a tool result, cannot end the turn.

    ``"repeats a call already answered"`` (running it again loops), ``"writes a tool
    call as text"`` (no native call, so the agent would show the JSON to the user),
    ``"is empty"``, or ``"uses nothing the tools returned"`` (off topic: a statement that
    shares no word stem or number with the results and the calls that asked for them,
    such as a model describing how it would parse the response); ``None`` for a reply
    that answers from the results, asks, or makes a new call. The off-topic rule errs
    toward replacing (a reply that paraphrases a result in other words, or translates it,
    is replaced too): the replacement reports what the tools returned, which answers the
    user as well. Empty results and results in a script without spaces are never judged.

    Args:
        reply: The model's message.
        messages: The conversation it answers (ending in the tool results).
    """
    if is_repeat_call(reply, answered_tool_calls(messages)):
        return "repeats a call already answered"
    if reply.tool_calls:
        return None  # a new call
    text = message_text(reply)
    if extract_tool_calls(reply) or has_written_call(text):
        return "writes a tool call as text"
    if not text.strip():
        return "is empty"
    if "?" not in text and _off_topic(text, messages):
        return "uses nothing the tools returned"
    return None


def _off_topic(text: str, messages: Sequence[BaseMessage]) -> bool:
    """Whether *text* shares no word or number with the last tool results and their calls.

    The results are read whole (not cut as in :func:`tool_result_reply`); an empty result,
    and a result in a script written without spaces (Chinese, Japanese, Korean), say too
    little to judge, so such a turn is never off topic.
    """
    tail = _tail_results(messages)
    results = [message_text(m).strip() for m in tail]  # type: ignore[arg-type]
    if not any(results) or any(_UNSPACED.search(r) for r in results):
        return False
    calls = _calls_by_id(messages)
    args = [
        json.dumps((calls.get(m.tool_call_id) or {}).get("args") or {}, default=str) for m in tail
    ]
    used = _content_words(" ".join(results + args))
    return bool(used) and not used & _content_words(text)


_WORDS = re.compile(r"[^\W\d_]{3,}|\d+(?:[.,]\d+)?", re.UNICODE)
# fmt: off
_COMMON = frozenset((
    "the", "and", "for", "are", "was", "were", "has", "have", "had", "not", "but", "with", "from",
    "this", "that", "these", "those", "you", "your", "our", "its", "his", "her", "their", "there",
    "here", "what", "which", "who", "when", "where", "why", "how", "all", "any", "can", "could",
    "would", "should", "will", "may", "might", "must", "been", "being", "into", "onto", "than",
    "then", "them", "they", "also", "only", "just", "very", "more", "most", "some", "such",
    "each", "other", "about", "over", "under", "result", "results", "returned", "tool", "tools",
    "none", "null", "true", "false", "error",
))
# fmt: on
"""Words too common to show that a reply reports a tool's result."""


_UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")
"""Kana, CJK ideographs and Hangul: scripts whose words are not split by spaces."""


def _content_words(text: str) -> frozenset[str]:
    """The word stems (three letters or more, not :data:`_COMMON`) and numbers of *text*.

    A number also gives its whole part ("22.46" is used by "about 22 degrees").
    """
    out: set[str] = set()
    for word in _WORDS.findall(text.lower()):
        if word in _COMMON:
            continue
        if word[0].isdigit():
            out.update({word, re.split(r"[.,]", word)[0]})
        else:
            out.add(_stem(word))
    return frozenset(out)


def _stem(word: str) -> str:
    """A crude stem: "raining", "rained", "rains" → "rain"; "lightly" → "light"."""
    for ending in ("ing", "ly", "ed", "es", "s"):
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            return word[: -len(ending)]
    return word
