"""The terms of one tool decision: which actions the samples allow, and the costs that apply.

:func:`decision_terms` is the one place the runtime (:class:`~taskcal_agents.decision.Decider`,
adaptive N) and the evaluation read them from the samples:

- the executable actions (:func:`~taskcal_agents.decision.carried_actions`), and, with a
  confirm action, whether the ask action's message would be the task's generic ``ask_text``
  while a grounded call could be sent (an ask decision then confirms the call: never a
  question that names nothing);
- under the task's ``effects``, the effect of the call the decision would send (the modal
  sendable call's tools, :func:`~taskcal_agents.decision._effects.call_effect`) and the cost
  matrix of that effect.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from langchain_core.messages import AIMessage
from numpy.typing import NDArray

from taskcal_agents.decision._effects import call_effect
from taskcal_agents.decision._executability import carried_actions, grounded_flags, trusted_flags
from taskcal_agents.decision._reply import ask_message, representative
from taskcal_agents.decision._task import Task
from taskcal_agents.parsing import GroundingContext, SampleGrounding, ToolEffect

__all__ = ["DecisionTerms", "approvable", "call_bar", "decision_terms"]


class DecisionTerms(NamedTuple):
    """What one decision's samples allow and what its actions cost.

    Attributes:
        executable: Which of the task's actions can be taken ``(m,)``.
        effect: The effect of the call the decision would send, under the task's
            ``effects`` (``None`` without).
        cost: The cost matrix that applies ``(k, m)``.
        nothing_to_ask: Whether the ask action's message would be the task's generic
            ``ask_text`` while a grounded call could be sent and confirmed: an ask decision
            then confirms the call instead (:meth:`~taskcal_agents.decision.Decider.decide`).
    """

    executable: NDArray[np.bool_]
    effect: ToolEffect | None
    cost: NDArray[np.float64]
    nothing_to_ask: bool = False


def decision_terms(
    task: Task,
    messages: Sequence[AIMessage],
    labels: Sequence[str | None],
    *,
    tool_names: Sequence[str] | None = None,
    groundings: Sequence[SampleGrounding] | None = None,
    context: GroundingContext | None = None,
) -> DecisionTerms:
    """The executable actions and the cost matrix of one decision (see the module docstring).

    Args:
        task: The task.
        messages: The sampled completions.
        labels: Their labels as g_T reads them (before grounding relabels any).
        tool_names: The offered tools' names (``None``: any).
        groundings: Each sample's grounding, under the task's ``grounding``.
        context: The request's tools and conversation (the tools' declared effects).
    """
    executable = carried_actions(
        task, messages, labels, tool_names=tool_names,
        grounded=grounded_flags(groundings), trusted=trusted_flags(groundings),
    )  # fmt: skip
    call = task.call_action
    sendable = call is not None and bool(executable[task.action_index(call)])
    nothing_to_ask = False
    if task.confirm_action is not None and sendable and groundings is not None:
        asked, _ = ask_message(task, messages, labels, groundings)
        nothing_to_ask = asked.content == task.ask_text and not asked.response_metadata
    if task.effects is None:
        return DecisionTerms(executable, None, task.cost_matrix(), nothing_to_ask)
    names: list[str] = []
    if sendable:
        sent = representative(
            task, str(call), messages, labels, tool_names=tool_names, groundings=groundings
        )
        names = [c["name"] for c in sent.tool_calls] if sent is not None else []
    effect = call_effect(names, task.effects, context)
    return DecisionTerms(executable, effect, task.cost_matrix(effect.effect), nothing_to_ask)


def call_bar(task: Task, effect: str | None = None, *, resolution: int = 10_000) -> float | None:
    """The least q(tool_call) at which a call of ``effect`` is sent, the rest on asking.

    Under the task's cost matrix for ``effect`` (:meth:`Task.cost_matrix`), with the belief
    ``(q, 1 − q, 0, …)`` over the labels (the call label first, the ask label second)
    and every action executable: the bar the demo prints beside q. ``None`` when no such
    q sends it, or the task has no call and ask labels.
    """
    call, ask = task.call_action, task.ask_action
    if call is None or ask is None or call not in task.labels or ask not in task.labels:
        return None
    grid = np.linspace(0.0, 1.0, resolution + 1)
    Q = np.zeros((grid.size, len(task.labels)))
    Q[:, task.label_index(call)] = grid
    Q[:, task.label_index(ask)] += 1.0 - grid
    chosen = np.argmin(Q @ task.cost_matrix(effect), axis=1)  # ties: the first action
    sends = np.flatnonzero(chosen == task.action_index(call))
    return None if sends.size == 0 else round(float(grid[sends[0]]), 6)


def approvable(
    task: Task, context: GroundingContext | None, tool_names: Sequence[str] | None = None
) -> bool:
    """Whether the conversation's last message approves calls the task may send as they are.

    The user's plain yes to the library's confirmation
    (:attr:`~taskcal_agents.parsing.GroundingContext.approved`), for a task with a call
    action, where every approved call is to an offered tool (in ``tool_names`` when given,
    and with a known schema), is grounded (under ``execute: any``: gives every required
    argument) and, under the task's trust policy, trusted (a confirmed call's values are:
    the user confirmed them). A mark that names anything
    else (a forged or stale one) approves nothing: the turn is decided from samples.
    """
    calls = None if context is None else context.approved
    if not calls or task.call_action is None or context is None:
        return False
    for call in calls:
        name = call["name"]
        if (tool_names is not None and name not in tool_names) or name not in context.schemas:
            return False
        checked = context.ground_call(call, task.trust)
        grounded_only = task.grounding is not None and task.grounding.execute == "grounded"
        sendable = checked.grounded if grounded_only else checked.offered and not checked.missing
        if not (sendable and checked.trusted):
            return False
    return True
