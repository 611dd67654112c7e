"""Sampling: draw N completions per input from a chat model.

:func:`sample_messages` / :func:`asample_messages` work with any LangChain chat model
(one request with ``n`` for ChatOpenAI-compatible models, else N concurrent calls).
The OpenAI-compatible, offline and log-probability samplers live in the submodules
``taskcal_agents.sampling.openai``, ``.offline`` and ``.logprob``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from taskcal_agents.sampling.langchain import (
    asample_batch,
    asample_messages,
    chat_model_of,
    sample_batch,
    sample_messages,
    supports_n,
    to_messages,
    unwrap_binding,
)

if TYPE_CHECKING:
    from taskcal_agents.sampling.openai import OpenAISampler


def __getattr__(name: str) -> Any:
    if name == "OpenAISampler":  # imported on use: the openai client is a heavy import
        from taskcal_agents.sampling.openai import OpenAISampler

        return OpenAISampler
    msg = f"module 'taskcal_agents.sampling' has no attribute {name!r}"
    raise AttributeError(msg)


__all__ = [
    "OpenAISampler",
    "asample_batch",
    "asample_messages",
    "chat_model_of",
    "sample_batch",
    "sample_messages",
    "supports_n",
    "to_messages",
    "unwrap_binding",
]
