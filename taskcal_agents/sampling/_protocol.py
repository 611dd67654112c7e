"""The one sampling interface: :class:`Sampler`."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import AIMessage

__all__ = ["Sampler"]


@runtime_checkable
class Sampler(Protocol):
    """Draws ``n`` completions of one conversation, sync and async.

    The adapters: :class:`~taskcal_agents.sampling.ChatModelSampler` (any LangChain chat
    model), :class:`~taskcal_agents.sampling.OpenAISampler` (an OpenAI-compatible server,
    one request with ``n``) and :class:`~taskcal_agents.sampling.offline.OfflineSampler`
    (vLLM's in-process engine). Every adapter accepts the same messages (a string, LangChain
    messages, a prompt value or OpenAI message dicts, see
    :func:`~taskcal_agents.sampling.to_openai_messages`) and turns each choice into an
    ``AIMessage`` by the same rules (tool calls from the server, else those written in the
    content, malformed ones in ``invalid_tool_calls``).

    Who uses it: the workflow runner (``sample`` with ``temperature``, ``tools``,
    ``max_tokens``), the entailment judge (``structured_outputs``), the one-pass belief
    (``logprobs``; :class:`~taskcal_agents.sampling.OpenAISampler` only).
    """

    def sample(self, messages: Any, *, n: int = 1, **params: Any) -> list[AIMessage]:
        """Return *n* completions of *messages*, in order.

        Args:
            messages: The conversation.
            n: The number of completions.
            **params: Sampling parameters: ``temperature``, ``max_tokens``, ``tools``,
                ``structured_outputs``… (which ones an adapter supports is its own).
        """
        ...

    async def asample(self, messages: Any, *, n: int = 1, **params: Any) -> list[AIMessage]:
        """Async :meth:`sample`."""
        ...
