"""The front doors' shared core: one decision, assembled in one place.

Every front door (the Runnable, the chat model over it, the agent middleware, the decision
model) translates its own input into messages and tools and its own output from a
:class:`~taskcal_agents.decision.Decision`; everything between is a
:class:`DecisionSession`:

* the Decider in force — the calibrator resolved against the task (``"auto"``: the shipped
  artefact for the served model and settings, resolved once per setting; an artefact file
  watched and reloaded when replaced; a fitted calibrator; ``None``), with its artefact id;
* what a decision reads besides its samples (:meth:`DecisionSession.item`: the question
  under answer clustering, the calls already answered, the grounding context);
* the decision protocol with the retry policy, ``on_error`` and N / adaptive N
  (:meth:`DecisionSession.protocol`), and the seed of each draw (moved on by the samples
  drawn so far, :meth:`DecisionSession.sample_args`);
* finishing: the decision logged (when a log is set) under the artefact that decided it
  (:meth:`DecisionSession.finish`), and the reply message every door gives for it
  (:meth:`DecisionSession.reply`).

A door drives :meth:`DecisionSession.protocol` with its own sampling (a model, an agent's
handler) through :func:`~taskcal_agents.sampling.drive_rounds` or
:func:`~taskcal_agents.sampling.adrive_rounds`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any, NamedTuple, TypedDict

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable

from taskcal_agents.decision import (
    AUTO,
    Auto,
    CalibratorLike,
    Decider,
    Decision,
    DecisionInput,
    Draw,
    Drawn,
    ResolvedCalibrator,
    RetryPolicy,
    SamplingOptions,
    ServedSettings,
    Task,
    after_tool_result_for,
    as_artefact,
    auto_artefact,
    check_adaptive,
    decide_in_rounds,
    pick_calibrator,
    resolve_calibrator,
    shipped_artefacts,
)
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.parsing import (
    GroundingContext,
    answered_tool_calls,
    is_tool_result_turn,
    question_of,
    tool_result_reply,
)
from taskcal_agents.production._decision_log import (
    DecisionLog,
    DecisionLogLike,
    artefact_id,
    open_decision_log,
)
from taskcal_agents.production._reload import ArtefactReloader, check_reload
from taskcal_agents.sampling import served_settings

__all__ = [
    "DECISION_METADATA_KEY",
    "DecisionSession",
    "InForce",
    "ToolResultConfig",
    "decision_from_message",
]

DECISION_METADATA_KEY = "taskcal_decision"
"""The ``response_metadata`` key of a reply message that holds its decision's record."""


def decision_from_message(message: BaseMessage) -> Decision | None:
    """Return the decision a front door attached to its reply message, or ``None``.

    The rebuilt decision has no ``message`` and no ``samples``.
    """
    record = message.response_metadata.get(DECISION_METADATA_KEY)
    return None if record is None else Decision.model_validate(record)


ModelName = str | Callable[[], str | None] | None
"""A served model's name, or a function that gives it when it is needed (for the log)."""


class InForce(NamedTuple):
    """The Decider that takes a decision and the id of the artefact it came from."""

    decider: Decider
    artefact_id: str | None


class ToolResultConfig(TypedDict, total=False):
    """The decision right after a tool result (``tool_result=`` of the middleware)."""

    task: Task | str | os.PathLike[str]
    """Its task, or the path of a task file (absent: derived from the door's task)."""
    calibrator: CalibratorLike | None
    """Its calibrator (absent or ``None``: the raw belief)."""


def _with_trust(after: Task, task: Task, owner: str) -> Task:
    """The tool-result task under the main task's trust policy when it has none of its own.

    After a tool result is where an injected value first appears, so the policy holds there.
    """
    if task.trust is None or after.trust is not None:
        return after
    if after.grounding is None:
        msg = (
            f"{owner} parameter 'tool_result': task {after.name!r} has no grounding, so the "
            f"trust policy of task {task.name!r} cannot hold after a tool result; give it "
            "'grounding' (and 'trust'), or drop the main task's 'trust'."
        )
        raise ConfigurationError(msg)
    return Task.model_validate({**after.model_dump(mode="json"), "trust": task.trust})


