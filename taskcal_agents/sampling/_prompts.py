r"""The one policy that puts a task's prompt into a request.

Calibration (``taskcal sample``), :class:`~taskcal_agents.langchain.TaskCalibratedRunnable`
and :class:`~taskcal_agents.langchain.TaskCalibrationMiddleware` all render a request
with these functions, so a calibrator is fitted on beliefs drawn from the same messages it
is deployed with.

The policy, for a task prompt ``p``:

- The first system (or developer) message of the request gets ``p`` appended to its
  content: string content becomes ``f"{content}\n\n{p}"`` (just ``p`` when the content is
  empty), a list of content blocks gets an extra ``{"type": "text", "text": p}`` block. The
  message keeps its role, name, id and other fields.
- A request without a system or developer message gets ``p`` as a new system message in
  front.
- Rendering is idempotent: content that already ends with ``p`` as its own paragraph (or
  whose last content block is ``p``), e.g. a request rendered before, is left as it is, so
  ``p`` is never appended twice.
- No prompt (``None`` or ``""``) leaves the request as it is.

Messages are LangChain messages or OpenAI-style dicts (``{"role": ..., "content": ...}``,
as dataset items store them). The caller's messages are never changed: the rendered
request is a new list, with a copy of the one message that changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, ChatMessage, SystemMessage

from taskcal_agents.errors import ConfigurationError

__all__ = [
    "SYSTEM_ROLES",
    "append_task_prompt",
    "request_with_task_prompt",
    "with_task_prompt",
]

SYSTEM_ROLES = frozenset({"system", "developer"})
"""The roles whose first message receives the task prompt."""

_SEPARATOR = "\n\n"


def _ends_with(text: str, prompt: str) -> bool:
    return text == prompt or text.endswith(_SEPARATOR + prompt)


def _block_text(block: Any) -> str | None:
    if isinstance(block, str):
        return block
    if isinstance(block, Mapping) and block.get("type") == "text":
        text = block.get("text")
        return text if isinstance(text, str) else None
    return None


def append_task_prompt(content: str | Sequence[Any] | None, prompt: str | None) -> Any:
    r"""Return a system message's *content* with the task *prompt* appended.

    Args:
        content: The content: a string, a list of content blocks, or ``None`` (empty).
        prompt: The task prompt; ``None`` or ``""`` returns *content* unchanged.

    Returns:
        ``f"{content}\n\n{prompt}"`` for string content (*prompt* for empty content), the
        blocks plus a ``{"type": "text", "text": prompt}`` block for block content; the
        content itself when it already ends with *prompt* (see the module docstring).

    Raises:
        ConfigurationError: *content* is neither a string, a list of blocks nor ``None``.
    """
    if not prompt:
        return content
    if content is None or isinstance(content, str):
        text = content or ""
        if not text.strip():
            return prompt
        return text if _ends_with(text, prompt) else f"{text}{_SEPARATOR}{prompt}"
    if isinstance(content, Sequence):
        blocks = list(content)
        last = _block_text(blocks[-1]) if blocks else None
        if last is not None and _ends_with(last, prompt):
            return blocks
        return [*blocks, {"type": "text", "text": prompt}]
    msg = (
        "append_task_prompt parameter 'content' must be a string, a list of content blocks "
        f"or None, got {type(content).__name__} {content!r}; pass a message's content."
    )
    raise ConfigurationError(msg)


def _is_system(message: Any, index: int) -> bool:
    if isinstance(message, BaseMessage):
        if isinstance(message, ChatMessage):
            return message.role in SYSTEM_ROLES
        return isinstance(message, SystemMessage)
    if isinstance(message, Mapping) and "role" in message:
        return message["role"] in SYSTEM_ROLES
    msg = (
        "with_task_prompt parameter 'messages' must hold LangChain messages or OpenAI-style "
        f"dicts with a 'role', got messages[{index}] = {message!r}; convert the input with "
        "taskcal_agents.sampling.to_messages first."
    )
    raise ConfigurationError(msg)


def _with_content(message: Any, prompt: str) -> Any:
    if isinstance(message, BaseMessage):
        content = append_task_prompt(message.content, prompt)
        if content is message.content:
            return message
        return message.model_copy(update={"content": content})
    content = append_task_prompt(message.get("content"), prompt)
    if content is message.get("content"):
        return message
    return {**message, "content": content}


def with_task_prompt(messages: Sequence[Any], prompt: str | None) -> list[Any]:
    """Render a request: *messages* with the task *prompt* merged in by the policy.

    Args:
        messages: LangChain messages or OpenAI-style dicts.
        prompt: The task prompt (``task.prompt``); ``None`` or ``""`` changes nothing.

    Returns:
        A new list: the first system/developer message replaced by a copy with *prompt*
        appended, or a new system message (a dict when the first message is a dict, else
        a :class:`~langchain_core.messages.SystemMessage`) in front when there is none.
        The other messages are the caller's own objects.

    Raises:
        ConfigurationError: A message is neither a LangChain message nor a dict with a
            ``role``.
    """
    rendered = list(messages)
    if not prompt:
        return rendered
    for i, message in enumerate(rendered):
        if _is_system(message, i):
            rendered[i] = _with_content(message, prompt)
            return rendered
    if rendered and isinstance(rendered[0], Mapping):
        return [{"role": "system", "content": prompt}, *rendered]
    return [SystemMessage(content=prompt), *rendered]


def request_with_task_prompt(
    system_message: SystemMessage | None, messages: Sequence[BaseMessage], prompt: str | None
) -> tuple[SystemMessage | None, list[BaseMessage]]:
    """Render a request held as a separate system message and the conversation.

    The split form of :func:`with_task_prompt` (an agent's ``ModelRequest``): the result,
    put back together as ``[system_message, *messages]``, equals ``with_task_prompt`` of
    the request put together the same way.

    Args:
        system_message: The request's system message, or ``None``.
        messages: The conversation.
        prompt: The task prompt; ``None`` or ``""`` changes nothing.

    Returns:
        The rendered ``(system_message, messages)``. Without a system message the prompt
        goes into the first system message of the conversation, else into a new system
        message.
    """
    if system_message is not None:
        return with_task_prompt([system_message], prompt)[0], list(messages)
    rendered = with_task_prompt(messages, prompt)
    if len(rendered) > len(messages):
        return rendered[0], rendered[1:]
    return None, rendered
