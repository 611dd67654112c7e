"""TaskCalibratedRunnable: chat input → N samples → g_T → belief → calibrator → MBR decision.

Wrap any chat model once and use the result anywhere a LangChain Runnable fits::

    from taskcal_agents import TaskCalibratedRunnable, tasks

    runnable = TaskCalibratedRunnable(model.bind_tools([get_weather]), tasks.tool_decision())
    decision = runnable.invoke("What's the weather?")
    decision.action, decision.message
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.callbacks import (
    AsyncCallbackManagerForChainRun,
    CallbackManagerForChainRun,
)
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableSerializable
from langchain_core.runnables.config import patch_config
from pydantic import ConfigDict, Field, PrivateAttr
from typing_extensions import override

from taskcal_agents.answer_clusters import question_of
from taskcal_agents.belief import DEFAULT_ALPHA
from taskcal_agents.decision import Decider, Decision, decide_from_messages
from taskcal_agents.errors import ConfigurationError, SamplingError
from taskcal_agents.prompting import with_task_prompt
from taskcal_agents.sampling import (
    asample_batch,
    bound_tool_names,
    chat_model_of,
    sample_batch,
    to_messages,
)
from taskcal_agents.task import Task

__all__ = ["TaskCalibratedRunnable", "decide_from_messages"]


def _is_control_flow(exc: BaseException) -> bool:
    """LangGraph interrupts and other bubble-up signals must never be retried or swallowed."""
    try:
        from langgraph.errors import GraphBubbleUp
    except ImportError:
        return False
    return isinstance(exc, GraphBubbleUp)


def _raise_or_return(result: Decision | Exception) -> Decision:
    if isinstance(result, Exception):
        raise result
    return result


class TaskCalibratedRunnable(RunnableSerializable[LanguageModelInput, Decision]):
    """Turn a chat model into a calibrated, cost-aware decision maker.

    Each call draws ``n_samples`` completions (one request with ``n`` for
    ChatOpenAI-compatible models, else concurrent calls), maps each to a task label with
    the task's parser g_T, forms the Dirichlet-smoothed belief, calibrates it and takes the
    minimum-expected-cost action. The samples appear as child runs of this runnable's
    run in tracing.

    Args:
        model: The chat model (tools bound with ``bind_tools`` are kept) or a Runnable
            producing ``AIMessage``/``str``.
        task: The task.
        calibrator: A fitted calibrator for the task's labels, or ``None``.
        **kwargs: The other fields below.

    Raises:
        ConfigurationError: If the calibrator does not match the task, or temperature/seed
            are set for a model that is not a chat model.
        LabelMismatchError: If the calibrator's labels differ from the task's.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model: Runnable[Any, Any]
    """The wrapped model."""
    task: Task
    """The task: labels, actions, cost matrix and parser."""
    calibrator: Any = None
    """A fitted calibrator, or ``None``: ``predict_proba`` on ``(n, k)`` beliefs p̂, or on
    ``(n, k + 1)`` belief features under the task's ``unparsed: other`` policy (see
    :class:`~taskcal_agents.decision.Decider`)."""
    n_samples: int = Field(default=16, ge=1)
    """The number of samples N per decision."""
    temperature: float | None = Field(default=1.0, ge=0)
    """Sampling temperature passed per call (``None``: the model's own setting)."""
    seed: int | None = None
    """Base sampling seed passed per call (``None``: unseeded)."""
    alpha: float = Field(default=DEFAULT_ALPHA, ge=0)
    """Dirichlet smoothing prior of the belief (use the calibrator's fitting value)."""
    on_error: Literal["raise", "fallback"] = "raise"
    """After the retries fail: raise :class:`~taskcal_agents.errors.SamplingError`, or
    return the task's fallback decision flagged with the error."""
    max_retries: int = Field(default=0, ge=0)
    """How many times a failed sampling call is retried."""
    retry_wait: float = Field(default=0.0, ge=0)
    """Seconds to wait before the first retry; doubles after each retry."""
    return_samples: bool = False
    """Keep the samples and their labels in the decision."""
    use_n: bool | None = None
    """Force (``True``) or forbid (``False``) one request with ``n``; ``None``: auto."""
    use_task_prompt: bool = True
    """Put ``task.prompt`` (if set) into the request by the one policy of
    :mod:`taskcal_agents.prompting`: appended to the first system message, else prepended
    as one."""
    judge: Any = None
    """For a task whose ``answer_clusters`` method is ``"entailment"``: makes the judge of
    a question, e.g. ``functools.partial(entailment_judge, OpenAISampler(...))`` (see
    :class:`~taskcal_agents.decision.Decider`); not used otherwise. Under answer
    clustering the question is the text of the input's last user message."""

    _decider: Decider = PrivateAttr()

    def __init__(
        self,
        model: Runnable[Any, Any] | None = None,
        task: Task | None = None,
        calibrator: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(model=model, task=task, calibrator=calibrator, **kwargs)
        self._decider = Decider(self.task, self.calibrator, alpha=self.alpha, judge=self.judge)
        if chat_model_of(self.model) is None and (
            self.temperature is not None or self.seed is not None
        ):
            msg = (
                f"TaskCalibratedRunnable parameter 'model' is a {type(self.model).__name__}, not "
                "a chat model, so temperature/seed cannot be passed to it; pass "
                "temperature=None and seed=None to sample it with its own settings."
            )
            raise ConfigurationError(msg)

    @property
    def decider(self) -> Decider:
        """The validated task + calibrator + α used for every decision."""
        return self._decider

    @property
    @override
    def OutputType(self) -> type[Decision]:
        return Decision

    # ------------------------------------------------------------------ helpers

    def _prepare(self, input_: LanguageModelInput) -> LanguageModelInput:
        if not self.task.prompt or not self.use_task_prompt:
            return input_
        return with_task_prompt(to_messages(input_), self.task.prompt)

    def _sample_args(self) -> dict[str, Any]:
        return {
            "n": self.n_samples,
            "temperature": self.temperature,
            "seed": self.seed,
            "use_n": self.use_n,
        }

    def _question(self, input_: LanguageModelInput) -> str | None:
        """The question under answer clustering (``None`` for tasks that do not cluster)."""
        if self.task.answer_clusters is None:
            return None
        return question_of(to_messages(input_))

    def _finish(
        self,
        result: list[AIMessage] | BaseException | None,
        attempts: int,
        question: str | None = None,
    ) -> Decision:
        """Decide from samples, or handle the final error per ``on_error``."""
        if not isinstance(result, BaseException) and result is not None:
            return self._decider.decide(
                result,
                tool_names=bound_tool_names(self.model),
                return_samples=self.return_samples,
                question=question,
            )
        error = result if result is not None else RuntimeError("no result")
        if _is_control_flow(error):
            raise error
        if self.on_error == "fallback":
            return self._decider.fallback(
                f"model error after {attempts} attempt(s): {type(error).__name__}: {error}"
            )
        msg = (
            f"TaskCalibratedRunnable could not sample {self.n_samples} completions from "
            f"{type(self.model).__name__} after {attempts} attempt(s): "
            f"{type(error).__name__}: {error}; raise max_retries or pass on_error='fallback' "
            "to take the task's fallback action instead."
        )
        raise SamplingError(msg) from error

    def _retry_config(
        self,
        config: RunnableConfig,
        run_manager: CallbackManagerForChainRun | AsyncCallbackManagerForChainRun,
        attempt: int,
    ) -> RunnableConfig:
        tag = f"retry:attempt:{attempt}" if attempt > 1 else None
        return patch_config(config, callbacks=run_manager.get_child(tag))

    def _pending(self, results: Sequence[Any]) -> list[int]:
        return [
            i
            for i, r in enumerate(results)
            if isinstance(r, BaseException) and not _is_control_flow(r)
        ]

    # ------------------------------------------------------------------- invoke

    def _invoke(
        self,
        input_: LanguageModelInput,
        run_manager: CallbackManagerForChainRun,
        config: RunnableConfig,
        **kwargs: Any,
    ) -> Decision:
        return _raise_or_return(self._batch([input_], [run_manager], [config], **kwargs)[0])

    @override
    def invoke(
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Decision:
        return self._call_with_config(self._invoke, input, config, **kwargs)

    async def _ainvoke(
        self,
        input_: LanguageModelInput,
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
        **kwargs: Any,
    ) -> Decision:
        return _raise_or_return(
            (await self._abatch([input_], [run_manager], [config], **kwargs))[0]
        )

    @override
    async def ainvoke(
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Decision:
        return await self._acall_with_config(self._ainvoke, input, config, **kwargs)

    # -------------------------------------------------------------------- batch

    def _batch(
        self,
        inputs: list[LanguageModelInput],
        run_manager: list[CallbackManagerForChainRun],
        config: list[RunnableConfig],
        **kwargs: Any,
    ) -> list[Decision | Exception]:
        prepared = [self._prepare(x) for x in inputs]
        results: list[Any] = [None] * len(inputs)
        pending = list(range(len(inputs)))
        attempt = 0
        while pending and attempt <= self.max_retries:
            attempt += 1
            if attempt > 1 and self.retry_wait:
                time.sleep(self.retry_wait * 2 ** (attempt - 2))
            drawn = sample_batch(
                self.model,
                [prepared[i] for i in pending],
                config=[self._retry_config(config[i], run_manager[i], attempt) for i in pending],
                **self._sample_args(),
                **kwargs,
            )
            for i, r in zip(pending, drawn, strict=True):
                results[i] = r
            pending = [pending[j] for j in self._pending(drawn)]
        return self._finish_all(results, attempt, [self._question(x) for x in prepared])

    def _finish_all(
        self, results: list[Any], attempts: int, questions: Sequence[str | None]
    ) -> list[Decision | Exception]:
        out: list[Decision | Exception] = []
        for r, question in zip(results, questions, strict=True):
            try:
                out.append(self._finish(r, attempts, question))
            except Exception as exc:
                out.append(exc)
        return out

    @override
    def batch(
        self,
        inputs: list[LanguageModelInput],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Decision]:
        """Decide for several inputs; ``max_concurrency`` bounds all model calls together."""
        return self._batch_with_config(
            self._batch, inputs, config, return_exceptions=return_exceptions, **kwargs
        )

    async def _abatch(
        self,
        inputs: list[LanguageModelInput],
        run_manager: list[AsyncCallbackManagerForChainRun],
        config: list[RunnableConfig],
        **kwargs: Any,
    ) -> list[Decision | Exception]:
        prepared = [self._prepare(x) for x in inputs]
        results: list[Any] = [None] * len(inputs)
        pending = list(range(len(inputs)))
        attempt = 0
        while pending and attempt <= self.max_retries:
            attempt += 1
            if attempt > 1 and self.retry_wait:
                await asyncio.sleep(self.retry_wait * 2 ** (attempt - 2))
            drawn = await asample_batch(
                self.model,
                [prepared[i] for i in pending],
                config=[self._retry_config(config[i], run_manager[i], attempt) for i in pending],
                **self._sample_args(),
                **kwargs,
            )
            for i, r in zip(pending, drawn, strict=True):
                results[i] = r
            pending = [pending[j] for j in self._pending(drawn)]
        return self._finish_all(results, attempt, [self._question(x) for x in prepared])

    @override
    async def abatch(
        self,
        inputs: list[LanguageModelInput],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Decision]:
        """Async :meth:`batch`."""
        return await self._abatch_with_config(
            self._abatch, inputs, config, return_exceptions=return_exceptions, **kwargs
        )
