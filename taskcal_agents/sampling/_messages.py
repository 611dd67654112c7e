"""The one message normaliser: chat input to LangChain messages or to OpenAI message dicts.

Every sampler accepts the same inputs: a string (one user message), LangChain messages or
message-likes, a prompt value, or OpenAI-format dicts (``{"role": ..., "content": ...}``, as
dataset items store them). :func:`to_messages` feeds chat models, :func:`to_openai_messages`
the OpenAI-compatible server and vLLM's offline engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import (
    BaseMessage,
    HumanMessage,
    convert_to_messages,
    convert_to_openai_messages,
)
from langchain_core.prompt_values import PromptValue

__all__ = ["to_messages", "to_openai_messages"]


def to_messages(input_: LanguageModelInput) -> list[BaseMessage]:
    """Convert chat-model input (string, messages, message-likes, prompt value) to messages."""
    if isinstance(input_, PromptValue):
        return input_.to_messages()
    if isinstance(input_, str):
        return [HumanMessage(content=input_)]
    return convert_to_messages(input_)


def to_openai_messages(messages: Any) -> list[dict[str, Any]]:
    """Convert chat input (a string, LangChain messages, a prompt value or OpenAI dicts).

    OpenAI-format dicts (with a ``role``) pass through unchanged (copied).
    """
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if isinstance(messages, PromptValue):
        messages = messages.to_messages()
    if isinstance(messages, BaseMessage):
        messages = [messages]
    if isinstance(messages, Sequence) and all(
        isinstance(m, Mapping) and "role" in m for m in messages
    ):
        return [dict(m) for m in messages]
    converted = convert_to_openai_messages(messages)
    return converted if isinstance(converted, list) else [converted]
