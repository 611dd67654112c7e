"""The front doors' shared core: each decision begun, driven and finished in one place.

Every front door (the Runnable, the chat model over it, the agent middleware, the decision
model, the LangGraph node) builds one :class:`DecisionSession` from its parameters, and
builds it again whenever the door is copied or rebound (scikit-learn's rule: the
constructor stores parameters; what is derived from them is rebuilt on a copy, never
shared). A decision is then one sequence, the same at every door::

    pending = session.begin(inputs, tools=..., served=...)   # settings in force → items
    decisions = pending.run(draw, model_name=...)             # protocol, driven; logged
    reply = pending.reply(decisions[0])                       # the message a door answers

(``await pending.arun(adraw, ...)`` drives the same sans-IO protocol asynchronously.)
Where the calibrator comes from is one :class:`CalibratorSource`: fixed (a fitted
calibrator, an artefact, ``"auto"`` resolved for a model known up front), reloaded when
its artefact file is replaced, or resolved per request for the settings each request
names (an agent's request names its model and ``tool_choice``).
"""

from __future__ import annotations

import copy
import difflib
import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypedDict, TypeVar

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable
from pydantic import ValidationError

from taskcal_agents._validation import describe_validation_error
from taskcal_agents.decision import (
    AUTO,
    Auto,
    CalibratorArtefact,
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
    check_artefact,
    decide_in_rounds,
    decide_one_pass,
    fitted_on,
    resolve_calibrator,
    shipped_artefacts,
)
from taskcal_agents.errors import ConfigurationError, DecisionLogWarning, UnknownArgumentError
from taskcal_agents.parsing import (
    GroundingContext,
    answered_tool_calls,
    is_tool_result_turn,
    question_of,
    tool_names_of,
    tool_result_reply,
)
from taskcal_agents.production import (
    ArtefactReloader,
    DecisionLog,
    DecisionLogLike,
    artefact_id,
    check_reload,
    open_decision_log,
)
from taskcal_agents.sampling import (
    adrive_rounds,
    drive_rounds,
    one_pass_protocol,
    served_settings,
    to_messages,
    tool_options,
    with_task_prompt,
)

__all__ = [
    "DECISION_METADATA_KEY",
    "CalibratorSource",
    "DecisionSession",
    "InForce",
    "PendingDecision",
    "ToolResultConfig",
    "configuration_error",
    "decision_from_message",
    "rebuilt",
    "reply_for",
]

D = TypeVar("D")
K = TypeVar("K")
V = TypeVar("V")

DECISION_METADATA_KEY = "taskcal_decision"
"""The ``response_metadata`` key of a reply message that holds its decision's record."""


def decision_from_message(message: BaseMessage) -> Decision | None:
    """Return the decision a front door attached to its reply message, or ``None``.

    The rebuilt decision has no ``message`` and no ``samples``.
    """
    record = message.response_metadata.get(DECISION_METADATA_KEY)
    return None if record is None else Decision.model_validate(record)


def reply_for(decision: Decision, messages: Sequence[BaseMessage]) -> AIMessage:
    """The message a front door answers with for ``decision``, its record attached.

    The decision's own message (a sampled call, the question that asks, the refusal, an
    answer); where it has none, after a tool result a report of what the tools returned
    (an answer no sample wrote), else the decided label itself (a rating, a choice): never
    an empty message. The record (``Decision.to_metadata()``) is under
    :data:`DECISION_METADATA_KEY` in ``response_metadata``.
    """
    message = decision.message
    if message is None and is_tool_result_turn(messages):
        message = tool_result_reply(messages)
    elif message is None:
        message = AIMessage(content=decision.action)
    metadata = {**message.response_metadata, DECISION_METADATA_KEY: decision.to_metadata()}
    return message.model_copy(update={"response_metadata": metadata})


