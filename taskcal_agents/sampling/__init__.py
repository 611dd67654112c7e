"""Sampling: draw N completions per input, through one interface.

:class:`Sampler` (``sample(messages, *, n, **params)`` and ``asample``) has three adapters:

- :class:`ChatModelSampler` over any LangChain chat model, and the functions under it,
  :func:`sample_messages` / :func:`asample_messages` / :func:`sample_batch` (one request
  with ``n`` for ChatOpenAI-compatible models, else N concurrent calls);
- :class:`OpenAISampler`, an OpenAI-compatible server (vLLM) with one request per input;
- ``OfflineSampler`` in :mod:`taskcal_agents.sampling.offline`, vLLM's in-process engine.

All take the same inputs (:func:`to_messages`, :func:`to_openai_messages`) and turn each
choice into an ``AIMessage`` by the same rules. The one-pass belief from ``top_logprobs``
lives in :mod:`taskcal_agents.sampling.logprob`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from taskcal_agents.sampling._chat_models import (
    ChatModelSampler,
    asample_batch,
    asample_messages,
    bound_tool_names,
    bound_tools,
    chat_model_of,
    sample_batch,
    sample_messages,
    unwrap_binding,
)
from taskcal_agents.sampling._drive import adrive_rounds, drive_rounds
from taskcal_agents.sampling._messages import to_messages, to_openai_messages
from taskcal_agents.sampling._protocol import SampleParams, Sampler

if TYPE_CHECKING:
    from taskcal_agents.sampling._openai_server import OpenAISampler


def __getattr__(name: str) -> Any:
    if name == "OpenAISampler":  # imported on use: the openai client is a heavy import
        from taskcal_agents.sampling._openai_server import OpenAISampler

        return OpenAISampler
    msg = f"module 'taskcal_agents.sampling' has no attribute {name!r}"
    raise AttributeError(msg)


__all__ = [
    "ChatModelSampler",
    "OpenAISampler",
    "SampleParams",
    "Sampler",
    "adrive_rounds",
    "asample_batch",
    "asample_messages",
    "bound_tool_names",
    "bound_tools",
    "chat_model_of",
    "drive_rounds",
    "sample_batch",
    "sample_messages",
    "to_messages",
    "to_openai_messages",
    "unwrap_binding",
]
