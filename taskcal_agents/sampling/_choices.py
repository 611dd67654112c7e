"""The one treatment of a choice: what a model returned, turned into an ``AIMessage``.

Every sampler ends here. A choice is its text content, the tool calls a server's tool parser
returned (raw OpenAI ``{"id", "function": {"name", "arguments"}}`` dicts) and its
``finish_reason``:

* the server's tool calls become ``tool_calls``; one whose arguments do not decode to a JSON
  object goes to ``invalid_tool_calls`` with the error, never dropped (arguments that decode
  to a string holding an object, as vLLM's hermes parser encodes them once more, are
  decoded);
* without a call from the server, the calls written in the content are read (where asked)
  by :func:`taskcal_agents.parsing.parse_tool_calls`, the one reader of calls in text (one
  argument-key rule, one id scheme): the content keeps the text before them and a
  ``finish_reason`` of ``"stop"`` becomes ``"tool_calls"``, as a server reports a call its
  parser found;
* a choice the model client could not even turn into a message (langchain-openai fails a
  whole response over one malformed choice) is :func:`malformed_message`: empty content,
  which every parser leaves unparsed, so it is counted, never dropped.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.exceptions import OutputParserException
from langchain_core.messages import AIMessage, InvalidToolCall, ToolCall
from langchain_core.output_parsers.openai_tools import make_invalid_tool_call, parse_tool_call
from pydantic import ValidationError

from taskcal_agents.parsing import parse_tool_calls

__all__ = ["choice_message", "is_malformed_choice", "malformed_message", "server_tool_calls"]


def server_tool_calls(
    raw_calls: Sequence[Mapping[str, Any]],
) -> tuple[list[ToolCall], list[InvalidToolCall]]:
    """The calls a server's tool parser returned: ``(tool_calls, invalid_tool_calls)``."""
    calls: list[ToolCall] = []
    invalid: list[InvalidToolCall] = []
    for raw in raw_calls:
        raw_dict = dict(raw)
        try:
            parsed = parse_tool_call(raw_dict, return_id=True)
        except OutputParserException as exc:
            invalid.append(make_invalid_tool_call(raw_dict, str(exc)))
            continue
        if parsed is None:
            continue
        if isinstance(parsed.get("args"), str):
            with contextlib.suppress(ValueError):
                parsed["args"] = json.loads(parsed["args"])
        if not isinstance(parsed.get("args"), dict):
            error = f"Function arguments must be a JSON object, got {parsed.get('args')!r}."
            invalid.append(make_invalid_tool_call(raw_dict, error))
            continue
        calls.append(parsed)  # type: ignore[arg-type]
    return calls, invalid


def choice_message(
    content: str | None,
    *,
    finish_reason: str | None,
    raw_tool_calls: Sequence[Mapping[str, Any]] = (),
    read_content: bool = False,
    metadata: Mapping[str, Any] | None = None,
    id: str | None = None,
) -> AIMessage:
    """One choice as an ``AIMessage`` (see the module docstring for the rules).

    Args:
        content: The choice's text (``None``: empty).
        finish_reason: Why generation stopped (``"stop"``, ``"length"``, ``"tool_calls"``…).
        raw_tool_calls: The tool calls of the server's tool parser, OpenAI format.
        read_content: Read the calls written in the content when the server returned none
            (tools were offered and the server's parser missed them, or no parser ran).
        metadata: More ``response_metadata`` (``choice_index``, ``model_name``…).
        id: The message id.

    Returns:
        The message; ``response_metadata`` holds ``finish_reason`` and *metadata*.
    """
    text = content or ""
    calls, invalid = server_tool_calls(raw_tool_calls)
    if read_content and not calls and not invalid:
        found = parse_tool_calls(text)
        if found.tool_calls or found.invalid_tool_calls:
            text, calls, invalid = found
            if calls and finish_reason == "stop":
                finish_reason = "tool_calls"
    return AIMessage(
        content=text,
        tool_calls=calls,
        invalid_tool_calls=invalid,
        response_metadata={"finish_reason": finish_reason, **(metadata or {})},
        id=id,
    )


_MESSAGE_MODELS = frozenset({"AIMessage", "AIMessageChunk"})
_CALL_FIELDS = frozenset({("tool_calls",), ("invalid_tool_calls",)})


def is_malformed_choice(error: BaseException) -> bool:
    """Whether ``error`` is a model client refusing one choice's tool calls.

    langchain-openai builds each choice's ``AIMessage`` and fails on tool-call arguments
    that are, say, a JSON list: a pydantic ``ValidationError`` of the message model whose
    every error is in ``tool_calls``. Any other error is not: one in the content (a server
    or proxy speaking another protocol) or of another pydantic model (a bug in a middleware)
    is raised, not counted as unparsed samples.
    """
    if not isinstance(error, ValidationError) or error.title not in _MESSAGE_MODELS:
        return False
    return all(e["loc"][:1] in _CALL_FIELDS for e in error.errors())


def malformed_message(error: BaseException) -> AIMessage:
    """The stand-in for a choice that could not be turned into a message.

    Its content is empty (every parser leaves it unparsed, so it is counted in
    ``n_unparsed``) and ``response_metadata["taskcal_malformed"]`` holds the first line of
    the error.
    """
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return AIMessage(content="", response_metadata={"taskcal_malformed": text})
