"""The one sampling interface: :class:`Sampler`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypedDict, Unpack, runtime_checkable

from langchain_core.messages import AIMessage

__all__ = ["SampleParams", "Sampler"]


class SampleParams(TypedDict, total=False):
    """The sampling parameters of :meth:`Sampler.sample` (all optional).

    :class:`~taskcal_agents.sampling.OpenAISampler` takes them all; the other adapters
    take the ones their backend has (a chat model passes them on as call keyword arguments,
    the offline engine takes ``temperature``, ``top_p``, ``top_k``, ``min_p``,
    ``max_tokens``, ``tools`` and ``structured_outputs``).
    """

    n: int
    """Number of completions, drawn in one request (default 1)."""
    temperature: float | None
    """Sampling temperature (default 1.0; ``None`` leaves the server's default)."""
    top_p: float | None
    """Nucleus sampling mass."""
    top_k: int | None
    """Top-k sampling (vLLM, through ``extra_body``)."""
    min_p: float | None
    """Min-p sampling (vLLM, through ``extra_body``)."""
    max_tokens: int | None
    """Completion length limit."""
    stop: str | Sequence[str] | None
    """Stop strings."""
    tools: Sequence[Any] | None
    """OpenAI tool dicts, LangChain tools, pydantic models or functions."""
    tool_choice: str | Mapping[str, Any] | None
    """``"auto"``, ``"required"``, ``"none"`` or a named function."""
    structured_outputs: Mapping[str, Any] | None
    """vLLM constraint, see :func:`~taskcal_agents.parsing._constraints.choice_constraint` and
    :func:`~taskcal_agents.parsing._constraints.json_constraint`."""
    logprobs: int | None
    """Number of top log-probabilities per token (0-20) to return in ``response_metadata``."""
    seed: int | None
    """Per-request seed (refused when ``allow_seed`` is false)."""
    extra_body: Mapping[str, Any] | None
    """More vLLM request fields."""


@runtime_checkable
class Sampler(Protocol):
    """Draws ``n`` completions of one conversation, sync and async: ``sample(messages, *, n, ...)``.

    The adapters: :class:`~taskcal_agents.sampling.ChatModelSampler` (any LangChain chat
    model), :class:`~taskcal_agents.sampling.OpenAISampler` (an OpenAI-compatible server,
    one request with ``n``) and :class:`~taskcal_agents.sampling.OfflineSampler`
    (vLLM's in-process engine). Every adapter accepts the same messages (a string, LangChain
    messages, a prompt value or OpenAI message dicts, see
    :func:`~taskcal_agents.sampling.to_openai_messages`) and turns each choice into an
    ``AIMessage`` by the same rules (tool calls from the server, else those written in the
    content, malformed ones in ``invalid_tool_calls``).

    Who uses it: the workflow runner (``sample`` with ``temperature``, ``tools``,
    ``max_tokens``), the entailment judge (``structured_outputs``), the one-pass belief
    (``logprobs``; :class:`~taskcal_agents.sampling.OpenAISampler` only).
    """

    def sample(self, messages: Any, **params: Unpack[SampleParams]) -> list[AIMessage]:
        """Return ``n`` completions of *messages* (``n`` defaults to 1), in order.

        Args:
            messages: The conversation.
            **params: See :class:`SampleParams`: ``n``, ``temperature``, ``max_tokens``,
                ``tools``, ``structured_outputs``… (which ones an adapter supports is its
                own).
        """
        ...

    async def asample(self, messages: Any, **params: Unpack[SampleParams]) -> list[AIMessage]:
        """Async :meth:`sample`."""
        ...
