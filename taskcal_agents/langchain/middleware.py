"""Agent middleware: calibrated call / ask / abstain decisions inside ``create_agent``.

:class:`TaskCalibrationMiddleware` wraps the agent's model call. When the model is about
to act on a user turn it draws N completions through the request's model, maps each to a
task label with the task's parser (g_T), calibrates the belief and takes the
minimum-Bayes-risk action under the deployment's cost matrix. The agent then receives one
message: the representative tool call (the loop continues into the tools), a clarifying
question, or an abstention (both end the run, since they make no tool call). The
:class:`~taskcal_agents.decision.decider.Decision` is attached to that message's
``response_metadata["taskcal_decision"]`` and appended to the agent state's
``taskcal_decisions`` list, both as JSON-able dicts (safe for any checkpointer).

Per-deployment configuration comes from files: a task file (YAML or JSON, see
:meth:`Task.from_file <taskcal_agents.decision.task.Task.from_file>`) and the calibrator artefact
written by ``taskcal fit`` (see :class:`~taskcal_agents.decision.artefact.CalibratorArtefact`).
"""

from __future__ import annotations

import asyncio
import functools
import operator
import os
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, NotRequired, TypedDict

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables.config import ContextThreadPoolExecutor, ensure_config
from pydantic import ValidationError
from typing_extensions import Unpack, override

try:
    from langchain.agents.middleware.types import (
        AgentMiddleware,
        AgentState,
        ContextT,
        ExtendedModelResponse,
        ModelRequest,
        ModelResponse,
        OmitFromSchema,
        ResponseT,
    )
    from langgraph.types import Command
except ImportError as exc:
    _msg = (
        "taskcal_agents.langchain.middleware needs langchain and langgraph, the 'agents' extra: "
        f"pip install 'taskcal-agents[agents]' ({exc})"
    )
    raise ImportError(_msg, name=exc.name) from exc

from taskcal_agents.decision.adaptive import (
    check_adaptive,
)
from taskcal_agents.decision.artefact import (
    Calibrator,
    CalibratorLike,
    as_artefact,
    resolve_calibrator,
)
from taskcal_agents.decision.decider import Decider, Decision
from taskcal_agents.decision.options import (
    SamplingOptions,
)
from taskcal_agents.decision.presets import after_tool_result_for
from taskcal_agents.decision.protocol import (
    Draw,
    Drawn,
)
from taskcal_agents.decision.risk_control import RiskControl
from taskcal_agents.decision.shipped import (
    AUTO,
    Auto,
)
from taskcal_agents.decision.task import Task
from taskcal_agents.errors import ConfigurationError, SamplingError
from taskcal_agents.langchain._legacy import DeprecatedArguments, migrated
from taskcal_agents.parsing.labels import tool_names_of
from taskcal_agents.parsing.tool_turns import (
    is_tool_result_turn,
)
from taskcal_agents.production.decision_log import (
    DecisionLogLike,
    model_name_of,
)
from taskcal_agents.production.reload import check_reload
from taskcal_agents.production.session import DECISION_METADATA_KEY, DecisionSession, InForce
from taskcal_agents.sampling import (
    adrive_rounds,
    asample_messages,
    drive_rounds,
    is_malformed_choice,
    malformed_message,
    sample_messages,
    served_settings,
)
from taskcal_agents.sampling.prompts import request_with_task_prompt

if TYPE_CHECKING:
    from langchain_core.language_models import LanguageModelInput
    from langchain_core.runnables import Runnable

__all__ = [
    "DeprecatedArguments",
    "TaskCalibrationMiddleware",
    "TaskCalibrationState",
    "ToolResultConfig",
    "decision_from_message",
]

_OMIT_FROM_INPUT = OmitFromSchema(input=True, output=False)

SamplingMode = Literal["auto", "model", "handler"]
DecideOn = Literal["user_turn", "every_call"]


