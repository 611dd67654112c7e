"""Sampling: draw N completions per input, through one interface.

:class:`Sampler` (``sample(messages, *, n, **params)`` and ``asample``) has three adapters:

- :class:`ChatModelSampler` over any LangChain chat model, and the functions under it,
  :func:`sample_messages` / :func:`asample_messages` (one request with ``n`` for
  ChatOpenAI-compatible models, else N concurrent calls);
- :class:`OpenAISampler`, an OpenAI-compatible server (vLLM) with one request per input;
- :class:`OfflineSampler`, vLLM's in-process engine.

All take the same inputs and turn each choice into an ``AIMessage`` by the same rules. The
one-pass belief from ``top_logprobs`` is :func:`logprob_belief`, and a tool decision's
one-pass belief over "call TOOL" / ask / refuse is :func:`one_pass_protocol` (both imported
on first use: they need the decision package).

``__all__`` is the public surface. The other names imported below are what the library's
other packages use (the front doors' binding helpers, batch sampling and round drivers, the
task prompt, the Ray engines' wire functions): they are not part of the API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taskcal_agents._exports import lazy_exports
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
from taskcal_agents.sampling._drive import drive as drive
from taskcal_agents.sampling._drive import drive_rounds as drive_rounds
from taskcal_agents.sampling._messages import to_messages as to_messages
from taskcal_agents.sampling._messages import to_openai_messages as to_openai_messages
from taskcal_agents.sampling._offline import OfflineSampler
from taskcal_agents.sampling._openai_server import OpenAISampler
from taskcal_agents.sampling._openai_server import build_request as build_request
from taskcal_agents.sampling._openai_server import response_to_messages as response_to_messages
from taskcal_agents.sampling._openai_server import wire_body as wire_body
from taskcal_agents.sampling._prompts import request_with_task_prompt as request_with_task_prompt
from taskcal_agents.sampling._prompts import with_task_prompt as with_task_prompt
from taskcal_agents.sampling._sampler import SampleParams as SampleParams
from taskcal_agents.sampling._sampler import Sampler

if TYPE_CHECKING:
    from taskcal_agents.sampling._logprob import logprob_belief
    from taskcal_agents.sampling._one_pass import OnePassBelief, one_pass_protocol, tool_options

_EXPORTS: dict[str, str] = {
    "logprob_belief": "taskcal_agents.sampling._logprob",
    "OnePassBelief": "taskcal_agents.sampling._one_pass",
    "one_pass_protocol": "taskcal_agents.sampling._one_pass",
    "tool_options": "taskcal_agents.sampling._one_pass",
}

__all__ = [
    "ChatModelSampler",
    "OfflineSampler",
    "OnePassBelief",
    "OpenAISampler",
    "Sampler",
    "asample_messages",
    "logprob_belief",
    "one_pass_protocol",
    "sample_messages",
    "tool_options",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
