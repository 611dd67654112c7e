"""Where an argument's value comes from: the messages that support it and their sources.

Argument grounding (:class:`~taskcal_agents.parsing.GroundingContext`) records, for each
argument value of a sampled call, the :class:`Source` of every message that supports it: the
user, the system (the deployment's own prompt), a tool result (which tool, which call), or
an inference that needs no message (the schema's default, an optional enum value, a
boolean) with its rule. A trust policy (:class:`~taskcal_agents.parsing.TrustPolicy`) reads
them to keep a value that only a tool result supplies (a prompt injection's account number)
from being sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["SOURCE_KINDS", "Source", "SourceKind", "call_names", "made_calls", "message_source"]

SourceKind = Literal["user", "system", "tool", "inferred", "model"]
"""Where a value comes from: a user, system or tool message, an inference from the schema
(:attr:`Source.rule`), or the model alone (no message supports it)."""

SOURCE_KINDS: tuple[str, ...] = ("user", "system", "tool", "inferred", "model")
"""Every :data:`SourceKind`."""

_ROLE_KIND: dict[str, SourceKind] = {
    "user": "user",
    "human": "user",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "function": "tool",
}


@dataclass(frozen=True)
class Source:
    """One source of an argument's value.

    Attributes:
        kind: The :data:`SourceKind`.
        message: The supporting message's index in the conversation (``None`` for an
            inference or the model).
        tool: For a tool result, the tool that returned it (``None`` when the message does
            not say).
        call_id: For a tool result, the id of the call it answers.
        rule: For an inference, the grounding rule (``"default"``, ``"enum"``,
            ``"boolean"``, ``"empty"``); for a message, ``"relative_date"`` when the value
            is a date the message names as a relative day ("tomorrow").
    """

    kind: SourceKind
    message: int | None = None
    tool: str | None = None
    call_id: str | None = None
    rule: str | None = None

    @property
    def label(self) -> str:
        """A short name: ``"user"``, ``"tool:search_web"``, ``"inferred:default"``."""
        if self.kind == "tool":
            return f"tool:{self.tool}" if self.tool else "tool"
        if self.kind == "inferred":
            return f"inferred:{self.rule}"
        return self.kind

    def describe(self) -> str:
        """The source in words, for a question to the user."""
        if self.kind == "tool":
            return f"the result of {self.tool}" if self.tool else "a tool result"
        if self.kind == "inferred":
            return f"the tool's schema ({self.rule})"
        return {"user": "your message", "system": "the system prompt"}.get(
            self.kind, "the model alone"
        )

    def to_dict(self) -> dict[str, Any]:
        """The source as JSON: its fields that are set."""
        out: dict[str, Any] = {"kind": self.kind}
        for key in ("message", "tool", "call_id", "rule"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


def message_source(
    role: str, index: int, message: Any, call_names: Mapping[str, str]
) -> Source | None:
    """The source of the conversation's message ``index`` (``None``: not evidence).

    A tool result's tool is the name of the call its ``tool_call_id`` answers
    (``call_names``: id → tool name, of the model's calls *before* this message, the latest
    call with an id winning: an id reused in a later turn does not rename an earlier
    result), else its ``name``. A summary that LangChain's ``SummarizationMiddleware`` wrote
    as a user message (``additional_kwargs["lc_source"] == "summarization"``) is a tool
    result.
    """
    kind = _ROLE_KIND.get(role)
    if kind is None:
        return None
    extra = _field(message, "additional_kwargs")
    if kind == "user" and isinstance(extra, Mapping) and extra.get("lc_source") == "summarization":
        # LangChain's SummarizationMiddleware writes its summary of the conversation,
        # tool results included, as a user message: it is not the user's words.
        return Source("tool", index, tool="summarization")
    if kind != "tool":
        return Source(kind, index)
    call_id = _field(message, "tool_call_id")
    name = (call_names.get(call_id) if call_id else None) or _field(message, "name")
    return Source("tool", index, tool=name, call_id=call_id)


def call_names(messages: Iterable[Any]) -> dict[str, str]:
    """Tool-call id → tool name, over the model's calls in ``messages`` (the last wins).

    Pass the messages before a tool result, not the whole conversation: a later call may
    reuse the id (``call_0`` in every turn).
    """
    return {c["id"]: c["name"] for m in messages for c in made_calls(m) if c["id"] and c["name"]}


def made_calls(message: Any) -> list[dict[str, Any]]:
    """The tool calls an AI message makes, ``{"name", "args", "id"}`` (OpenAI dicts too)."""
    calls = _field(message, "tool_calls")
    out = []
    for call in calls if isinstance(calls, list) else ():
        if not isinstance(call, Mapping):
            continue
        name, args = call.get("name"), call.get("args")
        function = call.get("function")
        if isinstance(function, Mapping):  # an OpenAI-style dict
            name = function.get("name")
            try:
                args = json.loads(function.get("arguments") or "{}")
            except ValueError:
                args = {}
        out.append({
            "name": str(name or ""), "args": args if isinstance(args, Mapping) else {},
            "id": str(call["id"]) if call.get("id") else "",
        })  # fmt: skip
    return out


def _field(message: Any, key: str) -> Any:
    value = message.get(key) if isinstance(message, Mapping) else getattr(message, key, None)
    if key in ("tool_calls", "additional_kwargs"):
        return value
    return str(value) if isinstance(value, str | int) else value
