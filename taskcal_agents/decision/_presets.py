"""Built-in task factories: tool decisions, answer-or-abstain, ratings, multiple choice.

Tool decisions come in two turn types: on a user turn (:func:`tool_decision`) and right
after a tool result (:func:`after_tool_result`).

Each factory returns a validated :class:`~taskcal_agents.decision.Task`. Pass ``cost=`` to
replace the default cost matrix (row = true label, column = action).
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import ValidationError

from taskcal_agents._validation import describe_validation_error
from taskcal_agents.decision._effects import ToolEffects
from taskcal_agents.decision._task import TOOL_CALL_ACTION, GroundingSpec, ParserSpec, Task
from taskcal_agents.errors import ConfigurationError

__all__ = [
    "CONFIRM_ACTION",
    "DEFAULT_AFTER_TOOL_RESULT_COST",
    "DEFAULT_GROUNDING",
    "DEFAULT_TOOL_DECISION_COST",
    "DEFAULT_TOOL_EFFECTS",
    "EFFECT_AWARE_AFTER_TOOL_RESULT_COST",
    "EFFECT_AWARE_COST",
    "FLAT_TOOL_DECISION_COST",
    "TOOL_DECISION_GROUNDING",
    "TOOL_DECISION_PROMPT",
    "after_tool_result",
    "after_tool_result_for",
    "answer_or_abstain",
    "multiple_choice",
    "rating",
    "tool_decision",
]

DEFAULT_TOOL_DECISION_COST: tuple[tuple[float, ...], ...] = (
    # action: tool_call, request_for_info, cannot_answer, direct_answer
    (0.0, 1.0, 2.0, 2.0),  # true tool_call: asking costs a turn, giving up fails the task
    (4.0, 0.0, 1.0, 3.0),  # true request_for_info: a call with guessed arguments is costly
    (5.0, 2.0, 0.0, 4.0),  # true cannot_answer: acting on an impossible request is worst
    (2.0, 1.0, 2.0, 0.0),  # true direct_answer
)
"""The flat tool-decision costs: every call priced alike, no confirmation (the default of
:func:`tool_decision` with ``direct_answer``, the ``direct_answer`` row and column only
then; :data:`FLAT_TOOL_DECISION_COST` is its three-label part)."""

FLAT_TOOL_DECISION_COST: tuple[tuple[float, ...], ...] = tuple(
    row[:3] for row in DEFAULT_TOOL_DECISION_COST[:3]
)
"""The flat matrix a user-turn tool decision had before effects: a wrong call costs 4 (the
request lacked a value) or 5 (no tool fits), whatever the call does. Pass it as ``cost=``
to :func:`tool_decision` to decide as before (no effects, no confirm action)."""

EFFECT_AWARE_COST: tuple[tuple[float, ...], ...] = (
    # action: tool_call (a write; see DEFAULT_TOOL_EFFECTS), confirm, request_for_info,
    # cannot_answer
    (0.0, 0.25, 1.0, 2.0),  # true tool_call: a confirmation costs a click, a question a turn
    (4.0, 1.0, 0.0, 2.0),  # true request_for_info: confirming costs what asking would
    (4.0, 1.0, 1.0, 0.0),  # true cannot_answer
)
"""The default costs of :func:`tool_decision` on a user turn (rows: true label; columns:
``tool_call``, ``confirm``, ``request_for_info``, ``cannot_answer``). The call column is
priced by the effect of the call (:data:`DEFAULT_TOOL_EFFECTS`): 0 / 1 / 1 for a read,
0 / 4 / 4 for a write, 0 / 10 / 10 for an irreversible call. A confirmation costs the user
what a question costs, except when the call was right: then it costs a click. So a read call
is sent when q(tool_call) > 0.5, a write without confirmation above about 0.92, an
irreversible one above about 0.97."""

DEFAULT_TOOL_EFFECTS = ToolEffects(
    default="write",
    call_cost={
        "read": [0.0, 1.0, 1.0],
        "write": [0.0, 4.0, 4.0],
        "irreversible": [0.0, 10.0, 10.0],
    },
)
"""The default effects of :func:`tool_decision`: a tool nothing names is a ``write``, and a
wrong call costs 1 (read), 4 (write) or 10 (irreversible)."""

EFFECT_AWARE_AFTER_TOOL_RESULT_COST: tuple[tuple[float, ...], ...] = (
    # action: tool_call (priced by effect), confirm, request_for_info, cannot_answer,
    # direct_answer
    (0.0, 0.25, 1.0, 2.0, 2.0),  # true tool_call: confirming costs a click
    (4.0, 1.0, 0.0, 1.0, 2.0),  # true request_for_info: confirming costs what asking would
    (5.0, 2.0, 2.0, 0.0, 3.0),  # true cannot_answer
    (3.0, 2.0, 2.0, 2.0, 0.0),  # true direct_answer: the result answers
)
"""The costs after a tool result in a conversation an effect-aware :func:`tool_decision`
decides (:func:`after_tool_result_for`): :data:`DEFAULT_AFTER_TOOL_RESULT_COST` with the
confirm action, which costs what a question costs there except when the call was right (a
click) or a value was missing (1, as on a user turn). The call column is priced by the
effect of the call sent: the user turn's price of a wrong call, and for a call when the
result already answers the flat 3 or that price when higher (read 0 / 1 / 1 / 3, write
0 / 4 / 4 / 4, irreversible 0 / 10 / 10 / 10 by default)."""

CONFIRM_ACTION = "confirm"
"""The confirm action of :func:`tool_decision`."""

DEFAULT_AFTER_TOOL_RESULT_COST: tuple[tuple[float, ...], ...] = (
    # action: tool_call, request_for_info, cannot_answer, direct_answer
    (0.0, 1.0, 2.0, 2.0),  # true tool_call: another call is needed (a new city, a next step)
    (4.0, 0.0, 1.0, 2.0),  # true request_for_info: a call with invented arguments is costly
    (5.0, 2.0, 0.0, 3.0),  # true cannot_answer: the result shows the request cannot be met
    (3.0, 2.0, 2.0, 0.0),  # true direct_answer: the result answers; calling again loops
)
"""Default costs of the decision after a tool result (:func:`after_tool_result`).