def _task_of(
    task: Task | str | os.PathLike[str] | None, calibrator: Any, owner: str, name: str = "task"
) -> Task:
    """``task``, the task in the file at ``task``, or (``None``) the artefact's full task."""
    if isinstance(task, str | os.PathLike):
        return Task.from_file(task)
    if isinstance(task, Task):
        return task
    artefact = as_artefact(calibrator) if task is None else None
    if artefact is not None and artefact.task is not None:
        return artefact.task
    if task is None:
        msg = (
            f"{owner} parameter 'task' is required unless 'calibrator' is an artefact file "
            "that holds the full task; got task=None; pass a Task or the path of a task file."
        )
    else:
        msg = f"{owner} parameter {name!r} must be a Task or the path of a task file, got {task!r}."
    raise ConfigurationError(msg)


def _tool_result_task(
    owner: str, task: Task, tool_result: ToolResultConfig | Auto | None
) -> Task | None:
    """The task decided right after a tool result (``None``: ``task`` itself)."""
    if tool_result is None:
        return None
    config: ToolResultConfig = {} if tool_result == AUTO else tool_result  # type: ignore[assignment]
    if (
        not isinstance(config, dict)
        or set(config) - {"task", "calibrator"}
        or config.get("calibrator") == AUTO
    ):
        msg = (
            f"{owner} parameter 'tool_result' must be 'auto', None or a ToolResultConfig "
            f"(keys 'task', 'calibrator'; no shipped calibrator decides after a tool result, "
            f"so its calibrator is not 'auto'), got {tool_result!r}."
        )
        raise ConfigurationError(msg)
    if "task" in config:
        return _with_trust(_task_of(config["task"], None, owner, "tool_result"), task, owner)
    after = after_tool_result_for(task)
    if after is None and config.get("calibrator") is not None:
        msg = (
            f"{owner} parameter 'tool_result' has a calibrator but no task, and task "
            f"{task.name!r} derives none; pass the task the calibrator was fitted for."
        )
        raise ConfigurationError(msg)
    return after