def rebuilt(
    door: D,
    update: Mapping[str, Any] | None = None,
    *,
    deep: bool = False,
    params: Mapping[str, Any] | None = None,
) -> D:
    """A copy of ``door`` built anew by its constructor, with ``update`` applied.

    scikit-learn's ``clone`` rule: the constructor gets the parameters (``params``; by
    default a pydantic door's fields that were set), so nothing derived travels with the
    copy. With ``deep`` the parameters are deep-copied, but an opened decision log stays
    shared.
    """
    if params is None:
        params = {name: getattr(door, name) for name in door.model_fields_set}  # type: ignore[attr-defined]
    if deep:
        params = {k: v if k == "decision_log" else copy.deepcopy(v) for k, v in params.items()}
    return type(door)(**{**params, **(update or {})})


def configuration_error(owner: str, exc: ValidationError, known: Iterable[str]) -> Exception:
    """A door's construction error for pydantic's ``exc``: one error per mistake.

    An unknown (or misspelt) argument is an :class:`UnknownArgumentError` naming the
    closest known one; any other invalid value a :class:`ConfigurationError` listing
    pydantic's findings.
    """
    known = sorted(known)
    unknown = [str(e["loc"][0]) for e in exc.errors() if e["type"] == "extra_forbidden"]
    if unknown:
        return unknown_arguments(owner, unknown, known)
    found = describe_validation_error(exc, whole="input", with_input=True)
    msg = f"{owner} got an invalid argument: {found}."
    return ConfigurationError(msg)


def unknown_arguments(
    owner: str,
    unknown: Sequence[str],
    known: Iterable[str],
    hints: Mapping[str, str] | None = None,
) -> Exception:
    """The error for arguments ``owner`` does not take (each with the closest known name).

    ``hints`` maps a name that is said another way (an option that goes in ``options``) to
    how to say it.
    """
    hints = hints or {}
    names = []
    for name in unknown:
        close = difflib.get_close_matches(name, sorted({*known, *hints}), n=1, cutoff=0.75)
        said = (hints.get(close[0]) or repr(close[0])) if close else None
        names.append(f"{name!r}" + (f" (did you mean {said}?)" if said else ""))
    msg = (
        f"{owner} got unknown argument{'s' if len(names) > 1 else ''} {', '.join(names)}; "
        "pass only the arguments it documents (the wrapped model's own settings, such as "
        "max_tokens, timeout or stop, are set on that model: ChatOpenAI(max_tokens=...))."
    )
    return UnknownArgumentError(msg, names=list(unknown))


class InForce(NamedTuple):
    """The Decider that takes a decision, the id of its artefact, and a note on its fit."""

    decider: Decider
    artefact_id: str | None
    note: str | None = None
    """Where the artefact was fitted when that differs from what is served (the registry's
    quantised weights of a model served here under its upstream name); logged."""


class ToolResultConfig(TypedDict, total=False):
    """The decision right after a tool result (``tool_result=`` of the middleware)."""

    task: Task | str | os.PathLike[str]
    """Its task, or the path of a task file (absent: derived from the door's task)."""
    calibrator: CalibratorLike | None
    """Its calibrator (absent or ``None``: the raw belief)."""


# ------------------------------------------------------------------ calibrator sources


class CalibratorSource:
    """Where a session's calibrator comes from: one object, asked once per decision.

    :meth:`in_force` gives the Decider of the next decision for the settings a request
    is served with (``None`` where the door knows none per request).
    """

    per_request: bool = False
    """Whether :meth:`in_force` reads the request's settings (the door must compute them)."""

    def in_force(self, served: ServedSettings | None) -> InForce:  # pragma: no cover
        """The Decider (and artefact id) of the next decision."""
        raise NotImplementedError


class _Fixed(CalibratorSource):
    """One calibrator for every decision (fitted, an artefact, ``"auto"`` for a known model)."""

    def __init__(self, value: InForce) -> None:
        self._value = value

    def in_force(self, served: ServedSettings | None) -> InForce:
        return self._value


_KEPT = 128
"""How many request settings a source keeps its calibrator for (the least recent go)."""


class _Kept(Generic[K, V]):
    """A small thread-safe memo that forgets the least recently used entry past ``_KEPT``."""

    def __init__(self) -> None:
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K, make: Callable[[], V]) -> V:
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        made = make()  # outside the lock: it may read files or warn
        with self._lock:
            found = self._entries.setdefault(key, made)
            self._entries.move_to_end(key)
            while len(self._entries) > _KEPT:
                self._entries.popitem(last=False)
        return found


