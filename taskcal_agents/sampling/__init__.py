"""Sampling: draw N completions per input from a chat model.

:func:`sample_messages` / :func:`asample_messages` work with any LangChain chat model
(one request with ``n`` for ChatOpenAI-compatible models, else N concurrent calls).
The OpenAI-compatible, offline and log-probability samplers live in the submodules
``taskcal_agents.sampling.openai``, ``.offline`` and ``.logprob``.
"""

from __future__ import annotations

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

__all__ = [
    "asample_batch",
    "asample_messages",
    "chat_model_of",
    "sample_batch",
    "sample_messages",
    "supports_n",
    "to_messages",
    "unwrap_binding",
]
