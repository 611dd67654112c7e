"""Task: the labels, actions, cost matrix and parser (g_T) of one decision.

A task is per-deployment configuration. It is validated once, at construction, and then
used on the hot path without further checks. Files are YAML or JSON (by suffix)::

    format_version: 1
    name: weather-agent
    labels: [tool_call, request_for_info, cannot_answer]
    cost:                      # row = true label, column = action
      - [0, 1, 2]
      - [4, 0, 1]
      - [5, 2, 0]
    parser: {name: tool_decision, options: {tool_names: [get_weather]}}
    unparsed: other            # or "drop", or "as:cannot_answer"

An answer-or-abstain task on free-form questions may cluster its N answers by meaning
(``answer_clusters: lexical`` or ``entailment``, see :class:`AnswerClusterSpec`).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

import numpy as np
import yaml
from langchain_core.messages import AIMessage
from numpy.typing import NDArray
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)
from typing_extensions import override

from calibrators import minimax_action
from taskcal_agents._files import write_text
from taskcal_agents.decision._belief import DEFAULT_ALPHA, Belief
from taskcal_agents.decision._effects import ToolEffects
from taskcal_agents.errors import ConfigurationError, DataFileError
from taskcal_agents.parsing import (
    RELEVANCE_FEATURES,
    Parser,
    TrustPolicy,
    get_parser,
    with_offered_tools,
)

__all__ = [
    "TASK_FORMAT_VERSION",
    "UNGROUNDED_CALL",
    "AnswerClusterSpec",
    "GroundingSpec",
    "ParserSpec",
    "Task",
]

TASK_FORMAT_VERSION = 1
"""The ``format_version`` written to and accepted from task files."""


class ParserSpec(BaseModel):
    """A named parser plus its options, as written in a task file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    """A built-in parser name (see :func:`taskcal_agents.parsing.get_parser`) or a name the
    user's code registered with :func:`taskcal_agents.parsing.register_parser` (a task file
    never makes taskcal import code)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Keyword options passed to the parser factory."""


UNGROUNDED_CALL = "ungrounded_call"
"""The outcome of a ``tool_call`` sample whose call the conversation does not support,
under grounded belief features (:attr:`GroundingSpec.belief` ``"features"``)."""

TOOL_CALL_ACTION = "tool_call"
"""The call action of :func:`~taskcal_agents.decision.tool_decision` (and the
:attr:`Task.call_action` of a task file written before the field existed)."""