class _Reloading(CalibratorSource):
    """An artefact file, reloaded when it is replaced, and checked per request's settings."""

    def __init__(
        self,
        reloader: ArtefactReloader[InForce],
        check: Callable[[CalibratorArtefact, ServedSettings], str | None],
        *,
        per_request: bool,
    ) -> None:
        self.reloader = reloader
        self.per_request = per_request
        self._check = check
        self._notes: _Kept[tuple[str | None, ServedSettings], str | None] = _Kept()

    def in_force(self, served: ServedSettings | None) -> InForce:
        value, resolved = self.reloader.current_with_resolved()  # one load's pair
        artefact = resolved.artefact
        if served is None or artefact is None:
            return value
        note = self._notes.get((value.artefact_id, served), lambda: self._check(artefact, served))
        return value._replace(note=note)


class _PerRequest(CalibratorSource):
    """Resolved for each request's settings on first use, then kept per setting.

    ``default`` decides where a request names no settings; ``served`` is the door's own
    settings when its model is known up front (else each request must name them).
    """

    def __init__(
        self,
        make: Callable[[ServedSettings], InForce],
        default: InForce,
        *,
        served: ServedSettings | None = None,
    ) -> None:
        self.per_request = served is None
        self._make = make
        self._default = default
        self._served = served
        self._kept: _Kept[ServedSettings, InForce] = _Kept()

    def in_force(self, served: ServedSettings | None) -> InForce:
        if served is None or served == self._served:
            return self._default
        return self._kept.get(served, lambda: self._make(served))


# ------------------------------------------------------------------ the session


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


ModelName = str | Callable[[], str | None] | None
"""A served model's name, or a function that gives it when it is needed (for the log)."""