class DecisionSession:
    """Task, calibrator in force, options, retries, seeds and log: one decision's assembly.

    Args:
        task: The task, the path of a task file, or ``None``: the full task held by the
            artefact given as ``calibrator``.
        calibrator: A fitted calibrator, a
            :class:`~taskcal_agents.decision.CalibratorArtefact`, an artefact path,
            ``"auto"`` or ``None`` (the raw belief).
        options: N, temperature, α (an explicit one overrides the calibrator's), adaptive
            N, retries and ``on_error`` (read at each decision, so a door may pass itself).
        owner: The front door's name, for messages.
        model: The model the door samples, when it is known up front: ``"auto"`` is
            resolved once, for it (:meth:`served_by`). ``None`` under ``"auto"``: resolved
            per call of :meth:`in_force` for the settings it is given (an agent's request
            names its model), and kept per setting.
        task_prompt: Whether the door samples with the task's prompt (``"auto"`` matches it).
        judge: The entailment judge of a clustering task (see
            :class:`~taskcal_agents.decision.Decider`).
        risk_control: An explicit risk limit (``None``: the artefact's).
        reload_artefact: Watch the artefact file given as ``calibrator`` and reload it when
            it is replaced (see :class:`~taskcal_agents.production.ArtefactReloader`).
        decision_log: Where each decision is logged (a log or a path), or ``None``.
        retry: The retry policy (``None``: ``options``' ``max_retries`` and ``retry_wait``).
        seed: The base sampling seed (``None``: unseeded).
        tool_result: The decision right after a tool result (:class:`ToolResultConfig`;
            ``"auto"``: :func:`~taskcal_agents.decision._presets.after_tool_result_for` the
            task; ``None``: the task decides there too).
        shared_prior: ``options.adaptive``'s prior serves tasks of other outcomes too (the
            decision model's questions): for this task it is used only if it fits, never
            refused.

    Raises:
        ConfigurationError: If the task is missing or of the wrong type, the calibrator
            does not fit the task, ``reload_artefact`` is set for a calibrator that is not
            an artefact path, or adaptive N does not fit the task.
        DataFileError: If a task or artefact file cannot be read.
    """

    def __init__(
        self,
        task: Task | str | os.PathLike[str] | None,
        calibrator: CalibratorLike | str | None,
        *,
        options: SamplingOptions,
        owner: str,
        model: Runnable[Any, Any] | None = None,
        task_prompt: bool = True,
        judge: Any = None,
        risk_control: Any = None,
        reload_artefact: bool = False,
        decision_log: DecisionLogLike | None = None,
        retry: RetryPolicy | None = None,
        seed: int | None = None,
        tool_result: ToolResultConfig | Auto | None = None,
        shared_prior: bool = False,
    ) -> None:
        check_reload(calibrator, reload_artefact, owner)
        if not reload_artefact:
            calibrator = as_artefact(calibrator) or calibrator  # a path is read once
        self.task: Task = _task_of(task, calibrator, owner)
        """The task (loaded from its file, or the artefact's when none was given)."""
        task = self.task
        self.options = options
        self.owner = owner
        self.alpha: float | None = options.alpha if "alpha" in options.model_fields_set else None
        """The explicit Dirichlet prior (``options``' when set), or ``None``: the calibrator's."""
        self.task_prompt = task_prompt
        self.seed = seed
        self._judge = judge
        self._explicit_risk = risk_control
        self._retry = retry
        self._reloader: ArtefactReloader[InForce] | None = None
        self._auto: dict[ServedSettings, InForce] | None = None
        self._lock = threading.Lock()
        n, alpha = options.n_samples, self.alpha
        if calibrator == AUTO and model is None:  # resolved per call: the model is the call's
            self._auto = {}
            shipped_artefacts()  # read the shipped files now, not on an async request
            resolved = resolve_calibrator(None, task, alpha=alpha, owner=owner)
        elif reload_artefact:
            self._reloader = ArtefactReloader(
                calibrator,  # type: ignore[arg-type]  # a path: check_reload
                task, self._build, alpha=alpha, n_samples=n, owner=owner,
            )  # fmt: skip
            resolved = self._reloader.resolved
        else:
            if model is not None:
                calibrator = pick_calibrator(calibrator, task, self.served_by(model), owner=owner)
            resolved = resolve_calibrator(calibrator, task, alpha=alpha, n_samples=n, owner=owner)
        self.resolved: ResolvedCalibrator = resolved
        """The calibrator resolved at construction (the first artefact's, when reloaded)."""
        self._fixed = self._build(resolved) if self._reloader is None else None
        self.tool_result_task: Task | None = _tool_result_task(owner, task, tool_result)
        """The task decided right after a tool result, or ``None``: :attr:`task` decides there."""
        self._after: InForce | None = None
        if self.tool_result_task is not None:
            after = resolve_calibrator(
                tool_result.get("calibrator") if isinstance(tool_result, dict) else None,
                self.tool_result_task, alpha=alpha, n_samples=n, owner=owner,
            )  # fmt: skip
            self._after = InForce(
                Decider.from_resolved(self.tool_result_task, after), artefact_id(after.artefact)
            )
        if options.adaptive is not None:  # a shared prior for other outcomes is not used
            check_adaptive(task, owner, None if shared_prior else options.adaptive)
            if self.tool_result_task is not None:
                check_adaptive(self.tool_result_task, owner)
        self.log: DecisionLog | None = (
            None if decision_log is None else open_decision_log(decision_log)
        )
        """The decision log, or ``None``."""

    def served_by(
        self,
        model: Runnable[Any, Any],
        *,
        request_settings: Mapping[str, Any] | None = None,
        tool_choice: Any = None,
    ) -> ServedSettings:
        """How this session samples ``model`` (and a request's settings): ``"auto"`` matches it."""
        return served_settings(
            model, n_samples=self.options.n_samples, temperature=self.options.temperature,
            task_prompt=self.task_prompt, alpha=self.alpha,
            request_settings=request_settings, tool_choice=tool_choice,
        )  # fmt: skip

    def _build(self, resolved: ResolvedCalibrator) -> InForce:
        decider = Decider.from_resolved(
            self.task, resolved, judge=self._judge, risk_control=self._explicit_risk
        )
        return InForce(decider, artefact_id(resolved.artefact))

    @property
    def per_call(self) -> bool:
        """Whether ``"auto"`` is resolved per call of :meth:`in_force` (for its settings)."""
        return self._auto is not None

    def in_force(
        self, served: ServedSettings | None = None, messages: Sequence[BaseMessage] = ()
    ) -> InForce:
        """The Decider (and artefact id) of the next decision.

        Right after a tool result (the last of ``messages``), the :attr:`tool_result_task`'s
        when there is one. Under per-call
        ``"auto"``, the one for ``served`` (resolved on first use, then kept; ``None``: the
        raw belief's); an artefact file that was replaced is reloaded.
        """
        if self._after is not None and is_tool_result_turn(messages):
            return self._after
        if self._auto is not None and served is not None:
            found = self._auto.get(served)
            if found is None:
                resolved = resolve_calibrator(
                    auto_artefact(self.task, served, owner=self.owner), self.task,
                    alpha=self.alpha, n_samples=served.n_samples, owner=self.owner,
                )  # fmt: skip
                with self._lock:
                    found = self._auto.setdefault(served, self._build(resolved))
            return found
        if self._reloader is not None:
            return self._reloader.current()
        assert self._fixed is not None
        return self._fixed

    def item(
        self, task: Task, messages: Sequence[BaseMessage], tools: Sequence[Any] | None
    ) -> DecisionInput:
        """What a decision of ``task`` on ``messages`` reads besides its samples.

        The question under answer clustering, the tool calls the conversation already
        answered, and for a task that grounds its calls the offered ``tools`` and the
        conversation.
        """
        return DecisionInput(
            None if task.answer_clusters is None else question_of(messages),
            answered_tool_calls(messages),
            None if task.grounding is None else GroundingContext(tools or (), messages),
        )

    def protocol(
        self,
        in_force: InForce,
        items: Sequence[DecisionInput],
        *,
        tool_names: Sequence[str] | None = None,
        return_samples: bool = False,
        what: str | None = None,
        options: SamplingOptions | None = None,
        retry: RetryPolicy | None = None,
    ) -> Generator[Draw, Drawn, list[Decision | BaseException]]:
        """The decision protocol of ``items`` (rounds, retries, fallback) under ``in_force``.

        ``options`` and ``retry`` replace the session's for this decision (a door that is
        copied with other settings passes its own).
        """
        options = options or self.options
        retry = retry or self._retry
        return decide_in_rounds(
            in_force.decider, items, options,
            retry=retry or RetryPolicy.of(options.max_retries, options.retry_wait),
            tool_names=tool_names, on_error=options.on_error, return_samples=return_samples,
            what=what or f"{self.owner} could not sample {options.n_samples} completions",
        )  # fmt: skip

    def sample_args(
        self, draw: Draw, seed: int | None = None, options: SamplingOptions | None = None
    ) -> dict[str, Any]:
        """N, the temperature (``options``', else the session's) and the seed of ``draw``.

        The seed (``seed``, else the session's) moves on by the samples drawn so far, so a
        later round draws new samples (and N concurrent calls get the seeds they would get
        in one round).
        """
        base = self.seed if seed is None else seed
        return {
            "n": draw.n,
            "temperature": (options or self.options).temperature,
            "seed": None if base is None else base + draw.drawn,
        }

    def finish(
        self, result: Decision | BaseException, in_force: InForce, *, model_name: ModelName
    ) -> Decision | Exception:
        """A decision of the protocol, logged (when a log is set); or its error.

        ``model_name`` is the served model's name, or a function that gives it: called
        only when a log is set, so that an unlogged decision does no work for it. A
        control-flow signal (a ``BaseException`` that is not an ``Exception``) is raised.
        """
        if not isinstance(result, Decision):
            if not isinstance(result, Exception):
                raise result
            return result
        if self.log is None:
            return result
        return self.log.log(
            result, task=in_force.decider.task,
            model_name=model_name() if callable(model_name) else model_name,
            artefact_id=in_force.artefact_id,
        )  # fmt: skip

    def decided(
        self, result: Decision | BaseException, in_force: InForce, *, model_name: ModelName
    ) -> Decision:
        """:meth:`finish`, raising the error of a failed decision."""
        decision = self.finish(result, in_force, model_name=model_name)
        if isinstance(decision, Exception):
            raise decision
        return decision

    @staticmethod
    def reply(decision: Decision, task: Task, messages: Sequence[BaseMessage]) -> AIMessage:
        """The message a front door answers with for ``decision``, its record attached.

        The decision's own message (a sampled call, the question that asks, the refusal,
        an answer); where it has none, after a tool result a report of what the tools
        returned (an answer no sample wrote), else the decided label itself (a rating, a
        choice): never an empty message. The record (``Decision.to_metadata()``) is under
        :data:`DECISION_METADATA_KEY` in ``response_metadata``.
        """
        message = decision.message
        if message is None and is_tool_result_turn(messages):
            message = tool_result_reply(messages)
        elif message is None:
            message = AIMessage(content=decision.action)
        metadata = {**message.response_metadata, DECISION_METADATA_KEY: decision.to_metadata()}
        return message.model_copy(update={"response_metadata": metadata})