class GroundingSpec(BaseModel):
    """How argument grounding (sampled calls checked against the conversation) enters a decision.

    A sampled call is *grounded* when its tool was offered, every required argument is
    given and every given value is stated in the conversation or inferable (a boolean,
    the schema's default, an optional argument's enum value, a date from "tomorrow").
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    belief: Literal["features", "relabel", "off"] = "relabel"
    """How the belief sees ungrounded calls:

    - ``"relabel"``: g_T reads an ungrounded call as the ask action's label
      (``request_for_info``): the model called, but it lacked what the call needs.
    - ``"features"``: g_T keeps the call as ``tool_call`` in p̂ (raw MBR is g_T's), and
      the belief features give ungrounded calls a column of their own (k + 1 inputs, + 1
      more under ``unparsed: other``), read by the calibrators that read features
      (matrix scaling, full Dirichlet); k → k maps read p̂.
    - ``"off"``: the belief ignores grounding (only :attr:`execute` applies).
    """
    execute: Literal["grounded", "any"] = "grounded"
    """Which sampled calls a ``tool_call`` decision may send: ``"grounded"`` only (when
    every sampled call is ungrounded the decision takes the cheapest action that can be
    carried out, as for any MBR action no sample carries out), or ``"any"`` (a
    deployment that lets the model fill arguments from its own knowledge: "the weather in
    the capital of France")."""
    relevance: bool = False
    """Whether the calibrator also reads the relevance features
    (:data:`~taskcal_agents.parsing._relevance.RELEVANCE_FEATURES`: the request's lexical
    fit to the offered tools, the samples' calls to tools not offered, refusals, plain
    text, disagreement on the tool, and their agreement on the call), after the belief
    features. They are not
    probabilities, so only a calibrator that reads raw input columns
    (:class:`calibrators.LogisticCalibrator`) takes them; the others read the belief
    features or p̂ as before."""


class AnswerClusterSpec(BaseModel):
    """How an answer-or-abstain task clusters its N free-form answers (open-answer latents).

    With clustering, the latent per item is whether the *modal* answer is right: the
    answering samples are grouped by meaning
    (:func:`~taskcal_agents.parsing.cluster_answers`), a sample counts as the
    answer label when it is in the modal cluster and as the abstain label otherwise
    (another answer or an abstention; unparsed samples follow the ``unparsed`` policy),
    the answer action replies with the modal cluster's representative, and graded items
    are labelled by grading that answer (see :func:`~taskcal_agents.parsing.cluster_answers`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    method: Literal["lexical", "entailment"] = "lexical"
    """``"lexical"``: normalisation and numeric equivalence
    (:func:`~taskcal_agents.parsing._answer_clusters.answers_equivalent`); ``"entailment"``: also
    two-way entailment judged by the served model under a yes/no constraint
    (:func:`~taskcal_agents.parsing._answer_clusters.entailment_judge`; needs a server, so a
    :class:`~taskcal_agents.decision.Decider` needs a ``judge``)."""
    max_containment_tokens: int = Field(default=30, ge=0)
    """Longest answer (in tokens) that may contain another one (0: equality only)."""


def _check_names(values: Sequence[str], what: str, minimum: int) -> None:
    if len(values) < minimum or len(set(values)) != len(values) or not all(values):
        msg = (
            f"field {what!r} must hold at least {minimum} distinct non-empty names, "
            f"got {list(values)!r}."
        )
        raise ValueError(msg)


def _task_name(data: Any) -> str | None:
    """The ``name`` in the data a task is built from, when it is a non-empty string."""
    if isinstance(data, str | bytes | bytearray):
        try:
            data = json.loads(data)
        except ValueError:
            return None
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) and name else None


def _where(loc: tuple[int | str, ...]) -> str:
    """``cost[0][1]``, ``grounding.belief``: a pydantic error location as a field path."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path


def _invalid_task(data: Any, exc: ValidationError) -> ConfigurationError:
    """The :class:`ConfigurationError` for a task that fails validation, from ``exc``.

    One problem per pydantic error: the field path, the problem (the text of an error
    raised by a validator, else pydantic's) and, where pydantic's text does not say it,
    the value that arrived.
    """
    problems = []
    for err in exc.errors():
        cause = err.get("ctx", {}).get("error")
        text = str(cause) if isinstance(cause, ValueError) else str(err["msg"])
        text = text.rstrip(".")
        if err["loc"]:
            text = f"field {_where(err['loc'])!r}: {text}"
        if err["type"] == "extra_forbidden":
            text += f" (got {err['input']!r}; the fields are {list(Task.model_fields)!r})"
        elif err["type"] != "missing" and not (isinstance(cause, ValueError) and not err["loc"]):
            shown = repr(err["input"])
            text += f", got {shown if len(shown) <= 200 else shown[:197] + '...'}"
        problems.append(text)
    name = _task_name(data)
    who = f"Task {name!r}" if name is not None else "Task"
    count = f"{len(problems)} error{'s' if len(problems) > 1 else ''}"
    return ConfigurationError(f"{who} is invalid ({count}): {'; '.join(problems)}.")


@contextlib.contextmanager
def _invalid_as_configuration(data: Any) -> Iterator[None]:
    """Turn pydantic's ``ValidationError`` for a task built from ``data`` into ours."""
    try:
        yield
    except ValidationError as exc:
        raise _invalid_task(data, exc) from exc


def _answer_abstain(
    task: str, parser_name: str, parser: Parser, labels: Sequence[str]
) -> tuple[str, str]:
    answer = getattr(parser, "answer_label", None)
    abstain = getattr(parser, "abstain_label", None)
    if answer not in labels or abstain not in labels:
        msg = (
            f"task {task!r} is not an answer-or-abstain task: graded items and answer "
            f"clusters need the parser 'answer_or_abstain' (its answer and abstain labels "
            f"among the task labels), got parser {parser_name!r} and labels {list(labels)!r}."
        )
        raise ConfigurationError(msg)
    return str(answer), str(abstain)


class Task(BaseModel):
    """The decision problem: latent labels, actions, costs and the parser g_T.

    Construction validates everything (shape and values of the cost matrix, the parser
    and its labels, the unparsed policy, the special actions), so later calls do no
    checks. Instances are frozen.

    Building an invalid task (``Task(...)``, :meth:`model_validate`,
    :meth:`model_validate_json`, :meth:`model_validate_strings`) raises
    :class:`~taskcal_agents.errors.ConfigurationError`, whose message names the task and
    each bad field with the value that arrived, chained from pydantic's ``ValidationError``
    (a task nested in another pydantic model fails as that model's ``ValidationError``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    """A short name for the task (used in logs, files and traces)."""
    labels: list[str]
    """The ordered latent labels ℓ (rows of the cost matrix)."""
    actions: list[str] | None = None
    """The ordered actions a (columns of the cost matrix); default: the labels."""
    cost: list[list[float]]
    """Cost matrix C[ℓ, a]: row = true label, column = action; finite and >= 0."""
    parser: ParserSpec
    """The parser g_T (a name plus options); a plain string is a name without options."""
    unparsed: str = "drop"
    """Policy for unparsed samples (those the parser maps to no task label):

    - ``"drop"``: counted in ``n_unparsed`` only; the belief is over the parsed samples.
    - ``"as:<label>"``: counted as that label.
    - ``"other"``: evidence. The raw belief sees all N samples, spreading the u unparsed
      ones uniformly over the k labels, p̂(ℓ) = (c_ℓ + α + u/k) / (N + k·α), so one usable
      sample of eight is weak evidence; and the calibrator input gets one more column,
      the smoothed unparsed share (k + 1 inputs → k labels, read by matrix scaling and
      full Dirichlet calibration; see :class:`~taskcal_agents.decision.Belief`). Calibrators
      fitted on the k-column belief keep working: they read p̂.

    Under every policy a decision with no parsed sample at all takes ``fallback_action``.
    """
    fallback_action: str | None = None
    """The action taken when there is no usable sample; default: the minimax action
    argmin_a max_ℓ C[ℓ, a] (among the actions other than the confirm action)."""
    call_action: str | None = None
    """The action that sends a sampled tool call (under ``grounding`` also the label of a
    sample that makes one). ``None``: none, except that a task with a ``"tool_call"`` action
    (a task file written before this field) takes it."""
    ask_action: str | None = None
    """The action that asks the user for information (its message is the most typical
    sampled question, else ``ask_text``)."""
    abstain_action: str | None = None
    """The action that abstains (its message is ``abstain_text``)."""
    sampled_actions: list[str] = Field(default_factory=list)
    """Actions that only a sampled completion can carry out (a tool call with its
    arguments, a direct answer). When MBR picks one that no sample carries out, the
    decision takes the cheapest action that can be carried out, flagged as a fallback."""
    ask_text: str = "Could you give me more details so that I can help?"
    """Message for the ask action when no sampled question is available."""
    abstain_text: str = "I'm sorry, but I can't help with that."
    """Message for the abstain action."""
    prompt: str | None = None
    """Optional system prompt that elicits the decision; merged into every request by
    the sampling package's one prompt policy (calibration and deployment alike)."""
    description: str | None = None
    """Free-text description of the task."""
    answer_clusters: AnswerClusterSpec | None = None
    """Cluster the answers of an answer-or-abstain task by meaning (see
    :class:`AnswerClusterSpec`; a plain string is a method: ``lexical`` or
    ``entailment``); ``None``: each sample counts by its parsed label."""
    grounding: GroundingSpec | None = None
    """Argument grounding of a tool decision (see :class:`GroundingSpec`): how ungrounded
    calls enter the belief and which calls may be sent. ``None``: calls count and are sent
    whatever their arguments (a task file written before grounding existed)."""
    effects: ToolEffects | None = None
    """Effect-aware costs (see :class:`~taskcal_agents.decision.ToolEffects`): each tool's
    effect (``read``, ``write``, ``irreversible``) and the call action's cost column per
    effect; each decision is MBR under the matrix of the effect of the call it would send.
    Needs ``grounding``. ``None``: the ``cost`` matrix for every call."""
    confirm_action: str | None = None
    """The action that asks the user to approve the exact call the decision would send (not
    a label: its costs say what a confirmation costs under each truth). It can be taken
    only when the call action can. ``None``: no confirmation."""
    trust: TrustPolicy | None = None
    """Which sources may supply a sent call's argument values (see
    :class:`~taskcal_agents.parsing.TrustPolicy`; ``"by_kind"`` for
    :meth:`~taskcal_agents.parsing.TrustPolicy.by_kind`). A sampled call whose value only an
    untrusted source supplies (a tool result, for a prompt injection) is not sent: the
    decision takes the cheapest action that can be carried out (asking the user to confirm,
    or refusing) and logs the provenance and the policy entry. Needs ``grounding``.
    ``None``: every value the grounding accepts may be sent."""

    if not TYPE_CHECKING:  # type checkers keep the field signature pydantic gives them

        def __init__(self, /, **data: Any) -> None:
            with _invalid_as_configuration(data):
                super().__init__(**data)

        # pydantic's mark for its own __init__: validation of a dict (model_validate, a
        # nested task) keeps calling the validator, not this wrapper.
        __init__.__pydantic_base_init__ = True

    @classmethod
    @override
    def model_validate(cls, obj: Any, **kwargs: Any) -> Self:
        """Validate ``obj`` (a mapping of the fields, or a task) into a task.

        Keyword arguments as :meth:`pydantic.BaseModel.model_validate`.

        Raises:
            ConfigurationError: The task is invalid (chained from pydantic's error).
        """
        with _invalid_as_configuration(obj):
            return super().model_validate(obj, **kwargs)

    @classmethod
    @override
    def model_validate_json(cls, json_data: str | bytes | bytearray, **kwargs: Any) -> Self:
        """Validate a JSON document of the fields into a task.

        Keyword arguments as :meth:`pydantic.BaseModel.model_validate_json`.

        Raises:
            ConfigurationError: The JSON is malformed or the task is invalid (chained from
                pydantic's error).
        """
        with _invalid_as_configuration(json_data):
            return super().model_validate_json(json_data, **kwargs)

    @classmethod
    @override
    def model_validate_strings(cls, obj: Any, **kwargs: Any) -> Self:
        """Validate a mapping of string values into a task.

        Keyword arguments as :meth:`pydantic.BaseModel.model_validate_strings`.

        Raises:
            ConfigurationError: The task is invalid (chained from pydantic's error).
        """
        with _invalid_as_configuration(obj):
            return super().model_validate_strings(obj, **kwargs)

    _cost: NDArray[np.float64] = PrivateAttr()
    _costs_by_effect: dict[str, NDArray[np.float64]] = PrivateAttr(default_factory=dict)
    _parser: Parser = PrivateAttr()
    _label_index: dict[str, int] = PrivateAttr()
    _action_index: dict[str, int] = PrivateAttr()
    _unparsed_as: str | None = PrivateAttr(default=None)

    @field_validator("parser", mode="before")
    @classmethod
    def _parser_shorthand(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    @field_validator("answer_clusters", mode="before")
    @classmethod
    def _clusters_shorthand(cls, value: Any) -> Any:
        return {"method": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _validate(self) -> Task:
        labels = self.labels
        _check_names(labels, "labels", 2)
        actions = list(labels) if self.actions is None else self.actions
        _check_names(actions, "actions", 1)
        ragged = len({len(row) for row in self.cost}) > 1
        cost = np.asarray(self.cost if not ragged else [], dtype=np.float64)
        if ragged or cost.shape != (len(labels), len(actions)):
            msg = (
                f"field 'cost' must have shape (len(labels), len(actions)) = "
                f"({len(labels)}, {len(actions)}) (row = true label, column = action), got "
                f"{'ragged rows' if ragged else f'shape {cost.shape}'}."
            )
            raise ValueError(msg)
        if not np.all(np.isfinite(cost)) or np.any(cost < 0):
            msg = f"field 'cost' must be finite and >= 0, got {self.cost!r}."
            raise ValueError(msg)
        cost.setflags(write=False)
        call = self.call_action
        if call is None and TOOL_CALL_ACTION in actions:
            call = TOOL_CALL_ACTION
        roles = ("fallback_action", "ask_action", "abstain_action")
        for what, value in [("call_action", call), *((w, getattr(self, w)) for w in roles)]:
            if value is not None and value not in actions:
                msg = f"field {what!r} must be one of the actions {actions!r}, got {value!r}."
                raise ValueError(msg)
        for value in self.sampled_actions:
            if value not in actions or value in (self.ask_action, self.abstain_action):
                msg = (
                    "field 'sampled_actions' must list actions other than the ask and "
                    f"abstain actions, from {actions!r}; got {self.sampled_actions!r}."
                )
                raise ValueError(msg)
        unparsed_as: str | None = None
        if self.unparsed not in ("drop", "other"):
            unparsed_as = self.unparsed[3:] if self.unparsed.startswith("as:") else None
            if unparsed_as not in labels:
                msg = (
                    "field 'unparsed' must be 'drop', 'other' or 'as:<label>' with a label "
                    f"in {labels!r}, got {self.unparsed!r}."
                )
                raise ValueError(msg)
        parser = get_parser(self.parser.name, **self.parser.options)
        produced = getattr(parser, "labels", None)
        if produced is not None and not set(produced) <= set(labels):
            missing = [label for label in produced if label not in labels]
            msg = (
                f"parser {self.parser.name!r} can return labels {missing!r} that are not "
                f"among the task labels {labels!r}; add them to 'labels' or change the parser "
                "options."
            )
            raise ValueError(msg)
        if self.answer_clusters is not None:
            answer, abstain = _answer_abstain(self.name, self.parser.name, parser, labels)
            if set(labels) != {answer, abstain} or answer not in actions:
                msg = (
                    f"answer_clusters needs exactly the labels {[answer, abstain]!r} and the "
                    f"action {answer!r}, got labels {labels!r} and actions {actions!r}."
                )
                raise ValueError(msg)
        if self.grounding is not None:
            ask = self.ask_action
            if call is None or call not in labels or ask not in labels:
                msg = (
                    "grounding needs a tool decision, with a call_action that is also a label "
                    f"and an ask_action among the labels, got labels {labels!r}, call_action "
                    f"{call!r} and ask_action {ask!r}; use "
                    "taskcal_agents.decision.tool_decision() or drop 'grounding'."
                )
                raise ValueError(msg)
        if self.trust is not None and self.grounding is None:
            msg = (
                "a trust policy reads where each argument's value comes from, which argument "
                "grounding records; add 'grounding' (e.g. grounding: {belief: relabel}) or "
                "drop 'trust'."
            )
            raise ValueError(msg)
        self._check_effects(labels, actions, call)
        # The minimax action by default; never the confirm action, which needs a call.
        choices = [j for j, a in enumerate(actions) if a != self.confirm_action]
        fallback = self.fallback_action or actions[choices[minimax_action(cost[:, choices])]]
        if fallback == self.confirm_action:
            msg = (
                f"field 'fallback_action' is the confirm action {fallback!r}, which needs a call "
                "to confirm; set fallback_action to the ask or abstain action."
            )
            raise ValueError(msg)
        # Frozen model: fill in derived defaults once, here.
        object.__setattr__(self, "actions", actions)
        object.__setattr__(self, "call_action", call)
        object.__setattr__(self, "fallback_action", fallback)
        self._cost = cost
        self._costs_by_effect = self._effect_matrices(cost, actions, call)
        self._parser = parser
        self._label_index = {label: i for i, label in enumerate(labels)}
        self._action_index = {action: i for i, action in enumerate(actions)}
        self._unparsed_as = unparsed_as
        return self

    def _check_effects(self, labels: list[str], actions: list[str], call: str | None) -> None:
        confirm = self.confirm_action
        if confirm is not None:
            if confirm not in actions or confirm in labels or confirm == call:
                msg = (
                    f"field 'confirm_action' must be an action that is not a label nor the "
                    f"call action, from {actions!r}; got {confirm!r}."
                )
                raise ValueError(msg)
            if confirm in (self.ask_action, self.abstain_action, *self.sampled_actions):
                msg = f"field 'confirm_action' {confirm!r} has another role already."
                raise ValueError(msg)
        if (self.effects is not None or confirm is not None) and (
            self.grounding is None or call is None
        ):
            msg = (
                "'effects' and 'confirm_action' price and confirm the call a decision would "
                "send, which argument grounding finds; add 'grounding' (e.g. grounding: "
                "{belief: relabel}) and a call action."
            )
            raise ValueError(msg)
        if self.effects is not None:
            for effect, column in self.effects.call_cost.items():
                if len(column) != len(labels):
                    msg = (
                        f"field 'effects.call_cost.{effect}' must hold one cost per label "
                        f"{labels!r}, got {column!r}."
                    )
                    raise ValueError(msg)

    def _effect_matrices(
        self, cost: NDArray[np.float64], actions: list[str], call: str | None
    ) -> dict[str, NDArray[np.float64]]:
        if self.effects is None or call is None:
            return {}
        column = actions.index(call)
        out: dict[str, NDArray[np.float64]] = {}
        for effect, values in self.effects.call_cost.items():
            matrix = cost.copy()
            matrix[:, column] = values
            matrix.setflags(write=False)
            out[effect] = matrix
        return out

    @model_serializer(mode="wrap")
    def _omit_derived_call_action(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Leave out a ``call_action`` the task derives anyway (``"tool_call"``) and no ``trust``.

        A task, and the artefact that holds it, dump as they did before the fields.
        """
        data = handler(self)
        if not isinstance(data, dict):
            return data
        if data.get("call_action") == TOOL_CALL_ACTION and TOOL_CALL_ACTION in self.action_list:
            del data["call_action"]
        for key in ("trust", "effects", "confirm_action"):
            if key in data and data[key] is None:
                del data[key]  # a task without them dumps as before the fields
        return data

    def __eq__(self, other: object) -> bool:
        """Tasks are equal when their fields are (derived caches are ignored)."""
        if not isinstance(other, Task):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]

    # ------------------------------------------------------------------ accessors

    @property
    def action_list(self) -> list[str]:
        """The actions (never ``None`` after validation)."""
        return self.actions or list(self.labels)

    @property
    def default_action(self) -> str:
        """The fallback action (never ``None`` after validation)."""
        return self.fallback_action or self.action_list[0]

    @property
    def unparsed_as(self) -> str | None:
        """The label unparsed samples count as, or ``None`` (``"drop"``, ``"other"``)."""
        return self._unparsed_as

    @property
    def unparsed_evidence(self) -> bool:
        """Whether unparsed samples are evidence (the ``"other"`` policy)."""
        return self.unparsed == "other"

    @property
    def splits_ungrounded(self) -> bool:
        """Whether ungrounded calls get a belief feature of their own (grounded features)."""
        return self.grounding is not None and self.grounding.belief == "features"

    @property
    def outcomes(self) -> tuple[str, ...]:
        """What a parsed sample can count as (an unparsed one is ``None``).

        The labels, then :data:`UNGROUNDED_CALL` under grounded features (see
        :meth:`sample_outcomes`).
        """
        return (*self.labels, UNGROUNDED_CALL) if self.splits_ungrounded else tuple(self.labels)

    @property
    def n_features(self) -> int:
        """The width of the calibrator input.

        k labels, plus one column for ungrounded calls under grounded features, plus one
        for the unparsed share under ``"other"``.
        """
        return len(self.labels) + int(self.splits_ungrounded) + int(self.unparsed_evidence)

    @property
    def reads_relevance(self) -> bool:
        """Whether the relevance features follow the belief features (:attr:`n_inputs`)."""
        return self.grounding is not None and self.grounding.relevance

    @property
    def n_inputs(self) -> int:
        """The widest calibrator input.

        :attr:`n_features`, then the relevance features when :attr:`reads_relevance`
        (read only by a calibrator of raw input columns).
        """
        return self.n_features + (len(RELEVANCE_FEATURES) if self.reads_relevance else 0)

    def cost_matrix(self, effect: str | None = None) -> NDArray[np.float64]:
        """Return the cost matrix, shape ``(len(labels), len(actions))`` (read-only).

        Args:
            effect: The effect of the call the decision would send, under the task's
                ``effects``: the call column is that effect's ``call_cost``. ``None``, or an
                effect without a ``call_cost`` entry: the ``cost`` matrix as written.
        """
        if effect is None:
            return self._cost
        return self._costs_by_effect.get(effect, self._cost)

    def label_index(self, label: str) -> int:
        """Return the row of ``label``.

        Raises:
            ConfigurationError: If ``label`` is not a task label.
        """
        try:
            return self._label_index[label]
        except KeyError:
            msg = f"Task {self.name!r} has no label {label!r}; labels are {self.labels!r}."
            raise ConfigurationError(msg) from None

    def action_index(self, action: str) -> int:
        """Return the column of ``action``.

        Raises:
            ConfigurationError: If ``action`` is not a task action.
        """
        try:
            return self._action_index[action]
        except KeyError:
            msg = f"Task {self.name!r} has no action {action!r}; actions are {self.actions!r}."
            raise ConfigurationError(msg) from None

    def get_parser(self) -> Parser:
        """Return the task's parser g_T (built once)."""
        return self._parser

    def answer_abstain_labels(self) -> tuple[str, str]:
        """The (answer, abstain) labels of an answer-or-abstain task, from its parser.

        Raises:
            ConfigurationError: The parser has no answer and abstain labels among the
                task's labels (the task is not answer-or-abstain).
        """
        return _answer_abstain(self.name, self.parser.name, self._parser, self.labels)

    # -------------------------------------------------------------------- parsing

    def parse_completion(
        self, message: AIMessage, *, tool_names: Sequence[str] | None = None
    ) -> str | None:
        """Return the task label the parser g_T reads from a completion, ``None`` if unparsed.

        Parser outputs outside the task's labels count as unparsed. No ``unparsed``
        policy is applied: :meth:`belief_from_labels` applies it to these labels, and
        :meth:`parse` is this method followed by the policy.

        Args:
            message: The completion.
            tool_names: The names of the tools offered to the call that produced
                ``message``, when known; a tool-aware parser then counts only calls to
                them (see :func:`~taskcal_agents.parsing._labels.with_offered_tools`).
        """
        label = with_offered_tools(self._parser, tool_names)(message)
        return label if label in self._label_index else None

    def parse(self, message: AIMessage, *, tool_names: Sequence[str] | None = None) -> str | None:
        """Return the label of ``message`` after the ``unparsed`` policy.

        ``None`` means the sample is unparsed (policies ``"drop"`` and ``"other"``).
        ``tool_names`` as in :meth:`parse_completion`.
        """
        label = self.parse_completion(message, tool_names=tool_names)
        return self._unparsed_as if label is None else label

    def belief(self, messages: Sequence[AIMessage], *, alpha: float = DEFAULT_ALPHA) -> Belief:
        """Parse ``messages`` and return their belief (unparsed ones counted).

        Args:
            messages: The sampled completions.
            alpha: The symmetric Dirichlet prior.

        Returns:
            The belief over the task labels.
        """
        return self.belief_from_labels([self.parse_completion(m) for m in messages], alpha=alpha)

    def sample_outcomes(
        self, labels: Sequence[str | None], ungrounded: Sequence[bool] | None = None
    ) -> list[str | None]:
        """Apply the task's grounding to parsed labels: what each sample counts as.

        A ``tool_call`` sample whose call is ungrounded counts as the ask action's label
        (``belief: relabel``), as :data:`UNGROUNDED_CALL` (``belief: features``) or as
        ``tool_call`` (``belief: off``, or a task without grounding). A call cut off by
        ``max_tokens`` has nothing to check and stays ``tool_call``.

        Args:
            labels: One label per sample (:meth:`parse_completion`; ``None``: unparsed).
            ungrounded: Per sample, whether it makes a complete call that is not grounded
                (:attr:`~taskcal_agents.parsing._grounding.SampleGrounding.grounded`); ``None``
                for a task without grounding.

        Raises:
            ConfigurationError: The task has grounding and ``ungrounded`` is missing or
                does not match ``labels``.
        """
        spec = self.grounding
        if spec is None or spec.belief == "off":
            return list(labels)
        if ungrounded is None or len(ungrounded) != len(labels):
            msg = (
                f"Task {self.name!r} grounds its tool calls (grounding.belief="
                f"{spec.belief!r}), so sample_outcomes needs one 'ungrounded' flag per label, "
                f"got {None if ungrounded is None else len(ungrounded)} for {len(labels)} "
                "labels; ground the samples with a GroundingContext of the request's tools "
                "and conversation."
            )
            raise ConfigurationError(msg)
        into = UNGROUNDED_CALL if spec.belief == "features" else self.ask_action
        return [
            into if label == self.call_action and bad else label
            for label, bad in zip(labels, ungrounded, strict=True)
        ]

    def belief_from_outcomes(
        self, outcomes: Sequence[str | None], *, alpha: float = DEFAULT_ALPHA
    ) -> Belief:
        """Return the belief of samples' outcomes (:meth:`sample_outcomes`).

        :data:`UNGROUNDED_CALL` counts as ``tool_call`` in p̂ and in a feature column of
        its own (:class:`~taskcal_agents.decision.Belief`'s ``split_label``); the other
        outcomes as in :meth:`belief_from_labels`.
        """
        if not self.splits_ungrounded:
            return self.belief_from_labels(outcomes, alpha=alpha)
        ungrounded = sum(o == UNGROUNDED_CALL for o in outcomes)
        belief = self.belief_from_labels(
            [self.call_action if o == UNGROUNDED_CALL else o for o in outcomes], alpha=alpha
        )
        return Belief(
            belief.counts,
            self.labels,
            n=belief.n,
            n_unparsed=belief.n_unparsed,
            alpha=belief.alpha,
            unparsed_evidence=belief.unparsed_evidence,
            split_label=self.call_action,
            n_ungrounded=ungrounded,
        )

    def belief_from_labels(
        self, labels: Sequence[str | None], *, alpha: float = DEFAULT_ALPHA
    ) -> Belief:
        """Return the belief of already parsed samples under the ``unparsed`` policy.

        Args:
            labels: One label per sample (from :meth:`parse_completion`), ``None`` if unparsed.
            alpha: The symmetric Dirichlet prior.

        Returns:
            The belief over the task labels.

        Raises:
            ConfigurationError: If a label is not a task label.
        """
        return Belief.from_labels(
            labels,
            self.labels,
            alpha=alpha,
            unparsed_as=self._unparsed_as,
            unparsed_evidence=self.unparsed_evidence,
        )

    # ---------------------------------------------------------------------- files

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Task:
        """Load a task from a YAML (``.yaml``/``.yml``) or JSON (``.json``) file.

        Raises:
            DataFileError: If the file cannot be read, has the wrong format version, or the
                task in it is invalid (the message names the file and each bad field).
        """
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in {".yaml", ".yml", ".json"}:
            msg = f"task file must end in .yaml, .yml or .json, got suffix {path.suffix!r}."
            raise DataFileError(msg, path=str(path))
        try:
            text = path.read_text(encoding="utf-8")
            data = json.loads(text) if suffix == ".json" else yaml.safe_load(text)
        except (OSError, ValueError, yaml.YAMLError) as exc:
            msg = f"cannot read task file: {exc}"
            raise DataFileError(msg, path=str(path)) from exc
        if not isinstance(data, dict):
            msg = f"a task file must hold a mapping, got {type(data).__name__}."
            raise DataFileError(msg, path=str(path))
        version = data.pop("format_version", TASK_FORMAT_VERSION)
        if isinstance(version, bool) or version != TASK_FORMAT_VERSION:
            msg = (
                f"task file has format_version {version!r}, this version of taskcal-agents "
                f"reads format_version {TASK_FORMAT_VERSION}."
            )
            raise DataFileError(msg, path=str(path))
        try:
            return cls.model_validate(data)
        except ConfigurationError as exc:
            msg = f"{exc} Correct the task file."
            raise DataFileError(msg, path=str(path)) from exc

    def to_file(self, path: str | os.PathLike[str]) -> Path:
        """Write the task to YAML or JSON (by suffix) with its ``format_version``, atomically.

        Returns:
            The path written.
        """
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in {".yaml", ".yml", ".json"}:
            msg = (
                f"Task.to_file parameter 'path' must end in .yaml, .yml or .json, got "
                f"{str(path)!r}."
            )
            raise ConfigurationError(msg)
        data = {"format_version": TASK_FORMAT_VERSION, **self.model_dump(mode="json")}
        if suffix == ".json":
            text = json.dumps(data, indent=2) + "\n"
        else:
            text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        return write_text(text, path)