class TaskCalibrationState(AgentState[ResponseT]):
    """State schema of :class:`TaskCalibrationMiddleware`.

    Extends ``AgentState`` with the decisions taken in this thread, oldest first, each
    the JSON-able dict of :meth:`Decision.to_metadata
    <taskcal_agents.decision.decider.Decision.to_metadata>`.
    """

    # The reducer must come last in ``Annotated``: LangGraph reads the last item.
    taskcal_decisions: NotRequired[Annotated[list[dict[str, Any]], _OMIT_FROM_INPUT, operator.add]]


# ------------------------------------------------------------------------ helpers


def decision_from_message(message: BaseMessage) -> Decision | None:
    """Return the decision attached to a message by the middleware, or ``None``.

    The rebuilt decision has no ``message`` and no ``samples``.
    """
    record = message.response_metadata.get(DECISION_METADATA_KEY)
    return None if record is None else Decision.model_validate(record)


def _is_user_turn(messages: Sequence[BaseMessage]) -> bool:
    return bool(messages) and isinstance(messages[-1], HumanMessage)


def _bound_model(request: ModelRequest[Any]) -> Runnable[LanguageModelInput, BaseMessage]:
    """Bind the request's tools and settings to its model, as the agent does."""
    if request.tools:
        return request.model.bind_tools(
            request.tools, tool_choice=request.tool_choice, **request.model_settings
        )
    return request.model.bind(**request.model_settings)


def _model_input(request: ModelRequest[Any]) -> list[BaseMessage]:
    if request.system_message is None:
        return list(request.messages)
    return [request.system_message, *request.messages]


def _first_ai(response: ModelResponse[Any]) -> AIMessage | None:
    return next((m for m in response.result if isinstance(m, AIMessage)), None)


def _malformed(error: ValidationError) -> ModelResponse[Any]:
    """A handler call that failed on a malformed model output: one unparsed sample.

    langchain-openai fails a whole call over tool-call arguments that are not an object; as
    on the ``sampling="model"`` path, the sample is counted unparsed, not a failed draw. Any
    other validation error is raised.
    """
    if not is_malformed_choice(error):
        raise error
    return ModelResponse(result=[malformed_message(error)])


def _load_task(task: Task | str | os.PathLike[str], owner: str, name: str) -> Task:
    """A Task, or the task in the file at ``task``."""
    if isinstance(task, str | os.PathLike):
        return Task.from_file(task)
    if not isinstance(task, Task):
        msg = f"{owner} parameter {name!r} must be a Task or the path of a task file, got {task!r}."
        raise ConfigurationError(msg)
    return task


class ToolResultConfig(TypedDict, total=False):
    """The decision right after a tool result (``tool_result=`` of the middleware)."""

    task: Task | str | os.PathLike[str]
    """Its task, or the path of a task file (absent: derived from the middleware's task)."""
    calibrator: CalibratorLike | None
    """Its calibrator (absent or ``None``: the raw belief)."""


def _tool_result_task(
    owner: str, task: Task, tool_result: ToolResultConfig | Auto | None
) -> Task | None:
    """The task decided right after a tool result (``None``: ``task`` itself)."""
    if tool_result is None:
        return None
    config: ToolResultConfig = {} if tool_result == AUTO else tool_result  # type: ignore[assignment]
    if not isinstance(config, dict) or set(config) - {"task", "calibrator"}:
        msg = (
            f"{owner} parameter 'tool_result' must be 'auto', None or a ToolResultConfig "
            f"(keys 'task', 'calibrator'), got {tool_result!r}."
        )
        raise ConfigurationError(msg)
    if "task" in config:
        return _load_task(config["task"], owner, "tool_result")
    after = after_tool_result_for(task)
    if after is None and config.get("calibrator") is not None:
        msg = (
            f"{owner} parameter 'tool_result' has a calibrator but no task, and task "
            f"{task.name!r} derives none; pass the task the calibrator was fitted for."
        )
        raise ConfigurationError(msg)
    return after


