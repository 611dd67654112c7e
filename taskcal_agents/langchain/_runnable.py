"""TaskCalibratedRunnable: chat input → N samples → g_T → belief → calibrator → MBR decision.

Wrap any chat model once and use the result anywhere a LangChain Runnable fits::

    from taskcal_agents import TaskCalibratedRunnable
    from taskcal_agents.decision import tool_decision

    runnable = TaskCalibratedRunnable(model.bind_tools([get_weather]), tool_decision())
    decision = runnable.invoke("What's the weather?")
    decision.action, decision.message
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Self

from langchain_core.callbacks import (
    AsyncCallbackManagerForChainRun,
    CallbackManagerForChainRun,
)
from langchain_core.language_models import LanguageModelInput
from langchain_core.runnables import (
    Runnable,
    RunnableConfig,
    RunnableSerializable,
)
from langchain_core.runnables.config import patch_config
from pydantic import ConfigDict, PrivateAttr, ValidationError
from typing_extensions import override

from taskcal_agents.decision import (
    CalibratorLike,
    Decider,
    Decision,
    Draw,
    Drawn,
    RetryPolicy,
    SamplingOptions,
    Task,
)
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.langchain._session import (
    DecisionSession,
    PendingDecision,
    configuration_error,
    decided,
    rebuilt,
)
from taskcal_agents.production import model_name_of
from taskcal_agents.sampling import (
    asample_batch,
    bound_tool_names,
    bound_tools,
    chat_model_of,
    sample_batch,
    split_retry,
)

__all__ = ["TaskCalibratedRunnable"]


_Inputs = list[LanguageModelInput]
_Configs = list[RunnableConfig]
_Managers = list[CallbackManagerForChainRun]
_AsyncManagers = list[AsyncCallbackManagerForChainRun]
_Results = list[Decision | Exception]


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
    after a tool result, decide with a runnable on the task's tool-result task,
    :func:`after_tool_result_for(task) <taskcal_agents.decision.after_tool_result_for>`,
    which keeps the task's trust policy (pick it with
    :func:`~taskcal_agents.parsing.is_tool_result_turn`, as
    ``examples/langgraph_routing.py`` does).

    Args:
        model: The chat model (tools bound with ``bind_tools`` are kept) or a Runnable
            producing ``AIMessage``/``str``.
        task: The task.
        calibrator: A fitted calibrator for the task's labels, a
            :class:`~taskcal_agents.decision.CalibratorArtefact`, the path of an artefact
            file (its α is used unless ``alpha`` is given), ``"auto"`` (the default: the
            calibrator shipped for the served model and these sampling settings, else the
            raw belief with one :class:`~taskcal_agents.decision.UncalibratedWarning`), or
            ``None`` (the raw belief).
        **kwargs: The other fields below and those of
            :class:`~taskcal_agents.decision.SamplingOptions` (``n_samples``,
            ``temperature``, ``alpha``, ``adaptive``).

    A copy (``model_copy``, ``configurable_fields``, a chat model's ``with_model`` or
    ``bind_tools``) is built by the constructor from its parameters, so it decides exactly
    as a runnable built fresh with them. Settings given per call (``invoke``'s keyword
    arguments, a ``.bind(...)``: a temperature, a ``tool_choice``) are what is sampled, and
    the calibrator is picked (``"auto"``) or checked (an artefact) for them.

    Raises:
        UnknownArgumentError: For an argument it does not take (a ``ConfigurationError``
            and a ``TypeError``), naming the closest one.
        ConfigurationError: If an argument is invalid, the calibrator does not match the
            task, temperature/seed are set for a model that is not a chat model, retries
            are set both here and by ``with_retry()``, or (``strict_calibrator``) an
            explicit artefact does not match how the runnable samples.
        LabelMismatchError: If the calibrator's (artefact's) labels differ from the task's.
        DataFileError: If an artefact path cannot be read.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    model: Runnable[Any, Any]
    """The wrapped model."""
    task: Task
    """The task: labels, actions, cost matrix and parser."""
    calibrator: Any = "auto"
    """The fitted calibrator, or ``None``: ``predict_proba`` on ``(n, k)`` beliefs p̂, or on
    ``(n, k + 1)`` belief features under the task's ``unparsed: other`` policy (see
    :class:`~taskcal_agents.decision._artefact.Calibrator`). Given as a calibrator, a
    :class:`~taskcal_agents.decision.CalibratorArtefact`, an artefact path or
    ``"auto"``; checked against the task by
    :func:`~taskcal_agents.decision._artefact.resolve_calibrator`."""
    seed: int | None = None
    """Base sampling seed passed per call (``None``: unseeded)."""
    return_samples: bool = False
    """Keep the samples and their labels in the decision."""
    use_n: bool | None = None
    """Force (``True``) or forbid (``False``) one request with ``n``; ``None``: auto."""
    use_task_prompt: bool = True
    """Put ``task.prompt`` (if set) into the request by the one policy of
    :mod:`taskcal_agents.sampling._prompts`: appended to the first system message, else prepended
    as one."""
    risk_control: Any = None
    """A calibrated risk limit (:class:`~taskcal_agents.decision._risk_control.RiskControl`) that
    guards each decision (see :class:`~taskcal_agents.decision.Decider`); ``None``: the
    calibrator artefact's, if it carries one."""
    judge: Any = None
    """For a task whose ``answer_clusters`` method is ``"entailment"``: makes the judge of
    a question, e.g. ``functools.partial(entailment_judge, OpenAISampler(...))`` (see
    :class:`~taskcal_agents.decision.Decider`); not used otherwise. Under answer
    clustering the question is the text of the input's last user message."""

    decision_log: Any = None
    """Where each decision is logged after it is taken: a
    :class:`~taskcal_agents.production.DecisionLog` or a path (``.jsonl`` or
    ``.sqlite``/``.db``, see :func:`~taskcal_agents.production.open_decision_log`);
    ``None``: off. The decision's ``decision_id`` is its id in the log (``None`` when
    writing failed: a warning and the log's ``failures`` count, never an exception)."""

    reload_artefact: bool = False
    """Watch the artefact file given as ``calibrator`` (a path) and reload it when it is
    replaced (atomically, e.g. by ``taskcal refit``): each decision stats the file and,
    when it changed, loads and checks it against the task and decides with it (and logs
    its artefact id) from then on. A replacement that cannot be loaded keeps the artefact
    in force with one :class:`~taskcal_agents.errors.ArtefactReloadWarning`. :attr:`decider`
    is the one in force. See :class:`~taskcal_agents.production.ArtefactReloader`."""

    strict_calibrator: bool = False
    """Refuse (:class:`~taskcal_agents.errors.ConfigurationError`) an explicit artefact
    whose record does not match how this runnable samples (model, N, temperature, ...),
    instead of warning once (:class:`~taskcal_agents.decision.CalibratorMismatchWarning`)
    and using it; see :func:`~taskcal_agents.decision.check_artefact`."""

    _session: DecisionSession = PrivateAttr()

    def __init__(
        self,
        model: Runnable[Any, Any] | None = None,
        task: Task | None = None,
        calibrator: CalibratorLike | None = "auto",
        **kwargs: Any,
    ) -> None:
        # pydantic validates this model's fields; mypy types RunnableSerializable's
        # dataclass-transform __init__ with its own fields only.
        try:
            super().__init__(model=model, task=task, calibrator=calibrator, **kwargs)  # type: ignore[call-arg]
        except ValidationError as exc:
            raise configuration_error(type(self).__name__, exc, type(self).model_fields) from exc
        self._session = self._new_session()
        self.decision_log = self._session.log  # one opened log, shared by every copy

    def _new_session(self) -> DecisionSession:
        """The session these parameters make (built anew for every copy)."""
        sampled, retry = split_retry(self.model)
        if retry is not None and (self.max_retries != 0 or self.retry_wait != 0):
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
        return DecisionSession(
            self.task, self.calibrator, options=self, owner=type(self).__name__,
            model=sampled, task_prompt=self.use_task_prompt,
            judge=self.judge, risk_control=self.risk_control,
            reload_artefact=self.reload_artefact, decision_log=self.decision_log,
            retry=None if retry is None else RetryPolicy.of_runnable_retry(retry),
            seed=self.seed, strict=self.strict_calibrator,
        )  # fmt: skip

    @override
    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A new runnable from this one's parameters with ``update`` applied.

        As scikit-learn's ``clone``: the copy is built by the constructor, so its
        calibrator (``"auto"``'s pick for its model and settings, an artefact checked
        against them), α, risk limit and session are resolved anew; nothing derived
        travels with it. The decision log stays the one this runnable opened.
        """
        return rebuilt(self, update, deep=deep)

    def __copy__(self) -> Self:
        return self.model_copy()

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        return self.model_copy(deep=True)

    @property
    def decider(self) -> Decider:
        """The validated task + calibrator + α in force (see ``reload_artefact``)."""
        return self._session.in_force().decider

    @property
    def session(self) -> DecisionSession:
        """The decision's assembly: calibrator in force, options, retries, seeds, log."""
        return self._session

    @property
    @override
    def OutputType(self) -> type[Decision]:
        return Decision

    # ------------------------------------------------------------------ helpers

    def _begin(
        self,
        inputs: list[LanguageModelInput],
        run_manager: Sequence[CallbackManagerForChainRun | AsyncCallbackManagerForChainRun],
        config: list[RunnableConfig],
        kwargs: dict[str, Any],
    ) -> tuple[PendingDecision, Callable[[Draw], dict[str, Any]]]:
        """The decision of a batch, begun, and the ``sample_batch`` arguments of a draw.

        One artefact decides the whole batch. Each draw samples the inputs it names as one
        ``sample_batch`` call, so ``max_concurrency`` bounds them all; its child runs are
        tagged ``retry:attempt:<k>`` from the second attempt on, as ``with_retry()`` tags
        them; the seed moves on by the samples drawn so far.
        """
        sampled = split_retry(self.model)[0]
        # Per-call settings (invoke's keyword arguments, a .bind() over this runnable) are
        # what is sampled: the calibrator is the one for them.
        served = self._session.served_by(sampled, request_settings=kwargs) if kwargs else None
        pending = self._session.begin(
            inputs, tools=bound_tools(sampled), tool_names=bound_tool_names(sampled), served=served,
            return_samples=self.return_samples,
            what=f"{type(self).__name__} could not sample {self.n_samples} completions from "
            f"{type(self.model).__name__}",
        )  # fmt: skip

        def call(draw: Draw) -> dict[str, Any]:
            tag = f"retry:attempt:{draw.attempt}" if draw.attempt > 1 else None
            args = pending.sample_args(draw)
            # A call's keyword arguments override the samples' settings, never a one-pass
            # request's own (its temperature, max_tokens=1, the choice constraint).
            settings = (
                {**args, "use_n": self.use_n, **kwargs}
                if draw.request is None
                else {"use_n": self.use_n, **kwargs, **args}
            )
            return {
                "model": sampled,
                "inputs": [pending.prompt(draw, i) for i in draw.items],
                "config": [
                    patch_config(config[i], callbacks=run_manager[i].get_child(tag))
                    for i in draw.items
                ],
                **settings,
            }

        return pending, call

    def _model_name(self) -> str | None:
        """The served model's name, for the decision log."""
        sampled = split_retry(self.model)[0]
        return model_name_of(chat_model_of(sampled) or sampled)

    # ------------------------------------------------------------------- invoke

    def _invoke(
        self,
        input_: LanguageModelInput,
        run_manager: CallbackManagerForChainRun,
        config: RunnableConfig,
        **kwargs: Any,
    ) -> Decision:
        return decided(self._batch([input_], [run_manager], [config], **kwargs)[0])

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
        return decided((await self._abatch([input_], [run_manager], [config], **kwargs))[0])

    @override
    async def ainvoke(
        self, input: LanguageModelInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Decision:
        return await self._acall_with_config(self._ainvoke, input, config, **kwargs)

    # -------------------------------------------------------------------- batch

    def _batch(
        self, inputs: _Inputs, run_manager: _Managers, config: _Configs, **kwargs: Any
    ) -> _Results:
        pending, call = self._begin(inputs, run_manager, config, kwargs)
        return pending.run(lambda draw: sample_batch(**call(draw)), model_name=self._model_name)

    @override
    def batch(
        self,
        inputs: list[LanguageModelInput],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Decision]:
        """Decide for several inputs; ``max_concurrency`` bounds all model calls together.

        A one-pass belief's requests follow one another per input (the greedy completion
        after the choice), so its inputs are decided concurrently, each as :meth:`invoke`
        decides it, at most ``max_concurrency`` at a time (LangChain's default ``batch``).
        """
        if self.belief == "one_pass":
            return super().batch(inputs, config, return_exceptions=return_exceptions, **kwargs)
        return self._batch_with_config(
            self._batch, inputs, config, return_exceptions=return_exceptions, **kwargs
        )

    async def _abatch(
        self, inputs: _Inputs, run_manager: _AsyncManagers, config: _Configs, **kwargs: Any
    ) -> _Results:
        pending, call = self._begin(inputs, run_manager, config, kwargs)

        async def draw(request: Draw) -> Drawn:
            return await asample_batch(**call(request))

        return await pending.arun(draw, model_name=self._model_name)

    @override
    async def abatch(
        self,
        inputs: list[LanguageModelInput],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[Decision]:
        """Async :meth:`batch` (a one-pass belief's inputs as :meth:`ainvoke`, concurrently)."""
        if self.belief == "one_pass":
            return await super().abatch(
                inputs, config, return_exceptions=return_exceptions, **kwargs
            )
        return await self._abatch_with_config(
            self._abatch, inputs, config, return_exceptions=return_exceptions, **kwargs
        )
