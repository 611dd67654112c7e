"""Agent middleware: calibrated call / ask / abstain decisions inside ``create_agent``.

:class:`TaskCalibrationMiddleware` wraps the agent's model call: on a user turn it draws N
completions through the request's model, maps each to a task label (g_T), calibrates the
belief and takes the minimum-Bayes-risk action under the deployment's cost matrix. The agent
receives one message: the representative tool call (the loop continues into the tools), a
clarifying question, or an abstention (both end the run). The
:class:`~taskcal_agents.decision.Decision` is in that message's
``response_metadata["taskcal_decision"]`` and in the state's ``taskcal_decisions`` list, as
JSON-able dicts (safe for any checkpointer).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import operator
import os
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired, Self

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables.config import ContextThreadPoolExecutor, ensure_config
from langchain_core.utils.function_calling import convert_to_openai_tool
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
    from langgraph.runtime import Runtime
    from langgraph.types import Command, interrupt
except ImportError as exc:
    _msg = (
        "taskcal_agents.langchain._middleware needs langchain and langgraph, the 'agents' extra: "
        f"pip install 'taskcal-agents[agents]' ({exc})"
    )
    raise ImportError(_msg, name=exc.name) from exc

from taskcal_agents.decision import (
    AUTO,
    Auto,
    CalibratorLike,
    Decision,
    Draw,
    Drawn,
    SamplingOptions,
    Task,
    effect_resolver,
)
from taskcal_agents.errors import ConfigurationError, DecisionLogWarning, SamplingError
from taskcal_agents.langchain._legacy import DeprecatedArguments, Migrated, migrated
from taskcal_agents.langchain._review import (
    has_checkpointer,
    outcome_label,
    review_request,
    reviewed_reply,
)
from taskcal_agents.langchain._session import (
    DECISION_METADATA_KEY,
    DecisionSession,
    PendingDecision,
    ToolResultConfig,
    decided,
    decision_from_message,
    rebuilt,
    unknown_arguments,
)
from taskcal_agents.parsing import (
    GroundingContext,
    confirmation_calls,
    confirmation_message,
    message_text,
    sent_args,
    tool_names_of,
)
from taskcal_agents.production import DecisionLogLike, model_name_of
from taskcal_agents.sampling import (
    asample_messages,
    is_malformed_choice,
    malformed_message,
    request_with_task_prompt,
    sample_messages,
)

__all__ = [
    "DeprecatedArguments",
    "TaskCalibrationMiddleware",
    "TaskCalibrationState",
    "ToolResultConfig",
    "decision_from_message",
]

_OMIT_FROM_INPUT = OmitFromSchema(input=True, output=False)
_PRIVATE = OmitFromSchema(input=True, output=True)

SamplingMode = Literal["auto", "model", "handler"]
DecideOn = Literal["user_turn", "every_call"]


class TaskCalibrationState(AgentState[ResponseT]):
    """State schema of :class:`TaskCalibrationMiddleware`.

    Extends ``AgentState`` with the decisions taken in this thread, oldest first, each
    the JSON-able dict of :meth:`Decision.to_metadata
    <taskcal_agents.decision.Decision.to_metadata>`.
    """

    # The reducer must come last in ``Annotated``: LangGraph reads the last item.
    taskcal_decisions: NotRequired[Annotated[list[dict[str, Any]], _OMIT_FROM_INPUT, operator.add]]
    taskcal_offered_tools: NotRequired[Annotated[list[dict[str, Any]], _PRIVATE]]
    """The OpenAI schemas of the tools the last undecided model call offered (under a trust
    policy): what ``after_model`` grounds that reply's calls in."""