class TaskCalibrationMiddleware(
    AgentMiddleware[TaskCalibrationState[ResponseT], ContextT, ResponseT]
):
    """Calibrated, cost-aware call / ask / abstain decisions for ``create_agent``.

    On each user turn (or every model call, see ``decide_on``) the middleware samples
    ``n_samples`` completions through the request's model, decides by calibrated
    minimum Bayes risk and returns the decision's message: the most frequent tool call
    (the agent runs the tool), the most typical clarifying question, or the task's
    abstention text (both end the run). The decision is in the message's
    ``response_metadata["taskcal_decision"]`` and in the state's ``taskcal_decisions``.

    Example:
        ```python
        from langchain.agents import create_agent
        from taskcal_agents.decision import SamplingOptions
        from taskcal_agents.decision.presets import tool_decision
        from taskcal_agents.langchain.middleware import TaskCalibrationMiddleware

        middleware = TaskCalibrationMiddleware(
            task=tool_decision(), options=SamplingOptions(n_samples=8)
        )
        agent = create_agent(model, tools=[get_weather], middleware=[middleware])
        result = agent.invoke({"messages": [("user", "Weather in Paris?")]})
        print(result["taskcal_decisions"][-1]["action"])
        ```

    Put it last in ``middleware`` (innermost) when ``sampling="model"``: that path calls
    the model directly, so middleware inside it would not see the samples.
    """

    state_schema = TaskCalibrationState  # type: ignore[assignment]

    def __init__(
        self,
        *,
        task: Task | str | os.PathLike[str] | None = None,
        calibrator: CalibratorLike | Auto | None = AUTO,
        options: SamplingOptions | None = None,
        sampling: SamplingMode = "auto",
        decide_on: DecideOn = "user_turn",
        tool_result: ToolResultConfig | Auto | None = "auto",
        decision_log: DecisionLogLike | None = None,
        reload_artefact: bool = False,
        **deprecated: Unpack[DeprecatedArguments],
    ) -> None:
        """Validate and store the configuration.

        Args:
            task: The task (tool call / ask / abstain, e.g.
                :func:`taskcal_agents.decision.presets.tool_decision`) or the path of a task file.
                May be omitted when ``calibrator`` is an artefact holding the full task.
            calibrator: A fitted calibrator, a
                :class:`~taskcal_agents.decision.artefact.CalibratorArtefact`, the path of an
                artefact file, ``"auto"`` (the default: the calibrator shipped for the
                request's model and these sampling settings, found on the first request,
                else the raw belief with one
                :class:`~taskcal_agents.decision.shipped.UncalibratedWarning`; see
                :mod:`taskcal_agents.decision.shipped`), or ``None`` to decide on the raw
                belief; checked against the task by
                :func:`~taskcal_agents.decision.artefact.resolve_calibrator`.
            options: N, temperature, α (default: the artefact's), adaptive N, retries and
                ``on_error`` (:class:`~taskcal_agents.decision.options.SamplingOptions`);
                ``None``: the defaults. Without ``n``, at most the run config's
                ``max_concurrency`` calls run at once.
            sampling: How to draw the samples. ``"model"``: through the request's model
                (tools and settings bound as the agent binds them) with one call asking
                for ``n`` where the model supports it, else N concurrent calls.
                ``"handler"``: N calls of the agent's model handler (inner middleware
                and structured output apply to each). ``"auto"``: ``"handler"`` when the
                request has a ``response_format``, else ``"model"``.
            decide_on: ``"user_turn"``: decide only when the last message is from the
                user, and pass later calls (after tool results) through unchanged (add
                :class:`~taskcal_agents.langchain.reply_guard.ToolReplyMiddleware` to vet
                the model's replies there). ``"every_call"``: decide on every model call.
            tool_result: Under ``decide_on="every_call"``, the decision right after a tool
                result (:class:`ToolResultConfig`: its ``task``, a task or task file, and
                ``calibrator``). ``"auto"`` (the default), or no ``task`` in it:
                :func:`~taskcal_agents.decision.presets.after_tool_result` with the task's
                tools, texts and own prompt when ``task`` is a ``tool_decision`` task, else
                ``task`` itself. ``None``: ``task`` (and ``calibrator``) decide on those
                turns too. On every turn a sampled call that repeats a call already
                answered in the current user turn is never sent again.
            decision_log: Log each decision after it is taken: a
                :class:`~taskcal_agents.production.decision_log.DecisionLog` or a path (``.jsonl``,
                ``.sqlite``/``.db``); ``None``: off. The decision's ``decision_id`` is its
                id in the log; a failure to write warns and counts, never raises.
            reload_artefact: Watch the artefact file given as ``calibrator`` (a path) and
                reload it when it is replaced (see
                :class:`~taskcal_agents.production.reload.ArtefactReloader`).
            **deprecated: The keyword arguments of 0.1 (:class:`DeprecatedArguments`), for
                one more release, each with a ``DeprecationWarning``.

        Raises:
            ConfigurationError: If a parameter is invalid.
            LabelMismatchError: If the calibrator's labels differ from the task's.
            DataFileError: If a task or artefact file cannot be read.
            TypeError: For an unknown keyword argument.
        """
        super().__init__()
        owner = type(self).__name__
        old = migrated(owner, options, tool_result, dict(deprecated))
        options, tool_result = old.options, old.tool_result
        check_reload(calibrator, reload_artefact, owner)
        artefact = as_artefact(calibrator)
        if task is None:
            if artefact is None or artefact.task is None:
                msg = (
                    f"{owner} parameter 'task' is required unless 'calibrator' is an "
                    "artefact file that holds the full task; got task=None; pass a Task "
                    "or the path of a task file."
                )
                raise ConfigurationError(msg)
            task = artefact.task
        else:
            task = _load_task(task, owner, "task")
        explicit_alpha = options.alpha if "alpha" in options.model_fields_set else None
        self._session = DecisionSession(
            task, calibrator if reload_artefact else artefact or calibrator, options=options,
            owner=owner, alpha=explicit_alpha, judge=old.judge, reload_artefact=reload_artefact,
            decision_log=decision_log,
        )  # fmt: skip
        resolved = self._session.resolved
        for name, value, allowed in (
            ("sampling", sampling, ("auto", "model", "handler")),
            ("decide_on", decide_on, ("user_turn", "every_call")),
        ):
            if value not in allowed:
                msg = f"{owner} parameter {name!r} must be one of {allowed!r}, got {value!r}."
                raise ConfigurationError(msg)
        after = _tool_result_task(owner, task, tool_result)
        if options.adaptive is not None:
            check_adaptive(task, owner, options.adaptive)
            if after is not None:
                check_adaptive(after, owner)
        self._max_concurrency = old.max_concurrency
        self._use_task_prompt = old.use_task_prompt
        self.task: Task = task
        """The task: labels, actions, cost matrix and parser."""
        self.calibrator: Calibrator | None = resolved.calibrator
        """The fitted calibrator, or ``None``."""
        self.options = self._session.options = options.model_copy(update={"alpha": resolved.alpha})
        """N, temperature, α (the calibrator's unless given), adaptive N, retries and
        ``on_error`` (see :class:`~taskcal_agents.decision.options.SamplingOptions`)."""
        self.sampling: SamplingMode = sampling
        """How samples are drawn (``"auto"``, ``"model"`` or ``"handler"``)."""
        self.decide_on: DecideOn = decide_on
        """When to decide (``"user_turn"`` or ``"every_call"``)."""
        self.risk_control: RiskControl | None = resolved.risk_control
        """The artefact's risk limit that guards each decision, or ``None``."""
        self.decision_log = self._session.log
        """The decision log, or ``None``."""
        self.tool_result_task: Task | None = after
        """The task decided right after a tool result (``decide_on="every_call"``), or
        ``None``: :attr:`task` decides there too."""
        self._after_decider: Decider | None = None
        if after is not None:
            r = resolve_calibrator(
                tool_result.get("calibrator") if isinstance(tool_result, dict) else None,
                after, alpha=explicit_alpha,
                n_samples=options.n_samples, owner=owner,
            )  # fmt: skip
            self._after_decider = Decider.from_resolved(after, r)

    def _in_force(self, request: ModelRequest[Any] | None = None) -> InForce:
        """The Decider and the artefact id of ``request``'s decision (reloaded when replaced).

        After a tool result (the last of the request's messages) that is the
        ``tool_result_task``'s Decider when there is one (its calibrator is not an artefact
        file: no id). Under ``calibrator="auto"``, the one for the request's model and this
        middleware's sampling settings (resolved on first use, then kept); without a
        request, the raw belief's.
        """
        if request is None:
            return self._session.in_force()
        if self._after_decider is not None and is_tool_result_turn(request.messages):
            return InForce(self._after_decider, None)
        if not self._session.per_call:
            return self._session.in_force()
        served = served_settings(
            request.model, n_samples=self.options.n_samples,
            temperature=self.options.temperature, task_prompt=self._use_task_prompt,
            alpha=self._session.alpha,
            request_settings=request.model_settings,
            tool_choice=request.tool_choice if request.tools else None,
        )  # fmt: skip
        return self._session.in_force(served)

    # ------------------------------------------------------------ pure steps

    def _should_decide(self, request: ModelRequest[Any]) -> bool:
        return self.decide_on == "every_call" or _is_user_turn(request.messages)

    def _mode(self, request: ModelRequest[Any]) -> Literal["model", "handler"]:
        if self.sampling == "auto":
            return "handler" if request.response_format is not None else "model"
        return self.sampling

    def _sample_request(self, request: ModelRequest[Any], task: Task) -> ModelRequest[Any]:
        """Return the request the samples are drawn with (``task``'s prompt, temperature)."""
        overrides: dict[str, Any] = {}
        prompt = task.prompt if self._use_task_prompt else None
        if prompt:
            overrides["system_message"], overrides["messages"] = request_with_task_prompt(
                request.system_message, request.messages, prompt
            )
        if self.options.temperature is not None:
            overrides["model_settings"] = {
                **request.model_settings,
                "temperature": self.options.temperature,
            }
        return request.override(**overrides) if overrides else request

    def _workers(self, n: int) -> int:
        limit = self._max_concurrency or ensure_config().get("max_concurrency")
        return min(n, limit or n)

    def _respond(
        self,
        request: ModelRequest[Any],
        decision: Decision,
        task: Task,
        responses: Sequence[ModelResponse[Any]] = (),
    ) -> ExtendedModelResponse[Any]:
        """The response for ``decision`` (already logged) on ``task``."""
        message = self._session.reply(decision, task, request.messages)
        structured = None
        if message.id is not None:
            for response in responses:
                first = _first_ai(response)
                if first is not None and first.id == message.id:
                    structured = response.structured_response
                    break
        return ExtendedModelResponse(
            model_response=ModelResponse(result=[message], structured_response=structured),
            command=Command(update={"taskcal_decisions": [decision.to_metadata()]}),
        )

    @staticmethod
    def _samples(responses: Sequence[ModelResponse[Any]]) -> list[AIMessage]:
        """One sample per handler response; one without an AI message is an unparsed one."""
        return [
            _first_ai(r) or malformed_message(SamplingError("the response held no AIMessage"))
            for r in responses
        ]

    def _protocol(
        self, request: ModelRequest[Any]
    ) -> tuple[Generator[Draw, Drawn, list[Decision | BaseException]], InForce]:
        """The decision protocol of one model call, with the Decider and artefact id in force.

        One artefact decides the whole call; the rounds, the retries and the fallback are
        :func:`~taskcal_agents.decision.protocol.decide_in_rounds`'s.
        """
        in_force = self._in_force(request)
        system = [request.system_message] if request.system_message is not None else []
        item = self._session.item(
            in_force.decider.task, [*system, *request.messages], request.tools
        )
        protocol = self._session.protocol(
            in_force, [item], tool_names=tool_names_of(request.tools),
            what=f"{type(self).__name__} could not sample {self.options.n_samples} completions",
        )  # fmt: skip
        return protocol, in_force

    def _finish(
        self,
        request: ModelRequest[Any],
        result: Decision | BaseException,
        responses: Sequence[ModelResponse[Any]],
        in_force: InForce,
    ) -> ExtendedModelResponse[Any]:
        name = functools.partial(model_name_of, request.model)  # called only when logged
        decision = self._session.decided(result, in_force, model_name=name)
        return self._respond(request, decision, in_force.decider.task, responses)

    def _model_call(
        self, request: ModelRequest[Any], sample_request: ModelRequest[Any], n: int
    ) -> dict[str, Any]:
        """The arguments of ``sample_messages`` for ``sampling="model"``."""
        return {
            "model": _bound_model(request),
            "input": _model_input(sample_request),
            "n": n,
            "temperature": self.options.temperature,
            "config": {"max_concurrency": self._workers(n)},
        }

    def _decide_sync(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Any]
    ) -> ExtendedModelResponse[Any]:
        """Sample in rounds (``handler`` or the model, per ``sampling``), decide, respond."""
        protocol, in_force = self._protocol(request)
        task = in_force.decider.task
        mode, sample_request = self._mode(request), self._sample_request(request, task)
        responses: list[ModelResponse[Any]] = []

        def draw(d: Draw) -> Drawn:
            if mode == "model":
                return [sample_messages(**self._model_call(request, sample_request, d.n))]

            def one(_: int) -> ModelResponse[Any]:
                try:
                    return handler(sample_request)
                except ValidationError as exc:
                    return _malformed(exc)

            with ContextThreadPoolExecutor(max_workers=self._workers(d.n)) as pool:
                drawn = list(pool.map(one, range(d.n)))
            responses.extend(drawn)
            return [self._samples(drawn)]

        result = drive_rounds(protocol, draw)[0]
        return self._finish(request, result, responses, in_force)

    async def _decide_async(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[Any]]
    ) -> ExtendedModelResponse[Any]:
        """Async :meth:`_decide_sync`: the samples of a round are drawn concurrently."""
        protocol, in_force = self._protocol(request)
        task = in_force.decider.task
        mode, sample_request = self._mode(request), self._sample_request(request, task)
        responses: list[ModelResponse[Any]] = []

        async def draw(d: Draw) -> Drawn:
            if mode == "model":
                return [await asample_messages(**self._model_call(request, sample_request, d.n))]
            semaphore = asyncio.Semaphore(self._workers(d.n))

            async def one() -> Any:
                async with semaphore:
                    try:
                        return await handler(sample_request)
                    except ValidationError as exc:
                        return _malformed(exc)

            drawn = list(await asyncio.gather(*(one() for _ in range(d.n))))
            responses.extend(drawn)
            return [self._samples(drawn)]

        result = (await adrive_rounds(protocol, draw))[0]
        return self._finish(request, result, responses, in_force)

    # ------------------------------------------------------------------ hooks

    @override
    def wrap_model_call(
        self,
        request: ModelRequest[ContextT],
        handler: Callable[[ModelRequest[ContextT]], ModelResponse[ResponseT]],
    ) -> ModelResponse[ResponseT] | AIMessage | ExtendedModelResponse[ResponseT]:
        """Sample N completions, decide by calibrated MBR, return the decision's message.

        Args:
            request: The model request.
            handler: The agent's model handler (called N times with
                ``sampling="handler"``).

        Returns:
            The decision's message with the decision in its metadata, plus a state update
            appending the decision to ``taskcal_decisions``; the handler's response,
            unchanged, on calls the middleware does not decide on.
        """
        if not self._should_decide(request):
            return handler(request)
        return self._decide_sync(request, handler)

    @override
    async def awrap_model_call(
        self,
        request: ModelRequest[ContextT],
        handler: Callable[[ModelRequest[ContextT]], Awaitable[ModelResponse[ResponseT]]],
    ) -> ModelResponse[ResponseT] | AIMessage | ExtendedModelResponse[ResponseT]:
        """Async :meth:`wrap_model_call`: the N samples are drawn concurrently.

        Args:
            request: The model request.
            handler: The agent's async model handler.

        Returns:
            As :meth:`wrap_model_call`.
        """
        if not self._should_decide(request):
            return await handler(request)
        return await self._decide_async(request, handler)