class DecisionSession:
    """A door's parameters, resolved: task, calibrator source, options, retries, seed, log.

    Built once per door (and again for each copy of it); :meth:`begin` starts one decision.

    Args:
        task: The task, the path of a task file, or ``None``: the full task held by the
            artefact given as ``calibrator``.
        calibrator: A fitted calibrator, a
            :class:`~taskcal_agents.decision.CalibratorArtefact`, an artefact path,
            ``"auto"`` or ``None`` (the raw belief).
        options: N, temperature, α (an explicit one overrides the calibrator's), adaptive
            N, retries and ``on_error``.
        owner: The front door's name, for messages.
        model: The model the door samples, when it is known up front: ``"auto"`` is
            resolved once, for it, and an explicit artefact is checked against it.
            ``None``: both happen per request, for the settings :meth:`begin` is given.
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
            ``"auto"``: :func:`~taskcal_agents.decision.after_tool_result_for` the task;
            ``None``: the task decides there too).
        shared_prior: ``options.adaptive``'s prior serves tasks of other outcomes too (the
            decision model's questions): for this task it is used only if it fits, never
            refused.
        strict: Refuse an explicit artefact whose record does not match how the door
            samples (:func:`~taskcal_agents.decision.check_artefact`), instead of warning.

    Raises:
        ConfigurationError: If the task is missing or of the wrong type, the calibrator
            does not fit the task, ``reload_artefact`` is set for a calibrator that is not
            an artefact path, adaptive N does not fit the task, or (``strict``) an explicit
            artefact does not match the door's sampling.
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
        strict: bool = False,
    ) -> None:
        check_reload(calibrator, reload_artefact, owner)
        if not reload_artefact:
            calibrator = as_artefact(calibrator) or calibrator  # a path is read once
        self.task: Task = _task_of(task, calibrator, owner)
        """The task (loaded from its file, or the artefact's when none was given)."""
        if options.belief == "one_pass":
            tool_options(self.task, ())  # a tool decision, or a clear error now
        self.options = options
        self.owner = owner
        self._n_checked = None if options.belief == "one_pass" else options.n_samples
        """N as an artefact's record is checked against (a one-pass belief draws none)."""
        self.alpha: float | None = options.alpha
        """The explicit Dirichlet prior, or ``None``: the calibrator's."""
        self.task_prompt = task_prompt
        self.seed = seed
        self.retry: RetryPolicy = retry or RetryPolicy.of(options.max_retries, options.retry_wait)
        """The retry policy of each draw."""
        self._judge = judge
        self._explicit_risk = risk_control
        self._strict = strict
        self.source: CalibratorSource = self._source(calibrator, model, reload_artefact)
        """Where the calibrator of each decision comes from."""
        self.tool_result_task: Task | None = _tool_result_task(owner, self.task, tool_result)
        """The task decided right after a tool result, or ``None``: :attr:`task` decides there."""
        self._after: InForce | None = None
        if self.tool_result_task is not None:
            after = resolve_calibrator(
                tool_result.get("calibrator") if isinstance(tool_result, dict) else None,
                self.tool_result_task, alpha=self.alpha, n_samples=self._n_checked,
                owner=owner, belief=options.belief,
            )  # fmt: skip
            self._after = InForce(
                Decider.from_resolved(self.tool_result_task, after), artefact_id(after.artefact)
            )
        if options.adaptive is not None:  # a shared prior for other outcomes is not used
            check_adaptive(self.task, owner, None if shared_prior else options.adaptive)
            if self.tool_result_task is not None:
                check_adaptive(self.tool_result_task, owner)
        self.log: DecisionLog | None = (
            None if decision_log is None else open_decision_log(decision_log)
        )
        """The decision log, or ``None``."""

    # -------------------------------------------------------------- the calibrator

    def _source(
        self, calibrator: Any, model: Runnable[Any, Any] | None, reload_artefact: bool
    ) -> CalibratorSource:
        """Where the calibrator comes from.

        With the model known up front (``model``), ``"auto"`` is resolved and an explicit
        artefact checked for how the door samples it; a request that names other settings
        (a per-call temperature, say) has them resolved again. Without it, both happen per
        request.
        """
        task, n, owner = self.task, self._n_checked, self.owner
        served = None if model is None else self.served_by(model)
        if reload_artefact:
            reloader = ArtefactReloader(
                calibrator, task, lambda r: self._build(r, served), alpha=self.alpha,
                n_samples=n, owner=owner, served=served, strict=self._strict,
            )  # fmt: skip
            return _Reloading(reloader, self._check, per_request=served is None)
        if calibrator == AUTO:
            shipped_artefacts()  # read the shipped files now, not on an async request
            if served is None:  # the raw belief's until a request names its model
                default = self._build(resolve_calibrator(None, task, alpha=self.alpha, owner=owner))
            else:
                default = self._auto(served)
            return _PerRequest(self._auto, default, served=served)
        resolved = resolve_calibrator(
            calibrator, task, alpha=self.alpha, n_samples=n, owner=owner, served=served,
            strict=self._strict, belief=self.options.belief,
        )  # fmt: skip
        value = self._build(resolved, served)
        artefact = resolved.artefact
        if artefact is None:  # a fitted calibrator or the raw belief: nothing to check
            return _Fixed(value)

        def checked(request: ServedSettings) -> InForce:
            return value._replace(note=self._check(artefact, request))

        return _PerRequest(checked, value, served=served)

    def _auto(self, served: ServedSettings) -> InForce:
        """``"auto"``'s calibrator for ``served`` (the raw belief when none is shipped)."""
        artefact = auto_artefact(self.task, served, owner=self.owner)
        resolved = resolve_calibrator(
            artefact, self.task, alpha=self.alpha, owner=self.owner, n_samples=self._n_checked
        )
        return self._build(resolved, served)

    def _check(self, artefact: CalibratorArtefact, served: ServedSettings) -> str | None:
        """Check an explicit artefact against one request's settings (warns once); its note."""
        check_artefact(artefact, self.task, served, owner=self.owner, strict=self._strict)
        return fitted_on(artefact, served)

    def _build(self, resolved: ResolvedCalibrator, served: ServedSettings | None = None) -> InForce:
        decider = Decider.from_resolved(
            self.task, resolved, judge=self._judge, risk_control=self._explicit_risk
        )
        note = None
        if resolved.artefact is not None and served is not None:
            note = fitted_on(resolved.artefact, served)
        return InForce(decider, artefact_id(resolved.artefact), note)

    def served_by(
        self,
        model: Runnable[Any, Any],
        *,
        request_settings: Mapping[str, Any] | None = None,
        tool_choice: Any = None,
    ) -> ServedSettings:
        """How this session samples ``model`` (and a request's settings): ``"auto"`` matches it.

        A ``temperature`` among ``request_settings`` (a per-call one) is the one sampled at.
        """
        settings = request_settings or {}
        temperature = settings.get("temperature", self.options.temperature)
        return served_settings(
            model, n_samples=self.options.n_samples, temperature=temperature,
            task_prompt=self.task_prompt, alpha=self.alpha,
            request_settings=request_settings, tool_choice=tool_choice,
            belief=self.options.belief,
        )  # fmt: skip

    @property
    def per_request(self) -> bool:
        """Whether the calibrator depends on each request's settings (pass ``served``)."""
        return self.source.per_request

    def in_force(
        self, served: ServedSettings | None = None, messages: Sequence[BaseMessage] = ()
    ) -> InForce:
        """The Decider (and artefact id) of the next decision.

        Right after a tool result (the last of ``messages``), the :attr:`tool_result_task`'s
        when there is one; else the :attr:`source`'s for ``served``.
        """
        if self._after is not None and is_tool_result_turn(messages):
            return self._after
        return self.source.in_force(served)

    # -------------------------------------------------------------- one decision

    def begin(
        self,
        inputs: Sequence[LanguageModelInput],
        *,
        tools: Sequence[Any] | None = None,
        tool_names: Sequence[str] | None = None,
        served: ServedSettings | None = None,
        return_samples: bool = False,
        what: str | None = None,
    ) -> PendingDecision:
        """Start the decision of each of ``inputs`` (one calibrator decides them all).

        Args:
            inputs: The conversations (chat-model input each).
            tools: The offered tools (their schemas ground the sampled calls).
            tool_names: The offered tools' names (``None``: any tool).
            served: The request's settings, where the calibrator depends on them.
            return_samples: Keep the samples and their labels in the decisions.
            what: How a sampling error begins (who could not sample what).
        """
        conversations = [to_messages(x) for x in inputs]
        in_force = self.in_force(served, conversations[0] if len(conversations) == 1 else ())
        task = in_force.decider.task
        prompted = bool(task.prompt) and self.task_prompt
        prompts = [
            with_task_prompt(m, task.prompt) if prompted else x
            for x, m in zip(inputs, conversations, strict=True)
        ]
        items = [self.item(task, m, tools) for m in conversations]
        protocol: Generator[Draw, Drawn, list[Decision | BaseException]]
        if self.options.belief == "one_pass":
            names = tuple(tool_names) if tool_names is not None else tool_names_of(tools or ())
            # the temperature the calibrator was matched for: a per-call one, else the door's
            temperature = self.options.temperature or 1.0
            if served is not None and served.temperature is not None and served.temperature > 0:
                temperature = served.temperature

            def belief(i: int) -> Any:
                return one_pass_protocol(
                    task, prompts[i], tool_names=names, temperature=temperature
                )

            protocol = decide_one_pass(
                in_force.decider, items, prompts, belief, retry=self.retry,
                tool_names=tool_names, on_error=self.options.on_error,
                return_samples=return_samples,
                what=what or f"{self.owner} could not read the one-pass belief",
            )  # fmt: skip
        else:
            protocol = decide_in_rounds(
                in_force.decider, items, self.options, retry=self.retry,
                tool_names=tool_names, on_error=self.options.on_error,
                return_samples=return_samples,
                what=what or f"{self.owner} could not sample {self.options.n_samples} completions",
            )  # fmt: skip
        return PendingDecision(self, in_force, conversations, prompts, protocol)

    @staticmethod
    def item(
        task: Task, messages: Sequence[BaseMessage], tools: Sequence[Any] | None
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

    def record_approval(self, conversation: Sequence[BaseMessage], task: Task) -> None:
        """Record the call label for the confirmation the conversation's last yes answers.

        The confirmation is the AI message before the user's yes; nothing is recorded
        without a decision log or without its decision's id. A failed write warns.
        """
        if self.log is None or len(conversation) < 2:
            return
        decision = decision_from_message(conversation[-2])
        if decision is None or decision.decision_id is None or task.call_action is None:
            return
        try:
            self.log.record_outcome(decision.decision_id, task.call_action)
        except Exception as exc:  # a failed outcome write must not fail the decision
            warnings.warn(
                f"{self.owner} could not record the approval of decision "
                f"{decision.decision_id!r}: {type(exc).__name__}: {exc}",
                DecisionLogWarning,
                stacklevel=3,
            )

    def log_decision(
        self, result: Decision | BaseException, in_force: InForce, *, model_name: ModelName
    ) -> Decision | Exception:
        """A decision of the protocol, logged (when a log is set); or its error.

        ``model_name`` is called only when a log is set. A control-flow signal (a
        ``BaseException`` that is not an ``Exception``) is raised.
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
            artefact_id=in_force.artefact_id, artefact_note=in_force.note,
        )  # fmt: skip


@dataclass
class PendingDecision:
    """One begun decision: its Decider, prompts and protocol, until it is finished.

    Drive :attr:`protocol` with :meth:`run` (or :meth:`arun`), which also logs; then
    :meth:`reply` gives the message a door answers with.
    """

    session: DecisionSession
    in_force: InForce
    conversations: list[list[BaseMessage]]
    """Each input as messages (without the task's prompt)."""
    prompts: list[Any]
    """Each input as it is sampled (with the task's prompt by the one policy)."""
    protocol: Generator[Draw, Drawn, list[Decision | BaseException]] = field(repr=False)

    @property
    def task(self) -> Task:
        """The task that decides (after a tool result, the tool-result task)."""
        return self.in_force.decider.task

    def prompt(self, draw: Draw, index: int) -> Any:
        """What ``draw`` samples for input ``index``: its request's messages, else the prompt."""
        if draw.request is not None:
            return draw.request["messages"]
        return self.prompts[index]

    def sample_args(self, draw: Draw, seed: int | None = None) -> dict[str, Any]:
        """N, the temperature and the seed of ``draw``; or its own request's arguments.

        The seed (``seed``, else the session's) moves on by the samples drawn so far, so a
        later round draws new samples (and N concurrent calls get the seeds they would get
        in one round). A one-pass draw's request (:attr:`Draw.request`) gives its own
        arguments (``n=1``, the temperature, ``logprobs``, the choice constraint…), its
        ``messages`` being :meth:`prompt`'s.
        """
        if draw.request is not None:
            args = {k: v for k, v in draw.request.items() if k != "messages"}
            return {"n": 1, "seed": None, **args}
        base = self.session.seed if seed is None else seed
        return {
            "n": draw.n,
            "temperature": self.session.options.temperature,
            "seed": None if base is None else base + draw.drawn,
        }

    def finish(
        self, results: Sequence[Decision | BaseException], *, model_name: ModelName
    ) -> list[Decision | Exception]:
        """Each input's decision, logged; or its error.

        A decision that sends a call the user approved with a yes also records the call
        label as the outcome of the decision that asked (its id is in the question's
        metadata), so a deployment's approvals become labels.
        """
        log = self.session.log_decision
        out = [log(r, self.in_force, model_name=model_name) for r in results]
        for result, conversation in zip(out, self.conversations, strict=True):
            if isinstance(result, Decision) and result.approved:
                self.session.record_approval(conversation, self.task)
        return out

    def run(
        self, draw: Callable[[Draw], Drawn], *, model_name: ModelName
    ) -> list[Decision | Exception]:
        """Drive the protocol with ``draw`` and :meth:`finish`."""
        return self.finish(drive_rounds(self.protocol, draw), model_name=model_name)

    async def arun(
        self, draw: Callable[[Draw], Awaitable[Drawn]], *, model_name: ModelName
    ) -> list[Decision | Exception]:
        """Async :meth:`run`."""
        return self.finish(await adrive_rounds(self.protocol, draw), model_name=model_name)

    def reply(self, decision: Decision, index: int = 0) -> AIMessage:
        """The message a door answers with for ``decision`` (of input ``index``)."""
        return reply_for(decision, self.conversations[index])


def decided(result: Decision | Exception) -> Decision:
    """``result``, or raise it when it is an error."""
    if isinstance(result, Exception):
        raise result
    return result
