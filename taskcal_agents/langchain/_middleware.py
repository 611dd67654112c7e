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
import operator
import os
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Annotated, Any, Literal, NotRequired

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
)
from taskcal_agents.errors import ConfigurationError, SamplingError
from taskcal_agents.langchain._legacy import DeprecatedArguments, migrated
from taskcal_agents.parsing import (
    GroundingContext,
    confirmation_message,
    sent_args,
    tool_names_of,
)
from taskcal_agents.production import (
    DecisionLogLike,
    DecisionSession,
    InForce,
    ToolResultConfig,
    decision_from_message,
    model_name_of,
)
from taskcal_agents.sampling import (
    adrive_rounds,
    asample_messages,
    drive_rounds,
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
        for name, value, allowed in (
            ("sampling", sampling, ("auto", "model", "handler")),
            ("decide_on", decide_on, ("user_turn", "every_call")),
        ):
            if value not in allowed:
                msg = f"{owner} parameter {name!r} must be one of {allowed!r}, got {value!r}."
                raise ConfigurationError(msg)
        session = DecisionSession(
            task, calibrator, options=old.options, owner=owner, judge=old.judge,
            task_prompt=old.use_task_prompt, reload_artefact=reload_artefact,
            decision_log=decision_log, tool_result=old.tool_result,
        )  # fmt: skip
        self._max_concurrency = old.max_concurrency
        self.task: Task = session.task
        """The task: labels, actions, cost matrix and parser."""
        self.options = session.options = old.options.model_copy(
            update={"alpha": session.resolved.alpha}
        )
        """N, temperature, α (the calibrator's unless given), adaptive N, retries and
        ``on_error`` (see :class:`~taskcal_agents.decision.SamplingOptions`)."""
        self.sampling: SamplingMode = sampling
        """How samples are drawn (``"auto"``, ``"model"`` or ``"handler"``)."""
        self.decide_on: DecideOn = decide_on
        """When to decide (``"user_turn"`` or ``"every_call"``)."""
        self.session: DecisionSession = session
        """The decision's assembly: the calibrator in force (``session.in_force()``), its
        risk limit, the task decided after a tool result, the decision log."""

    def _in_force(self, request: ModelRequest[Any]) -> InForce:
        """The Decider and artefact id of ``request``'s decision (``DecisionSession.in_force``)."""
        served = None
        if self.session.per_call:
            served = self.session.served_by(
                request.model, request_settings=request.model_settings,
                tool_choice=request.tool_choice if request.tools else None,
            )  # fmt: skip
        return self.session.in_force(served, request.messages)

    def _start(
        self, request: ModelRequest[Any]
    ) -> tuple[Generator[Draw, Drawn, list[Decision | BaseException]], InForce, ModelRequest[Any]]:
        """The decision protocol of one call, its Decider, and the request to sample with.

        The sample request carries the task's prompt and the sampling temperature. One
        artefact decides the whole call; the rounds, the retries and the fallback are
        :func:`~taskcal_agents.decision._protocol.decide_in_rounds`'s.
        """
        in_force = self._in_force(request)
        task = in_force.decider.task
        system = [request.system_message] if request.system_message is not None else []
        protocol = self.session.protocol(
            in_force, [self.session.item(task, [*system, *request.messages], request.tools)],
            tool_names=tool_names_of(request.tools),
            what=f"{type(self).__name__} could not sample {self.options.n_samples} completions",
        )  # fmt: skip
        overrides: dict[str, Any] = {}
        if task.prompt and self.session.task_prompt:
            overrides["system_message"], overrides["messages"] = request_with_task_prompt(
                request.system_message, request.messages, task.prompt
            )
        if self.options.temperature is not None:
            settings = {**request.model_settings, "temperature": self.options.temperature}
            overrides["model_settings"] = settings
        return protocol, in_force, request.override(**overrides) if overrides else request

    def _uses_handler(self, request: ModelRequest[Any]) -> bool:
        if self.sampling == "auto":
            return request.response_format is not None
        return self.sampling == "handler"

    def _workers(self, n: int) -> int:
        limit = self._max_concurrency or ensure_config().get("max_concurrency")
        return min(n, limit or n)

    def _model_call(
        self, request: ModelRequest[Any], sample: ModelRequest[Any], n: int
    ) -> dict[str, Any]:
        """``sample_messages``' arguments: the model, tools and settings bound as by the agent."""
        if request.tools:
            model = request.model.bind_tools(
                request.tools, tool_choice=request.tool_choice, **request.model_settings
            )
        else:
            model = request.model.bind(**request.model_settings)
        system = [sample.system_message] if sample.system_message is not None else []
        return {
            "model": model, "input": [*system, *sample.messages], "n": n,
            "temperature": self.options.temperature,
            "config": {"max_concurrency": self._workers(n)},
        }  # fmt: skip

    def _finish(
        self,
        request: ModelRequest[Any],
        result: Decision | BaseException,
        responses: Sequence[ModelResponse[Any]],
        in_force: InForce,
    ) -> ExtendedModelResponse[Any]:
        """Log the decision; its reply (and its sample's structured response), state update."""
        name = functools.partial(model_name_of, request.model)  # called only when logged
        decision = self.session.decided(result, in_force, model_name=name)
        message = self.session.reply(decision, in_force.decider.task, request.messages)
        structured = None
        if message.id is not None:  # the reply is a handler sample's: its structured response
            found = (r.structured_response for r in responses if _first_ai(r, message.id))
            structured = next(found, None)
        return ExtendedModelResponse(
            model_response=ModelResponse(result=[message], structured_response=structured),
            command=Command(update={"taskcal_decisions": [decision.to_metadata()]}),
        )

    def _decide_sync(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Any]
    ) -> ExtendedModelResponse[Any]:
        """Sample in rounds (``handler`` or the model, per ``sampling``), decide, respond."""
        protocol, in_force, sample = self._start(request)
        responses: list[ModelResponse[Any]] = []

        def one(_: int) -> ModelResponse[Any]:
            try:
                return handler(sample)
            except ValidationError as exc:
                return _malformed(exc)

        def draw(d: Draw) -> Drawn:
            if not self._uses_handler(request):
                return [sample_messages(**self._model_call(request, sample, d.n))]
            with ContextThreadPoolExecutor(max_workers=self._workers(d.n)) as pool:
                drawn = list(pool.map(one, range(d.n)))
            responses.extend(drawn)
            return [_samples(drawn)]

        return self._finish(request, drive_rounds(protocol, draw)[0], responses, in_force)

    async def _decide_async(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[Any]]
    ) -> ExtendedModelResponse[Any]:
        """Async :meth:`_decide_sync`: the samples of a round are drawn concurrently."""
        protocol, in_force, sample = self._start(request)
        responses: list[ModelResponse[Any]] = []

        async def draw(d: Draw) -> Drawn:
            if not self._uses_handler(request):
                return [await asample_messages(**self._model_call(request, sample, d.n))]
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
        if self.decide_on == "user_turn" and not _is_user_turn(request.messages):
            return self._trusted_only(request, handler(request))
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
            return self._trusted_only(request, await handler(request))
        return await self._decide_async(request, handler)

    def _trusted_only(
        self, request: ModelRequest[ContextT], response: ModelResponse[ResponseT]
    ) -> ModelResponse[ResponseT]:
        """A passed-through reply, its calls held to the task's trust policy.

        A call that takes a value no trusted source supplies is replaced by the question
        that asks the user to confirm it (the trust policy holds on every model call, not
        only on the decided ones); an optional argument no message supports is dropped, as
        a decided call drops it. Without a policy the reply is returned unchanged.
        """
        trust = self.session.task.trust
        if trust is None:
            return response
        context: GroundingContext | None = None
        result = []
        for message in response.result:
            if not isinstance(message, AIMessage) or not message.tool_calls:
                result.append(message)
                continue
            context = context or GroundingContext(request.tools, request.messages)
            calls = []
            for call in message.tool_calls:
                checked = context.ground_call(call, trust)
                if not checked.trusted:
                    metadata = {"taskcal_trust": [v.to_dict() for v in checked.violations]}
                    reply = confirmation_message(checked)
                    reply.response_metadata.update(metadata)
                    return ModelResponse(result=[reply])
                calls.append({**call, "args": sent_args(checked)})
            result.append(message.model_copy(update={"tool_calls": calls}))
        return ModelResponse(result=result, structured_response=response.structured_response)