def _schemas(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """The offered tools as OpenAI tool schemas (JSON-able, for the state)."""
    return [convert_to_openai_tool(tool) for tool in tools]


def _is_user_turn(messages: Sequence[BaseMessage]) -> bool:
    return bool(messages) and isinstance(messages[-1], HumanMessage)


def _first_ai(response: ModelResponse[Any], message_id: str | None = None) -> AIMessage | None:
    """The response's first AI message (with ``message_id`` when one is given)."""
    first = next((m for m in response.result if isinstance(m, AIMessage)), None)
    return first if message_id is None or (first is not None and first.id == message_id) else None


def _samples(responses: Sequence[ModelResponse[Any]]) -> list[AIMessage]:
    """One sample per handler response; one without an AI message is an unparsed one."""
    missing = SamplingError("the response held no AIMessage")
    return [_first_ai(r) or malformed_message(missing) for r in responses]


def _malformed(error: ValidationError) -> ModelResponse[Any]:
    """A handler call that failed on a malformed model output: one unparsed sample.

    langchain-openai fails a whole call over tool-call arguments that are not an object; as
    on the ``sampling="model"`` path, the sample is counted unparsed, not a failed draw. Any
    other validation error is raised.
    """
    if not is_malformed_choice(error):
        raise error
    return ModelResponse(result=[malformed_message(error)])


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
        from taskcal_agents.decision import SamplingOptions, tool_decision
        from taskcal_agents.langchain import TaskCalibrationMiddleware

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
        strict_calibrator: bool = False,
        **deprecated: Unpack[DeprecatedArguments],
    ) -> None:
        """Validate and store the configuration.

        Args:
            task: The task (e.g. :func:`taskcal_agents.decision.tool_decision`), a
                task file, or ``None`` when ``calibrator`` is an artefact holding the task.
            calibrator: A fitted calibrator, a
                :class:`~taskcal_agents.decision.CalibratorArtefact` or its path,
                ``"auto"`` (the calibrator shipped for the request's model and sampling
                settings, else the raw belief with an
                :class:`~taskcal_agents.decision.UncalibratedWarning`), or ``None``
                (the raw belief).
            options: N, temperature, α (default: the artefact's), adaptive N, retries and
                ``on_error``; ``None``: the defaults. At most the run config's
                ``max_concurrency`` calls run at once.
            sampling: How to draw the samples. ``"model"``: through the request's model
                (tools and settings bound as the agent binds them) with one call asking
                for ``n`` where the model supports it, else N concurrent calls.
                ``"handler"``: N calls of the agent's model handler (inner middleware
                and structured output apply to each). ``"auto"``: ``"handler"`` when the
                request has a ``response_format``, else ``"model"``.
            decide_on: ``"user_turn"``: decide only when the last message is from the
                user, and pass later calls (after tool results) through (add
                :class:`~taskcal_agents.langchain.ToolReplyMiddleware` to vet
                the model's replies there); under the task's ``trust`` policy a passed
                call that takes an untrusted value becomes the question that asks the user
                to confirm it. ``"every_call"``: decide on every model call.
            tool_result: Under ``decide_on="every_call"``, the decision right after a tool
                result (:class:`ToolResultConfig`). ``"auto"``, or no ``task`` in it:
                :func:`~taskcal_agents.decision._presets.after_tool_result_for` the task.
                ``None``: ``task`` and ``calibrator`` decide there too. A sampled call that
                repeats one already answered in the current user turn is never sent again.
            decision_log: A :class:`~taskcal_agents.production.DecisionLog` or
                a path (``.jsonl``, ``.sqlite``/``.db``) each decision is logged to (its
                ``decision_id`` is its id there; a failed write warns and counts).
            reload_artefact: Reload the artefact file given as ``calibrator`` when it is
                replaced (:class:`~taskcal_agents.production.ArtefactReloader`).
            strict_calibrator: Refuse an explicit artefact whose record does not match a
                request's model and sampling settings, instead of warning once
                (:class:`~taskcal_agents.decision.CalibratorMismatchWarning`) and using it.
            **deprecated: The keyword arguments of 0.1 (:class:`DeprecatedArguments`), for
                one more release, each with a ``DeprecationWarning``.

        Raises:
            ConfigurationError: If a parameter is invalid.
            UnknownArgumentError: For an unknown keyword argument (a ``ConfigurationError``
                and a ``TypeError``).
            LabelMismatchError: If the calibrator's labels differ from the task's.
            DataFileError: If a task or artefact file cannot be read.
        """
        super().__init__()
        owner = type(self).__name__
        known = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
        old = migrated(owner, options, tool_result, dict(deprecated), known[:-1])
        for name, value, allowed in (
            ("sampling", sampling, ("auto", "model", "handler")),
            ("decide_on", decide_on, ("user_turn", "every_call")),
        ):
            if value not in allowed:
                msg = f"{owner} parameter {name!r} must be one of {allowed!r}, got {value!r}."
                raise ConfigurationError(msg)
        if not isinstance(old.options, SamplingOptions):
            msg = (
                f"{owner} parameter 'options' must be a SamplingOptions or None, got "
                f"{old.options!r}; pass options=SamplingOptions(n_samples=..., ...)."
            )
            raise ConfigurationError(msg)
        if sampling == "handler" and old.options.belief == "one_pass":
            msg = (
                f"{owner}: sampling='handler' draws through the agent's handler, which cannot "
                "ask for the log-probabilities the one-pass belief reads; use sampling='model' "
                "(or 'auto') with options=SamplingOptions(belief='one_pass')."
            )
            raise ConfigurationError(msg)
        self._params: dict[str, Any] = {
            "task": task, "calibrator": calibrator, "options": old.options,
            "sampling": sampling, "decide_on": decide_on, "tool_result": old.tool_result,
            "decision_log": decision_log, "reload_artefact": reload_artefact,
            "strict_calibrator": strict_calibrator,
        }  # fmt: skip
        self._assemble(old)

    def _assemble(self, legacy: Migrated) -> None:
        """Build the session from the arguments and the 0.1 arguments' settings ``legacy``.

        The one place the middleware's session is made (for a copy too).
        """
        params = self._params
        self._legacy = legacy  # kept for copies, which take it without a warning
        self._max_concurrency = legacy.max_concurrency
        self.session: DecisionSession = DecisionSession(
            params["task"], params["calibrator"], options=params["options"],
            owner=type(self).__name__, judge=legacy.judge, task_prompt=legacy.use_task_prompt,
            reload_artefact=params["reload_artefact"], decision_log=params["decision_log"],
            tool_result=params["tool_result"], strict=params["strict_calibrator"],
        )  # fmt: skip
        """The decision's assembly: the calibrator in force (``session.in_force()``), its
        risk limit, the task decided after a tool result, the decision log."""

    @property
    def task(self) -> Task:
        """The task: labels, actions, cost matrix and parser."""
        return self.session.task

    @property
    def options(self) -> SamplingOptions:
        """N, temperature, α (``None``: the calibrator's), adaptive N, retries, ``on_error``."""
        return self.session.options

    @property
    def sampling(self) -> SamplingMode:
        """How samples are drawn (``"auto"``, ``"model"`` or ``"handler"``)."""
        sampling: SamplingMode = self._params["sampling"]
        return sampling

    @property
    def decide_on(self) -> DecideOn:
        """When to decide (``"user_turn"`` or ``"every_call"``)."""
        decide_on: DecideOn = self._params["decide_on"]
        return decide_on

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A new middleware from this one's arguments with ``update`` applied.

        As scikit-learn's ``clone`` (and the pydantic doors' ``model_copy``): the copy is
        built by the constructor, so its calibrator, α and session are resolved anew for
        the new arguments; nothing derived travels with it. The decision log stays the one
        this middleware opened unless ``update`` names another.

        Raises:
            UnknownArgumentError: If ``update`` names an argument the constructor does not
                take.
        """
        update = dict(update or {})
        unknown = sorted(set(update) - set(self._params))
        if unknown:
            owner = f"{type(self).__name__}.model_copy"
            raise unknown_arguments(owner, unknown, self._params)
        params = {**self._params, "decision_log": self.session.log}
        made = rebuilt(self, update, deep=deep, params=params)
        if self._legacy != made._legacy:  # 0.1 arguments (judge, use_task_prompt, ...)
            made._assemble(self._legacy)
        return made

    def __copy__(self) -> Self:
        return self.model_copy()

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Self:
        return self.model_copy(deep=True)

    def _begin(self, request: ModelRequest[Any]) -> tuple[PendingDecision, ModelRequest[Any]]:
        """The decision of one call, begun, and the request to sample with.

        The request's settings (its model, ``tool_choice``) pick the calibrator where it
        depends on them. The sample request carries the task's prompt and the sampling
        temperature.
        """
        session = self.session
        if self.options.belief == "one_pass" and self._uses_handler(request):
            msg = (
                f"{type(self).__name__}: this request has a response_format, so its samples are "
                "drawn through the agent's handler, which cannot ask for the log-probabilities "
                "the one-pass belief reads; use belief='samples' for agents with a "
                "response_format."
            )
            raise ConfigurationError(msg)
        settings = dict(request.model_settings)  # as sampled: the options' temperature wins
        if self.options.temperature is not None:
            settings["temperature"] = self.options.temperature
        served = None
        if session.per_request:
            served = session.served_by(
                request.model, request_settings=settings,
                tool_choice=request.tool_choice if request.tools else None,
            )  # fmt: skip
        system = [request.system_message] if request.system_message is not None else []
        pending = session.begin(
            [[*system, *request.messages]], tools=request.tools, served=served,
            tool_names=tool_names_of(request.tools),
            what=f"{type(self).__name__} could not sample {self.options.n_samples} completions",
        )  # fmt: skip
        overrides: dict[str, Any] = {}
        if pending.task.prompt and session.task_prompt:
            overrides["system_message"], overrides["messages"] = request_with_task_prompt(
                request.system_message, request.messages, pending.task.prompt
            )
        if settings != request.model_settings:
            overrides["model_settings"] = settings
        return pending, request.override(**overrides) if overrides else request

    def _uses_handler(self, request: ModelRequest[Any]) -> bool:
        if self.sampling == "auto":
            return request.response_format is not None
        return self.sampling == "handler"

    def _workers(self, n: int) -> int:
        limit = self._max_concurrency or ensure_config().get("max_concurrency")
        return min(n, limit or n)

    def _model_call(self, request: ModelRequest[Any], pending: PendingDecision, d: Draw) -> Any:
        """``sample_messages``' arguments: the model, tools and settings bound as by the agent.

        A one-pass draw's own request (:attr:`Draw.request`) gives its messages and
        arguments (its ``tool_choice="none"`` replaces the agent's).
        """
        if request.tools:
            model = request.model.bind_tools(
                request.tools, tool_choice=request.tool_choice, **request.model_settings
            )
        else:
            model = request.model.bind(**request.model_settings)
        if d.request is not None:
            return {"model": model, "input": pending.prompt(d, 0), **pending.sample_args(d)}
        return {
            "model": model, "input": pending.prompts[0], "n": d.n,
            "temperature": self.options.temperature,
            "config": {"max_concurrency": self._workers(d.n)},
        }  # fmt: skip

    def _finish(
        self,
        request: ModelRequest[Any],
        pending: PendingDecision,
        result: Decision | Exception,
        responses: Sequence[ModelResponse[Any]],
    ) -> ExtendedModelResponse[Any]:
        """The decision's reply (and its sample's structured response), state update."""
        decision = decided(result)
        message = pending.reply(decision)
        structured = None
        if message.id is not None:  # the reply is a handler sample's: its structured response
            found = (r.structured_response for r in responses if _first_ai(r, message.id))
            structured = next(found, None)
        update: dict[str, Any] = {"taskcal_decisions": [decision.to_metadata()]}
        if confirmation_calls(message) is not None:  # an edit at the review is checked on them
            update["taskcal_offered_tools"] = _schemas(request.tools)
        return ExtendedModelResponse(
            model_response=ModelResponse(result=[message], structured_response=structured),
            command=Command(update=update),
        )

    def _decide_sync(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Any]
    ) -> ExtendedModelResponse[Any]:
        """Sample in rounds (``handler`` or the model, per ``sampling``), decide, respond."""
        pending, sample = self._begin(request)
        responses: list[ModelResponse[Any]] = []

        def one(_: int) -> ModelResponse[Any]:
            try:
                return handler(sample)
            except ValidationError as exc:
                return _malformed(exc)

        def draw(d: Draw) -> Drawn:
            if d.request is not None or not self._uses_handler(request):
                return [sample_messages(**self._model_call(request, pending, d))]
            with ContextThreadPoolExecutor(max_workers=self._workers(d.n)) as pool:
                drawn = list(pool.map(one, range(d.n)))
            responses.extend(drawn)
            return [_samples(drawn)]

        name = functools.partial(model_name_of, request.model)  # called only when logged
        [result] = pending.run(draw, model_name=name)
        return self._finish(request, pending, result, responses)

    async def _decide_async(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[Any]]
    ) -> ExtendedModelResponse[Any]:
        """Async :meth:`_decide_sync`: the samples of a round are drawn concurrently."""
        pending, sample = self._begin(request)
        responses: list[ModelResponse[Any]] = []

        async def draw(d: Draw) -> Drawn:
            if d.request is not None or not self._uses_handler(request):
                return [await asample_messages(**self._model_call(request, pending, d))]
            semaphore = asyncio.Semaphore(self._workers(d.n))

            async def one() -> Any:
                async with semaphore:
                    try:
                        return await handler(sample)
                    except ValidationError as exc:
                        return _malformed(exc)

            drawn = list(await asyncio.gather(*(one() for _ in range(d.n))))
            responses.extend(drawn)
            return [_samples(drawn)]

        name = functools.partial(model_name_of, request.model)  # called only when logged
        [result] = await pending.arun(draw, model_name=name)
        return self._finish(request, pending, result, responses)

    # ------------------------------------------------------------------ hooks

    def _passed(
        self, request: ModelRequest[Any], response: ModelResponse[Any]
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        """An undecided call's response; under a trust policy, with the tools it offered.

        The offered tools' schemas go into the state (``taskcal_offered_tools``), where
        :meth:`after_model` reads them to ground the reply's calls: the state is the
        thread's own, so agents and threads never mix their tools.
        """
        if self.task.trust is None:
            return response
        offered = _schemas(request.tools)
        if request.state.get("taskcal_offered_tools") == offered:
            return response
        update = {"taskcal_offered_tools": offered}
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

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
            unchanged, on calls the middleware does not decide on (:meth:`after_model`
            holds their calls to the trust policy).
        """
        if self.decide_on == "user_turn" and not _is_user_turn(request.messages):
            return self._passed(request, handler(request))
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
        if self.decide_on == "user_turn" and not _is_user_turn(request.messages):
            return self._passed(request, await handler(request))
        return await self._decide_async(request, handler)

    @override
    def after_model(
        self, state: TaskCalibrationState[ResponseT], runtime: Runtime[ContextT]
    ) -> dict[str, Any] | None:
        """Hold the calls of an undecided reply to the task's trust policy.

        A reply the middleware did not decide (after a tool result, with
        ``decide_on="user_turn"``) whose call takes a value no trusted source supplies is
        replaced by the question that asks the user to confirm that call (marked in its
        metadata, so :class:`~taskcal_agents.langchain.ToolReplyMiddleware` leaves it
        alone); an optional argument no message supports is dropped, as a decided call
        drops it. As LangChain's ``HumanInTheLoopMiddleware``, the check reads the state
        (the offered tools' schemas are kept there by the model call), so it holds on every
        model call, beside ``ToolReplyMiddleware`` in either order. ``after_model`` hooks run
        from the last middleware to the first: listed after ``HumanInTheLoopMiddleware``
        (last, as ``sampling="model"`` asks), this check runs before its interrupt, which
        then never asks to approve a call the policy refuses. A stream of the agent's
        updates shows the model's reply before it is replaced. Without a policy, or for a
        decided reply, nothing changes.
        """
        return self._reviewed(state) or self._trusted_only(state)

    @override
    async def aafter_model(
        self, state: TaskCalibrationState[ResponseT], runtime: Runtime[ContextT]
    ) -> dict[str, Any] | None:
        """Async :meth:`after_model`."""
        return self._reviewed(state) or self._trusted_only(state)

    def _reviewed(self, state: TaskCalibrationState[Any]) -> dict[str, Any] | None:
        """A decided confirmation, put to a reviewer as an interrupt; ``None`` if none is due.

        Only in a run with a checkpointer (see :mod:`taskcal_agents.langchain._review`): the
        interrupt raises ``HumanInTheLoopMiddleware``'s request, and on resume the reply is
        replaced by the approved (or edited and checked) calls, or by a question after a
        rejection; the answer is recorded as the decision's outcome in the decision log.
        """
        messages = state["messages"]
        reply = messages[-1] if messages else None
        if not isinstance(reply, AIMessage) or DECISION_METADATA_KEY not in reply.response_metadata:
            return None
        calls = confirmation_calls(reply)
        if calls is None or not has_checkpointer():
            return None
        answer = interrupt(review_request(calls, message_text(reply)))
        task = self.task
        tools: list[Any] = list(state.get("taskcal_offered_tools") or [])
        tools += sorted({str(c["name"]) for c in calls} - set(tool_names_of(tools)))
        replaced, how = reviewed_reply(
            reply, calls, answer, tools=tools, messages=messages[:-1], trust=task.trust,
            task=task,
        )  # fmt: skip
        said = " ".join(
            str(d.get("message") or "")
            for d in (answer.get("decisions") or [])
            if isinstance(d, Mapping)
        )
        self._record_review(reply, how, said)
        return {"messages": [replaced]}

    def _record_review(self, reply: AIMessage, how: str, said: str) -> None:
        """Record a reviewer's answer as the confirming decision's outcome (with a log)."""
        log = self.session.log
        decision = reply.response_metadata.get(DECISION_METADATA_KEY) or {}
        decision_id = decision.get("decision_id") if isinstance(decision, Mapping) else None
        label = outcome_label(how, said, self.task)
        if log is None or not decision_id or label is None:
            return
        try:
            log.record_outcome(str(decision_id), label)
        except Exception as exc:  # a failed outcome write must not fail the agent's run
            warnings.warn(
                f"{type(self).__name__} could not record the confirmation's outcome "
                f"{label!r} for decision {decision_id!r}: {type(exc).__name__}: {exc}",
                DecisionLogWarning,
                stacklevel=2,
            )

    def _trusted_only(self, state: TaskCalibrationState[Any]) -> dict[str, Any] | None:
        """The state update that holds the last reply's calls to the trust policy, or ``None``."""
        messages = state["messages"]
        trust = self.task.trust
        reply = messages[-1] if messages else None
        if (
            trust is None
            or not isinstance(reply, AIMessage)
            or not reply.tool_calls
            or DECISION_METADATA_KEY in reply.response_metadata
        ):
            return None
        # A called tool whose schema is unknown counts by its name: no argument of it is
        # dropped as unsupported (each one given is held to the policy as required).
        tools: list[Any] = list(state.get("taskcal_offered_tools") or [])
        known = set(tool_names_of(tools))
        tools += sorted({c["name"] for c in reply.tool_calls} - known)
        context = GroundingContext(tools, messages[:-1])
        effect_of = effect_resolver(self.task.effects, context)
        calls = []
        for call in reply.tool_calls:
            checked = context.ground_call(call, trust, effect_of=effect_of)
            if not checked.trusted:
                question = confirmation_message(checked)
                metadata = {
                    **question.response_metadata,
                    "taskcal_trust": [v.to_dict() for v in checked.violations],
                }
                update = {"response_metadata": metadata, "id": reply.id}
                return {"messages": [question.model_copy(update=update)]}
            calls.append({**call, "args": sent_args(checked)})
        if calls == list(reply.tool_calls):
            return None
        return {"messages": [reply.model_copy(update={"tool_calls": calls})]}