Rows and columns as in :data:`DEFAULT_TOOL_DECISION_COST` with ``direct_answer``. What
changes once a result is in hand: answering from it is the expected move, so calling
again when the result already answers costs 3 (a wasted round that tends to repeat,
against 2 on a user turn) and asking the user then costs 2 (the user asked already,
against 1); a needless extra call is still cheaper than inventing arguments (4) or acting
on an impossible request (5).
"""


TOOL_DECISION_PROMPT = (
    "You are an assistant with tools. If a tool fits the request and every required "
    "argument is given, call the tool. If a tool fits but a required argument is missing, "
    "ask the user a short question for it. If no tool can do what the user wants, say that "
    "you cannot help with that."
)
"""The system prompt of :func:`tool_decision` on a user turn by default: it names the three
choices, and the calibrators shipped for the registry models were fitted on beliefs drawn
under it (:mod:`taskcal_agents.decision._shipped`)."""

DEFAULT_GROUNDING = GroundingSpec()
"""The grounding of :func:`after_tool_result` (and of :func:`tool_decision` with
``direct_answer``) by default: only grounded calls are sent, and ungrounded ones enter the
belief as :attr:`GroundingSpec.belief <taskcal_agents.decision.GroundingSpec.belief>`
says."""

TOOL_DECISION_GROUNDING = GroundingSpec(relevance=True)
"""The grounding of :func:`tool_decision` on a user turn by default: as
:data:`DEFAULT_GROUNDING`, and a calibrator also reads the relevance features (evidence
that no offered tool fits the request, and the samples' agreement on the call;
:mod:`taskcal_agents.parsing._relevance`). Chosen on the development split of the BFCL corpus,
where the logistic calibrator reading them cost 0.475 per decision against 0.594 without them
(Qwen2.5-Coder-0.5B, 219 items); the calibrators the package ships read them."""


def _matrix(cost: Sequence[Sequence[float]]) -> list[list[float]]:
    return [[float(c) for c in row] for row in cost]


def _tool_effects(
    effects: ToolEffects | Mapping[str, Any], tool_effects: Mapping[str, str] | None
) -> ToolEffects:
    """``effects`` validated, with ``tool_effects`` added to its ``tools``."""
    data = effects.model_dump() if isinstance(effects, ToolEffects) else dict(effects)
    if tool_effects:
        data["tools"] = {**dict(data.get("tools") or {}), **tool_effects}
    try:
        return ToolEffects.model_validate(data)
    except ValidationError as exc:
        problems = describe_validation_error(exc, with_input=True)
        msg = f"tool_decision parameters 'effects' and 'tool_effects' are invalid: {problems}."
        raise ConfigurationError(msg) from exc


def tool_decision(
    direct_answer: bool = False,
    cost: Sequence[Sequence[float]] | None = None,
    *,
    tool_names: Sequence[str] | None = None,
    name: str = "tool_decision",
    unparsed: str = "other",
    grounding: GroundingSpec | Literal["default"] | None = "default",
    effects: ToolEffects | Mapping[str, Any] | Literal["default"] | None = "default",
    tool_effects: Mapping[str, str] | None = None,
    **fields: Any,
) -> Task:
    """Tool call, confirm the call, ask for information, or abstain (or answer directly).

    Labels: ``tool_call``, ``request_for_info``, ``cannot_answer`` (and ``direct_answer``).
    On a user turn the actions are ``tool_call``, ``confirm`` (ask the user to approve the
    exact call), ``request_for_info`` and ``cannot_answer``, priced by the effect of the call
    (:data:`EFFECT_AWARE_COST`, :data:`DEFAULT_TOOL_EFFECTS`): a read is made on weaker
    evidence than a payment, and a grounded call short of its bar is confirmed rather than
    turned into a question. A ``cost`` with one column per label (e.g.
    :data:`FLAT_TOOL_DECISION_COST`) decides without effects or confirmation, as before,
    and so does a task without grounding (``grounding=None``: no call is checked, so none
    is priced or confirmed); with ``direct_answer`` the default is
    :data:`DEFAULT_TOOL_DECISION_COST`, flat. The
    fallback (no usable sample) is ``request_for_info``. Unparsed samples are
    evidence by default (``unparsed="other"``): small models often answer an impossible
    request with text no label fits, and a belief drawn from one usable sample of eight
    must not look like strong evidence.

    Sampled calls are checked against the offered tools' schemas and the conversation
    (argument grounding, :data:`DEFAULT_GROUNDING`): a call with a missing or
    invented required argument is *ungrounded*, evidence for asking, and never sent; the
    ask action's question names what the calls lacked. The front doors pass the request's
    tools and conversation; a direct :meth:`Decider.decide
    <taskcal_agents.decision.Decider.decide>` call needs ``context=``.

    Args:
        direct_answer: Add the ``direct_answer`` label and action.
        cost: Cost matrix replacing the default.
        tool_names: Only calls to these tools count as ``tool_call``.
        name: The task name.
        unparsed: The unparsed policy (``"other"``, ``"drop"`` or ``"as:<label>"``, see
            :attr:`Task.unparsed`).
        grounding: How argument grounding enters the decision
            (:class:`~taskcal_agents.decision.GroundingSpec`); ``None``: calls count and are
            sent whatever their arguments. ``"default"``: :data:`TOOL_DECISION_GROUNDING`
            (with the relevance features), or :data:`DEFAULT_GROUNDING` with ``direct_answer``.
        effects: Each tool's effect and the call's cost by effect
            (:class:`~taskcal_agents.decision.ToolEffects` or its mapping; with the default
            costs, a mapping's missing fields are :data:`DEFAULT_TOOL_EFFECTS`'). ``"default"``:
            :data:`DEFAULT_TOOL_EFFECTS` with the default costs, none with a ``cost`` given
            or with ``direct_answer``.
        tool_effects: Effects by tool name (``{"get_weather": "read", "send_money":
            "irreversible"}``), added to ``effects``' ``tools``: they take precedence over
            what the tools declare themselves.
        **fields: Further :class:`Task` fields (``ask_text``, ``prompt``, …). The
            ``prompt`` is :data:`TOOL_DECISION_PROMPT` by default without ``direct_answer``
            (``None``: no task prompt).

    Returns:
        The task.
    """
    if not direct_answer:
        fields.setdefault("prompt", TOOL_DECISION_PROMPT)
    if grounding == "default":
        grounding = DEFAULT_GROUNDING if direct_answer else TOOL_DECISION_GROUNDING
    labels = [TOOL_CALL_ACTION, "request_for_info", "cannot_answer"]
    if direct_answer:
        labels.append("direct_answer")
    k = len(labels)
    if cost is None and not direct_answer and grounding is None:
        cost = FLAT_TOOL_DECISION_COST  # no grounding: no call to price or confirm
    elif cost is None and not direct_answer:
        cost = EFFECT_AWARE_COST
        if effects == "default":
            effects = DEFAULT_TOOL_EFFECTS
        elif isinstance(effects, Mapping):  # what it leaves out is the default's
            effects = {**DEFAULT_TOOL_EFFECTS.model_dump(), **effects}
    elif cost is None:
        cost = [list(row[:k]) for row in DEFAULT_TOOL_DECISION_COST[:k]]
    if effects == "default":
        effects = None
    if effects is not None:
        effects = _tool_effects(effects, tool_effects)
    elif tool_effects:
        msg = (
            "tool_decision parameter 'tool_effects' names effects for a decision without "
            "effects (a flat 'cost', direct_answer or no grounding); pass 'effects' too."
        )
        raise ConfigurationError(msg)
    confirm = len(cost) == k and all(len(row) == k + 1 for row in cost)
    if confirm:
        fields.setdefault("actions", [TOOL_CALL_ACTION, CONFIRM_ACTION, *labels[1:]])
        fields.setdefault("confirm_action", CONFIRM_ACTION)
        fields.setdefault("fallback_action", "request_for_info")
    options: dict[str, Any] = {"direct_answer": direct_answer}
    if tool_names is not None:
        options["tool_names"] = list(tool_names)
    fields.setdefault(
        "sampled_actions",
        [label for label in labels if label in (TOOL_CALL_ACTION, "direct_answer")],
    )
    return Task(
        name=name,
        labels=labels,
        cost=_matrix(cost),
        effects=effects,
        parser=ParserSpec(name="tool_decision", options=options),
        unparsed=unparsed,
        call_action=TOOL_CALL_ACTION,
        ask_action="request_for_info",
        abstain_action="cannot_answer",
        grounding=grounding,
        **fields,
    )


def after_tool_result(
    cost: Sequence[Sequence[float]] | None = None,
    *,
    tool_names: Sequence[str] | None = None,
    name: str = "after_tool_result",
    unparsed: str = "other",
    fallback_action: str = "direct_answer",
    grounding: GroundingSpec | None = DEFAULT_GROUNDING,
    **fields: Any,
) -> Task:
    """The decision after a tool result: answer from it, call (another) tool, ask, abstain.

    The labels, actions and parser are those of ``tool_decision(direct_answer=True)`` (a
    calibrator fitted on tool-result turns of that task fits this one); the default costs
    are :data:`DEFAULT_AFTER_TOOL_RESULT_COST`. The front doors use this task when the
    last message is a ``ToolMessage``
    (:func:`~taskcal_agents.parsing.is_tool_result_turn`): the middleware by default
    for a ``tool_decision`` task (:func:`after_tool_result_for`, which also keeps the task's
    trust policy), the LangGraph example through a second
    :class:`~taskcal_agents.langchain.TaskCalibratedRunnable` on
    :func:`after_tool_result_for`.

    A sampled call identical to one already made and answered in the current user turn is
    a *repeat*: unparsed, never evidence for calling and never executed again (see
    :meth:`Decider.decide <taskcal_agents.decision.Decider.decide>`); with the default
    ``unparsed="other"`` repeats weaken the belief rather than vanish. The fallback (no
    usable sample, e.g. every sample repeated the call) is ``direct_answer``: the front
    door then reports the tool result itself
    (:func:`~taskcal_agents.parsing.tool_result_reply`) rather than ask the user again.

    Args:
        cost: Cost matrix replacing the default (4 × 4, row = true label).
        tool_names: Only calls to these tools count as ``tool_call``.
        name: The task name.
        unparsed: The unparsed policy (see :attr:`Task.unparsed`).
        fallback_action: The action without a usable sample.
        grounding: Argument grounding (see :func:`tool_decision`); a call's arguments may
            come from the tool result.
        **fields: Further :class:`Task` fields.

    Returns:
        The task.
    """
    return tool_decision(
        True,
        [list(row) for row in DEFAULT_AFTER_TOOL_RESULT_COST] if cost is None else cost,
        tool_names=tool_names,
        name=name,
        unparsed=unparsed,
        fallback_action=fallback_action,
        grounding=grounding,
        **fields,
    )


def after_tool_result_for(task: Task) -> Task | None:
    """The task decided right after a tool result in a conversation that ``task`` decides.

    For a ``tool_decision`` task, :func:`after_tool_result` with its offered tools, texts and
    own prompt (not the user turn's default :data:`TOOL_DECISION_PROMPT`, which asks to
    call, ask or refuse where a tool result asks for an answer), its trust policy (after a
    tool result is where an injected value first appears) and its tools' effects (without
    the per-effect costs, which are the user turn's); ``None`` for any other
    task, which decides on tool-result turns itself. The middleware's default
    (``tool_result="auto"``).
    """
    if task.parser.name != "tool_decision":
        return None
    effects = task.effects
    effect_aware = (
        task.confirm_action is not None
        and effects is not None
        and bool(effects.call_cost)
        and len(task.labels) == 3
    )
    extra: dict[str, Any] = {}
    if effect_aware:
        assert effects is not None
        # The user turn's price of each effect's wrong call; a call when the result already
        # answers costs the flat matrix's 3 (a wasted round), or that price when higher.
        call_cost = {effect: [*row, max(3.0, row[1])] for effect, row in effects.call_cost.items()}
        effects = effects.model_copy(update={"call_cost": call_cost})
        extra = {"cost": [list(row) for row in EFFECT_AWARE_AFTER_TOOL_RESULT_COST]}
    elif effects is not None:  # the tools' effects carry over (the warrant rule reads them)
        effects = effects.model_copy(update={"call_cost": {}})
    return after_tool_result(
        tool_names=task.parser.options.get("tool_names"),
        ask_text=task.ask_text,
        abstain_text=task.abstain_text,
        prompt=None if task.prompt == TOOL_DECISION_PROMPT else task.prompt,
        trust=task.trust,
        effects=effects,
        **extra,
    )


def answer_or_abstain(
    wrong_answer_cost: float = 4.0,
    abstain_cost: float = 1.0,
    cost: Sequence[Sequence[float]] | None = None,
    *,
    name: str = "answer_or_abstain",
    unparsed: str = "drop",
    answer_clusters: str | None = None,
    **fields: Any,
) -> Task:
    """Answer or abstain.

    Labels and actions: ``answer`` (the question should be answered: the model's answer
    is right) and ``abstain`` (it should not). Answering wrongly costs
    ``wrong_answer_cost``; abstaining on an answerable question costs ``abstain_cost``.
    ``answer`` is a sampled action (only a sampled answer carries it out), so with no
    answering sample the decision abstains, flagged as a fallback.

    With ``answer_clusters`` (free-form questions) the answers are clustered by meaning:
    the belief in ``answer`` is the modal cluster's share, ``answer`` means "the modal
    answer is right" and the answer action replies with it (see
    :class:`~taskcal_agents.decision.AnswerClusterSpec`).

    Args:
        wrong_answer_cost: C[abstain, answer].
        abstain_cost: C[answer, abstain].
        cost: Full cost matrix replacing the two numbers.
        name: The task name.
        unparsed: The unparsed policy.
        answer_clusters: ``"lexical"`` (normalisation and numeric equivalence),
            ``"entailment"`` (also two-way entailment judged by the served model) or
            ``None`` (no clustering: each sample counts by its parsed label).
        **fields: Further :class:`Task` fields.

    Returns:
        The task.
    """
    default = [[0.0, abstain_cost], [wrong_answer_cost, 0.0]]
    fields.setdefault("sampled_actions", ["answer"])
    return Task(
        name=name,
        labels=["answer", "abstain"],
        cost=_matrix(default if cost is None else cost),
        parser=ParserSpec(name="answer_or_abstain"),
        unparsed=unparsed,
        abstain_action="abstain",
        # A method name is the field's shorthand, expanded by its before-validator.
        answer_clusters=answer_clusters,  # type: ignore[arg-type]
        **fields,
    )


def rating(
    k: int = 5,
    cost: Sequence[Sequence[float]] | None = None,
    *,
    name: str = "rating",
    unparsed: str = "drop",
    low: int = 1,
    **fields: Any,
) -> Task:
    """A rating on a low…low+k−1 scale (default 1…k) with L1 cost C[i, j] = |i − j|.

    Args:
        k: The number of rating levels (labels ``"1"`` … ``"k"`` by default).
        low: The lowest level: 0 gives labels ``"0"`` … ``"k-1"`` (STS-B's 0–5 is k=6,
            low=0).
        cost: Cost matrix replacing the L1 default.
        name: The task name.
        unparsed: The unparsed policy.
        **fields: Further :class:`Task` fields.

    Returns:
        The task.
    """
    default = [[float(abs(i - j)) for j in range(k)] for i in range(k)]
    return Task(
        name=name,
        labels=[str(i) for i in range(low, low + k)],
        cost=_matrix(default if cost is None else cost),
        parser=ParserSpec(name="rating", options={"k": k, "low": low} if low != 1 else {"k": k}),
        unparsed=unparsed,
        **fields,
    )


def multiple_choice(
    options: Sequence[str] | Mapping[str, str],
    cost: Sequence[Sequence[float]] | None = None,
    *,
    name: str = "multiple_choice",
    unparsed: str = "drop",
    **fields: Any,
) -> Task:
    """Multiple choice with 0-1 cost.

    Args:
        options: Option texts (labelled ``A``, ``B``, … in order) or a mapping from
            label to option text.
        cost: Cost matrix replacing the 0-1 default.
        name: The task name.
        unparsed: The unparsed policy.
        **fields: Further :class:`Task` fields.

    Returns:
        The task.
    """
    if isinstance(options, Mapping):
        labels = [str(label) for label in options]
        texts = [str(text) for text in options.values()]
    else:
        texts = [str(text) for text in options]
        labels = list(string.ascii_uppercase[: len(texts)])
    k = len(labels)
    default = [[0.0 if i == j else 1.0 for j in range(k)] for i in range(k)]
    return Task(
        name=name,
        labels=labels,
        cost=_matrix(default if cost is None else cost),
        parser=ParserSpec(name="choice", options={"labels": labels, "texts": texts}),
        unparsed=unparsed,
        **fields,
    )
