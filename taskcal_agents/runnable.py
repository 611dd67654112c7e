"""TaskCalibratedRunnable: chat input → N samples → g_T → belief → calibrator → MBR decision.

Wrap any chat model once and use the result anywhere a LangChain Runnable fits::

    from taskcal_agents import TaskCalibratedRunnable, tasks

    runnable = TaskCalibratedRunnable(model.bind_tools([get_weather]), tasks.tool_decision())
    decision = runnable.invoke("What's the weather?")
    decision.action, decision.message
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.callbacks import (
    AsyncCallbackManagerForChainRun,
    CallbackManagerForChainRun,
)
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage
from langchain_core.runnables import (
    Runnable,
    RunnableBinding,
    RunnableConfig,
    RunnableSerializable,
)
from langchain_core.runnables.base import RunnableBindingBase
from langchain_core.runnables.config import patch_config
from langchain_core.runnables.retry import RunnableRetry
from pydantic import ConfigDict, Field, PrivateAttr
from typing_extensions import override

from taskcal_agents.adaptive import StopCheck, check_adaptive, stop_check_messages, with_stop
from taskcal_agents.answer_clusters import question_of
from taskcal_agents.artefact import (
    ArtefactReloader,
    CalibratorLike,
    ResolvedCalibrator,
    check_reload,
    resolve_calibrator,
)
from taskcal_agents.decision import Decider, Decision
from taskcal_agents.decision_log import DecisionLog, artefact_id, model_name_of, open_decision_log
from taskcal_agents.errors import ConfigurationError, SamplingError, ServerError
from taskcal_agents.grounding import GroundingContext
from taskcal_agents.options import SamplingOptions
from taskcal_agents.prompting import with_task_prompt
from taskcal_agents.sampling import asample_batch, sample_batch
from taskcal_agents.sampling._chat_models import bound_tool_names, bound_tools, chat_model_of
from taskcal_agents.sampling._messages import to_messages
from taskcal_agents.task import Task
from taskcal_agents.tool_turns import answered_tool_calls

__all__ = ["TaskCalibratedRunnable", "split_retry"]


def _is_control_flow(exc: BaseException) -> bool:
    """LangGraph interrupts and other bubble-up signals must never be retried or swallowed."""
    try:
        from langgraph.errors import GraphBubbleUp
    except ImportError:
        return False
    return isinstance(exc, GraphBubbleUp)


def split_retry(
    model: Runnable[Any, Any],
) -> tuple[Runnable[Any, Any], RunnableRetry[Any, Any] | None]:
    """Take the ``with_retry()`` layer out of ``model``'s bindings.

    ``llm.with_retry()`` is a ``RunnableRetry`` (a ``RunnableBindingBase``, which the
    sampler does not look through), and ``llm.bind_tools(...).with_retry()`` puts it under
    the tool binding.

    Returns:
        ``model`` with every ``RunnableRetry`` layer among its bindings replaced by a plain
        ``RunnableBinding`` (bound keyword arguments and config kept; the other layers
        copied), so the sampler finds the chat model and its ``n`` support; and the
        outermost ``RunnableRetry`` (whose policy the caller applies), or ``None``.
    """
    layers: list[RunnableBindingBase[Any, Any]] = []
    retry: RunnableRetry[Any, Any] | None = None
    core = model
    while isinstance(core, RunnableBindingBase):
        if retry is None and isinstance(core, RunnableRetry):
            retry = core
        layers.append(core)
        core = core.bound
    if retry is None:
        return model, None
    for layer in reversed(layers):
        if not isinstance(layer, RunnableRetry):
            core = layer.model_copy(update={"bound": core})
            continue
        core = RunnableBinding(
            bound=core,
            kwargs=layer.kwargs,
            config=layer.config,
            config_factories=layer.config_factories,
            custom_input_type=layer.custom_input_type,
            custom_output_type=layer.custom_output_type,
        )
    return core, retry


@dataclass(frozen=True)
class _RetryPolicy:
    """How often and after how long a failed sampling call is retried."""

    attempts: int
    retry_on: tuple[type[BaseException], ...] | Callable[[BaseException], bool] = (Exception,)
    """The exception types to retry, or a predicate (``with_retry``'s forms)."""
    initial: float = 0.0
    exp_base: float = 2.0
    jitter: float = 0.0
    max_wait: float = float("inf")

    @classmethod
    def of(cls, retry: RunnableRetry[Any, Any]) -> _RetryPolicy:
        """The policy of a ``with_retry()`` layer (tenacity's exponential jitter wait)."""
        retry_on = retry.retry_exception_types
        if not retry.wait_exponential_jitter:
            return cls(retry.max_attempt_number, retry_on)
        params = {"initial": 1.0, "exp_base": 2.0, "jitter": 1.0, "max": float("inf")}
        given: Mapping[str, Any] = retry.exponential_jitter_params or {}
        params.update({k: float(v) for k, v in given.items()})
        return cls(
            retry.max_attempt_number,
            retry_on,
            initial=params["initial"],
            exp_base=params["exp_base"],
            jitter=params["jitter"],
            max_wait=params["max"],
        )

    def wait(self, attempt: int) -> float:
        """Seconds to wait before ``attempt`` (the first retry is attempt 2)."""
        if attempt < 2:
            return 0.0
        delay = self.initial * self.exp_base ** (attempt - 2)
        return min(delay + (random.uniform(0, self.jitter) if self.jitter else 0.0), self.max_wait)

    def retries(self, result: Any) -> bool:
        """Whether ``result`` is a failure to retry (never a control-flow signal)."""
        if not isinstance(result, Exception) or _is_control_flow(result):
            return False
        if isinstance(self.retry_on, tuple):
            return isinstance(result, self.retry_on)
        return bool(self.retry_on(result))


@dataclass(frozen=True)
class _Attempt:
    """One sampling call the drivers make: wait, then ``sample_batch(**call)``."""

    wait: float
    call: dict[str, Any] = field(default_factory=dict)


def _advance(
    steps: Generator[_Attempt, Any, list[Decision | Exception]], drawn: Any = None
) -> _Attempt | list[Decision | Exception]:
    """Send ``drawn`` into ``steps`` (``None`` starts it): the next attempt or the end."""
    try:
        return steps.send(drawn)
    except StopIteration as stop:
        result: list[Decision | Exception] = stop.value
        return result


_Inputs = list[LanguageModelInput]
_Configs = list[RunnableConfig]
_Managers = list[CallbackManagerForChainRun]
_AsyncManagers = list[AsyncCallbackManagerForChainRun]
_Results = list[Decision | Exception]


_GO_ON = StopCheck(stop=False, change_probability=1.0, n_drawn=0, n_max=0)
"""A stand-in verdict for an input not checked yet."""


def _raise_or_return(result: Decision | Exception) -> Decision:
    if isinstance(result, Exception):
        raise result
    return result


class TaskCalibratedRunnable(RunnableSerializable[LanguageModelInput, Decision], SamplingOptions):
    """Turn a chat model into a calibrated, cost-aware decision maker.

    Each call draws ``n_samples`` completions (one request with ``n`` for
    ChatOpenAI-compatible models, else concurrent calls), maps each to a task label with
    the task's parser g_T, forms the Dirichlet-smoothed belief, calibrates it and takes the
    minimum-expected-cost action. The samples appear as child runs of this runnable's
    run in tracing.

    A sampled tool call that repeats one the input already made and answered in its
    current user turn (after its last ``HumanMessage``) is counted as a repeat
    (``Decision.n_repeats``, unparsed) and never returned as the call (see
    :meth:`Decider.decide <taskcal_agents.decision.Decider.decide>`). For the turn right
    after a tool result, decide with a runnable on
    :func:`taskcal_agents.tasks.after_tool_result` (pick it with
    :func:`~taskcal_agents.tool_turns.is_tool_result_turn`, as
    ``examples/langgraph_routing.py`` does).

    Args:
        model: The chat model (tools bound with ``bind_tools`` are kept) or a Runnable
            producing ``AIMessage``/``str``.
        task: The task.
        calibrator: A fitted calibrator for the task's labels, a
            :class:`~taskcal_agents.artefact.CalibratorArtefact`, the path of an artefact
            file (its α is used unless ``alpha`` is given), or ``None``.
        **kwargs: The other fields below and those of
            :class:`~taskcal_agents.options.SamplingOptions` (``n_samples``,
            ``temperature``, ``alpha``, ``adaptive``).

    Raises:
        ConfigurationError: If the calibrator does not match the task, temperature/seed
            are set for a model that is not a chat model, or retries are set both here
            and by ``with_retry()``.
        LabelMismatchError: If the calibrator's (artefact's) labels differ from the task's.
        DataFileError: If an artefact path cannot be read.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model: Runnable[Any, Any]
    """The wrapped model."""
    task: Task
    """The task: labels, actions, cost matrix and parser."""
    calibrator: Any = None
    """The fitted calibrator, or ``None``: ``predict_proba`` on ``(n, k)`` beliefs p̂, or on
    ``(n, k + 1)`` belief features under the task's ``unparsed: other`` policy (see
    :class:`~taskcal_agents.artefact.Calibrator`). Given as a calibrator, a
    :class:`~taskcal_agents.artefact.CalibratorArtefact` or an artefact path; checked
    against the task by :func:`~taskcal_agents.artefact.resolve_calibrator`."""
    seed: int | None = None
    """Base sampling seed passed per call (``None``: unseeded)."""
    on_error: Literal["raise", "fallback"] = "raise"
    """After the retries fail: raise :class:`~taskcal_agents.errors.SamplingError` (a
    :class:`~taskcal_agents.errors.ServerError` naming the URL when an OpenAI-compatible
    server failed: unreachable, timed out, 5xx/429, a body cut short), or return the task's
    fallback decision flagged with the error. With adaptive N a round
    that fails for good does so too: the samples of earlier rounds are discarded, not
    decided on, and the error's attempt count is that round's."""
    max_retries: int = Field(default=0, ge=0)
    """How many times a failed sampling call is retried (with adaptive N, per round). Or
    wrap the model with ``model.with_retry(...)``: its policy is applied here (not both)."""
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
    risk_control: Any = None
    """A calibrated risk limit (:class:`~taskcal_agents.risk_control.RiskControl`) that
    guards each decision (see :class:`~taskcal_agents.decision.Decider`); ``None``: the
    calibrator artefact's, if it carries one."""
    judge: Any = None
    """For a task whose ``answer_clusters`` method is ``"entailment"``: makes the judge of
    a question, e.g. ``functools.partial(entailment_judge, OpenAISampler(...))`` (see
    :class:`~taskcal_agents.decision.Decider`); not used otherwise. Under answer
    clustering the question is the text of the input's last user message."""

    decision_log: Any = None
    """Where each decision is logged after it is taken: a
    :class:`~taskcal_agents.decision_log.DecisionLog` or a path (``.jsonl`` or
    ``.sqlite``/``.db``, see :func:`~taskcal_agents.decision_log.open_decision_log`);
    ``None``: off. The decision's ``decision_id`` is its id in the log (``None`` when
    writing failed: a warning and the log's ``failures`` count, never an exception)."""

    reload_artefact: bool = False
    """Watch the artefact file given as ``calibrator`` (a path) and reload it when it is
    replaced (atomically, e.g. by ``taskcal refit``): each decision stats the file and,
    when it changed, loads and checks it against the task and decides with it (and logs
    its artefact id) from then on. A replacement that cannot be loaded keeps the artefact
    in force with one :class:`~taskcal_agents.errors.ArtefactReloadWarning`. ``calibrator``,
    ``alpha`` and ``risk_control`` keep the values of the first artefact; :attr:`decider`
    is the one in force. See :class:`~taskcal_agents.artefact.ArtefactReloader`."""

    _decider: Decider = PrivateAttr()
    _log: DecisionLog | None = PrivateAttr(default=None)
    _artefact_id: str | None = PrivateAttr(default=None)
    _reloader: ArtefactReloader[tuple[Decider, str | None]] | None = PrivateAttr(default=None)

    def __init__(
        self,
        model: Runnable[Any, Any] | None = None,
        task: Task | None = None,
        calibrator: CalibratorLike | None = None,
        **kwargs: Any,
    ) -> None:
        # pydantic validates this model's fields; mypy types RunnableSerializable's
        # dataclass-transform __init__ with its own fields only.
        super().__init__(model=model, task=task, calibrator=calibrator, **kwargs)  # type: ignore[call-arg]
        explicit = "alpha" in self.model_fields_set
        owner = type(self).__name__
        check_reload(self.calibrator, self.reload_artefact, owner)
        explicit_risk = self.risk_control

        def build(r: ResolvedCalibrator) -> tuple[Decider, str | None]:
            decider = Decider(
                self.task, r.calibrator, alpha=r.alpha, judge=self.judge,
                risk_control=explicit_risk if explicit_risk is not None else r.risk_control,
            )  # fmt: skip
            return decider, artefact_id(r.artefact)

        alpha = self.alpha if explicit else None
        if self.reload_artefact:
            self._reloader = ArtefactReloader(
                self.calibrator, self.task, build, alpha=alpha, n_samples=self.n_samples,
                owner=owner,
            )  # fmt: skip
            resolved = self._reloader.resolved
            self._decider, self._artefact_id = self._reloader.current()
        else:
            resolved = resolve_calibrator(
                self.calibrator, self.task, alpha=alpha, n_samples=self.n_samples, owner=owner
            )
            self._decider, self._artefact_id = build(resolved)
        self.calibrator, self.alpha = resolved.calibrator, resolved.alpha
        if self.risk_control is None:
            self.risk_control = resolved.risk_control
        if self.decision_log is not None:
            self._log = self.decision_log = open_decision_log(self.decision_log)
        sampled, retry = split_retry(self.model)
        if retry is not None and {"max_retries", "retry_wait"} & self.model_fields_set:
            msg = (
                "TaskCalibratedRunnable takes retries from 'max_retries'/'retry_wait' or from "
                "the model's with_retry() layer, not both; drop one of them."
            )
            raise ConfigurationError(msg)
        if chat_model_of(sampled) is None and (
            self.temperature is not None or self.seed is not None
        ):
            msg = (
                f"TaskCalibratedRunnable parameter 'model' is a {type(self.model).__name__}, not "
                "a chat model, so temperature/seed cannot be passed to it; pass "
                "temperature=None and seed=None to sample it with its own settings."
            )
            raise ConfigurationError(msg)
        if self.adaptive is not None:
            check_adaptive(self.task, type(self).__name__)

    @property
    def decider(self) -> Decider:
        """The validated task + calibrator + α in force (see ``reload_artefact``)."""
        return self._in_force()[0]

    def _in_force(self) -> tuple[Decider, str | None]:
        """The Decider and the artefact id of the next decision (reloaded when replaced)."""
        if self._reloader is None:
            return self._decider, self._artefact_id
        return self._reloader.current()

    @property
    @override
    def OutputType(self) -> type[Decision]:
        return Decision

    # ------------------------------------------------------------------ helpers

    def _prepare(self, input_: LanguageModelInput) -> LanguageModelInput:
        if not self.task.prompt or not self.use_task_prompt:
            return input_
        return with_task_prompt(to_messages(input_), self.task.prompt)

    def _sample_args(self, n: int, drawn: int) -> dict[str, Any]:
        """The sampling arguments of a round of ``n`` after ``drawn`` samples.

        The seed moves on by the samples drawn so far, so a later round draws new samples
        (and N concurrent calls get the seeds they would get in one round).
        """
        return {
            "n": n,
            "temperature": self.temperature,
            "seed": None if self.seed is None else self.seed + drawn,
            "use_n": self.use_n,
        }

    def _rounds(self) -> tuple[int, ...]:
        """The cumulative sample counts after each round: ``(n_samples,)`` without adaptive N."""
        if self.adaptive is None:
            return (self.n_samples,)
        return self.adaptive.rounds(self.n_samples)

    def _question(self, input_: LanguageModelInput) -> str | None:
        """The question under answer clustering (``None`` for tasks that do not cluster)."""
        if self.task.answer_clusters is None:
            return None
        return question_of(to_messages(input_))

    def _context(
        self, sampled: Runnable[Any, Any], input_: LanguageModelInput
    ) -> GroundingContext | None:
        """The input's bound tools and conversation, for a task that grounds its calls."""
        if self.task.grounding is None:
            return None
        return GroundingContext(bound_tools(sampled) or (), to_messages(input_))

    def _finish(
        self,
        result: list[AIMessage] | BaseException | None,
        attempts: int,
        question: str | None = None,
        check: StopCheck | None = None,
        in_force: tuple[Decider, str | None] | None = None,
        answered_calls: frozenset[str] = frozenset(),
        context: GroundingContext | None = None,
    ) -> Decision:
        """Decide from samples, or handle the final error per ``on_error``.

        With adaptive N the decision records whether the draw stopped early and the
        stopping rule's last estimate (``check``; 0 when all N were drawn). ``in_force``
        is the Decider and artefact id the batch started with (default: those in force).
        ``answered_calls`` are the calls the input made and answered in its user turn: a sample
        repeating one is a repeat (see :meth:`Decider.decide`). ``context`` is the input's
        tools and conversation, which a task with ``grounding`` checks the calls against.
        """
        decider, aid = in_force if in_force is not None else self._in_force()
        if not isinstance(result, BaseException) and result is not None:
            decision = decider.decide(
                result,
                tool_names=bound_tool_names(split_retry(self.model)[0]),
                return_samples=self.return_samples,
                question=question,
                answered_calls=answered_calls,
                context=context,
            )
            return self._logged(
                decision if self.adaptive is None else with_stop(decision, check), aid
            )
        error = result if result is not None else RuntimeError("no result")
        if _is_control_flow(error):
            raise error
        if self.on_error == "fallback":
            return self._logged(
                decider.fallback(
                    f"model error after {attempts} attempt(s): {type(error).__name__}: {error}"
                ),
                aid,
            )
        msg = (
            f"TaskCalibratedRunnable could not sample {self.n_samples} completions from "
            f"{type(self.model).__name__} after {attempts} attempt(s): "
            f"{type(error).__name__}: {error}; raise max_retries or pass on_error='fallback' "
            "to take the task's fallback action instead."
        )
        raise (ServerError if isinstance(error, ServerError) else SamplingError)(msg) from error

    def _logged(self, decision: Decision, aid: str | None) -> Decision:
        """Log ``decision`` (when a log is set, under artefact id ``aid``) with its id."""
        if self._log is None:
            return decision
        sampled = split_retry(self.model)[0]
        return self._log.log(
            decision,
            task=self.task,
            model_name=model_name_of(chat_model_of(sampled) or sampled),
            artefact_id=aid,
        )

    def _retry_policy(self, retry: RunnableRetry[Any, Any] | None) -> _RetryPolicy:
        if retry is not None:
            return _RetryPolicy.of(retry)
        return _RetryPolicy(self.max_retries + 1, initial=self.retry_wait)

    def _attempts(
        self,
        inputs: list[LanguageModelInput],
        run_manager: Sequence[CallbackManagerForChainRun | AsyncCallbackManagerForChainRun],
        config: list[RunnableConfig],
        kwargs: dict[str, Any],
    ) -> Generator[_Attempt, list[Any], list[Decision | Exception]]:
        """The batch in rounds with their retries, without I/O: yield each call, then decide.

        Without adaptive N there is one round of ``n_samples``; with it, the rounds of
        :meth:`AdaptiveSampling.rounds <taskcal_agents.options.AdaptiveSampling.rounds>`,
        and after each round an input whose stopping rule says stop
        (:func:`~taskcal_agents.adaptive.stop_check_messages`) draws no more. Each attempt
        samples the inputs of the round whose last attempt failed (a retryable error), as
        one ``sample_batch`` call so ``max_concurrency`` bounds them all; its child runs
        are tagged ``retry:attempt:<k>`` from the second attempt on, as ``with_retry()``
        tags them. An input whose round fails for good gets that error (``on_error``), even
        after earlier rounds drew samples: those are discarded; the retry budget and the
        attempt count are per round.
        The sync and async drivers only sleep and sample (:func:`_advance`).
        """
        sampled, retry = split_retry(self.model)
        policy = self._retry_policy(retry)
        tool_names = bound_tool_names(sampled)
        in_force = self._in_force()  # one artefact for the whole batch
        prepared = [self._prepare(x) for x in inputs]
        answered = [answered_tool_calls(to_messages(x)) for x in inputs]
        contexts = [self._context(sampled, x) for x in inputs]
        samples: list[list[AIMessage]] = [[] for _ in inputs]
        errors: list[BaseException | None] = [None] * len(inputs)
        attempts = [0] * len(inputs)
        checks: list[StopCheck | None] = [None] * len(inputs)
        active = list(range(len(inputs)))
        drawn_before = 0
        for total in self._rounds():
            pending, attempt = list(active), 0
            while pending and attempt < policy.attempts:
                attempt += 1
                tag = f"retry:attempt:{attempt}" if attempt > 1 else None
                configs = [
                    patch_config(config[i], callbacks=run_manager[i].get_child(tag))
                    for i in pending
                ]
                call = {
                    "model": sampled,
                    "inputs": [prepared[i] for i in pending],
                    "config": configs,
                    **self._sample_args(total - drawn_before, drawn_before),
                    **kwargs,
                }
                drawn = yield _Attempt(policy.wait(attempt), call)
                for i, r in zip(pending, drawn, strict=True):
                    attempts[i], errors[i] = attempt, r if isinstance(r, BaseException) else None
                    if errors[i] is None:
                        samples[i] = [*samples[i], *r]
                pending = [i for i, r in zip(pending, drawn, strict=True) if policy.retries(r)]
            active = [i for i in active if errors[i] is None]
            drawn_before = total
            if self.adaptive is not None and total < self.n_samples:
                for i in active:
                    checks[i] = stop_check_messages(
                        in_force[0], samples[i], self.n_samples, self.adaptive,
                        tool_names=tool_names, answered_calls=answered[i], context=contexts[i],
                    )  # fmt: skip
                active = [i for i in active if not (checks[i] or _GO_ON).stop]
        out: list[Decision | Exception] = []
        for i, x in enumerate(prepared):
            try:
                out.append(
                    self._finish(
                        errors[i] or samples[i],
                        attempts[i],
                        self._question(x),
                        checks[i],
                        in_force,
                        answered[i],
                        contexts[i],
                    )
                )
            except Exception as exc:
                out.append(exc)
        return out

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
        self, inputs: _Inputs, run_manager: _Managers, config: _Configs, **kwargs: Any
    ) -> _Results:
        steps = self._attempts(inputs, run_manager, config, kwargs)
        step = _advance(steps)
        while isinstance(step, _Attempt):
            time.sleep(step.wait)
            step = _advance(steps, sample_batch(**step.call))
        return step

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
        self, inputs: _Inputs, run_manager: _AsyncManagers, config: _Configs, **kwargs: Any
    ) -> _Results:
        steps = self._attempts(inputs, run_manager, config, kwargs)
        step = _advance(steps)
        while isinstance(step, _Attempt):
            await asyncio.sleep(step.wait)
            step = _advance(steps, await asample_batch(**step.call))
        return step

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
