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

# ``__all__`` (below) is the public surface. The names imported ``as`` themselves stay
# importable from this package outside it: names 0.1 exported from here, and what the
# library's other packages use (the front doors' binding helpers and round drivers, the Ray
# engines' wire functions).
from taskcal_agents.sampling._bindings import bound_tool_names as bound_tool_names
from taskcal_agents.sampling._bindings import bound_tools as bound_tools
from taskcal_agents.sampling._bindings import chat_model_of as chat_model_of
from taskcal_agents.sampling._bindings import served_settings as served_settings
from taskcal_agents.sampling._bindings import split_retry as split_retry
from taskcal_agents.sampling._bindings import unwrap_binding as unwrap_binding
from taskcal_agents.sampling._chat_models import ChatModelSampler, asample_messages, sample_messages
from taskcal_agents.sampling._chat_models import asample_batch as asample_batch
from taskcal_agents.sampling._chat_models import sample_batch as sample_batch
from taskcal_agents.sampling._choices import choice_message as choice_message
from taskcal_agents.sampling._choices import is_malformed_choice as is_malformed_choice
from taskcal_agents.sampling._choices import malformed_message as malformed_message
from taskcal_agents.sampling._drive import adrive_rounds as adrive_rounds
from taskcal_agents.sampling._drive import drive_rounds as drive_rounds
from taskcal_agents.sampling._messages import to_messages as to_messages
from taskcal_agents.sampling._messages import to_openai_messages as to_openai_messages
from taskcal_agents.sampling._sampler import SampleParams as SampleParams
from taskcal_agents.sampling._sampler import Sampler

if TYPE_CHECKING:
    from taskcal_agents.sampling._openai_server import OpenAISampler
    from taskcal_agents.sampling._openai_server import build_request as build_request
    from taskcal_agents.sampling._openai_server import (
        response_to_messages as response_to_messages,
    )
    from taskcal_agents.sampling._openai_server import wire_body as wire_body

_OPENAI = ("OpenAISampler", "build_request", "response_to_messages", "wire_body")
"""Names of the OpenAI-server module, imported on use (the openai client is a heavy import);
of them only ``OpenAISampler`` is public, the others serve the workflow's Ray engine."""


def __getattr__(name: str) -> Any:
    if name in _OPENAI:
        from taskcal_agents.sampling import _openai_server

        return getattr(_openai_server, name)
    msg = f"module 'taskcal_agents.sampling' has no attribute {name!r}"
    raise AttributeError(msg)


__all__ = [
    "ChatModelSampler",
    "OpenAISampler",
    "Sampler",
    "asample_messages",
    "sample_messages",
]
