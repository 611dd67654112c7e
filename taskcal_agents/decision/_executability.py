"""Executability: which actions the samples let the agent carry out, and MBR among them.

A sampled action (a tool call with its arguments, a direct answer) can be taken only when a
sample carries it out (:func:`carries_out`, :func:`carried_actions`); under the task's
``grounding.execute: grounded`` a tool call only by a sample whose calls are grounded.
:func:`executable_mbr` is the MBR rule restricted to those actions, shared by the
:class:`~taskcal_agents.decision.Decider` and the evaluation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from langchain_core.messages import AIMessage
from numpy.typing import NDArray

from calibrators import least_cost_actions, mbr_actions
from taskcal_agents.decision._task import TOOL_CALL_ACTION, Task
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.parsing import (
    SampleGrounding,
    extract_tool_calls,
    message_text,
    missing_arguments,
)

__all__ = [
    "TOOL_CALL_ACTION",
    "carried_actions",
    "carries_out",
    "executable_mbr",
    "grounded_flags",
    "mbr_action",
    "replacement_reason",
    "sendable_flags",
    "trusted_flags",
    "ungrounded_flags",
]


def mbr_action(q: NDArray[np.float64], cost: NDArray[np.float64]) -> int:
    """Return the minimum-Bayes-risk action index (ties go to the first action).

    The decision kernel's :func:`calibrators.mbr_actions` on one belief.
    """
    return int(mbr_actions(np.asarray(q)[None, :], cost)[0])


def executable_mbr(
    expected_costs: NDArray[np.float64], executable: NDArray[np.bool_]
) -> tuple[NDArray[np.intp], NDArray[np.bool_]]:
    """MBR restricted to the actions that can be carried out, row by row.

    The one rule shared by :class:`~taskcal_agents.decision.Decider` and the
    evaluation: per row, the action of least expected cost among the executable ones (ties
    go to the first action). A row with no executable action keeps its unrestricted MBR
    action. The choice is the decision kernel's (:func:`calibrators.least_cost_actions`).

    Args:
        expected_costs: Expected cost of each action, shape ``(n, m)``.
        executable: Whether each action can be carried out, shape ``(n, m)``.

    Returns:
        The chosen action indices ``(n,)`` and ``replaced`` ``(n,)``: whether the
        unrestricted MBR action could not be carried out and another one was taken.

    Raises:
        ConfigurationError: If the shapes differ or are not two-dimensional.
    """
    ec = np.asarray(expected_costs, dtype=np.float64)
    ok = np.asarray(executable, dtype=bool)
    if ec.ndim != 2 or ok.shape != ec.shape:
        msg = (
            "executable_mbr needs expected_costs and executable of the same shape (n, m), "
            f"got {ec.shape} and {ok.shape}."
        )
        raise ConfigurationError(msg)
    best = least_cost_actions(ec, check_input=False)
    chosen = least_cost_actions(ec, allowed=ok, check_input=False)
    return chosen, chosen != best


def grounded_flags(groundings: Sequence[SampleGrounding] | None) -> list[bool] | None:
    """Per sample, whether its calls are grounded (``None`` without groundings)."""
    return None if groundings is None else [g.grounded for g in groundings]


def trusted_flags(groundings: Sequence[SampleGrounding] | None) -> list[bool] | None:
    """Per sample, whether no call it makes breaks the task's trust policy.

    ``None`` without groundings, or when no sample has a violation (nothing to restrict).
    """
    if groundings is None or all(g.trusted for g in groundings):
        return None
    return [g.trusted for g in groundings]


def ungrounded_flags(groundings: Sequence[SampleGrounding] | None) -> list[bool] | None:
    """Per sample, whether it makes a complete call that is not grounded."""
    return None if groundings is None else [g.makes_call and not g.grounded for g in groundings]


def carries_out(
    action: str,
    message: AIMessage,
    *,
    tool_names: Sequence[str] | None = None,
    call_action: str | None = TOOL_CALL_ACTION,
) -> bool:
    """Whether a sample labelled ``action`` carries it out.

    For ``call_action`` (the task's :attr:`~taskcal_agents.decision.Task.call_action`;
    default :data:`TOOL_CALL_ACTION`): the message makes a tool call that can be extracted
    (:func:`~taskcal_agents.parsing.extract_tool_calls`) to an offered tool (any tool when
    *tool_names* is ``None``); for any other action: the message has non-empty text.
    """
    if action == call_action:
        calls = extract_tool_calls(message)
        if tool_names is None:
            return bool(calls)
        return any(c["name"] in tool_names for c in calls)
    return bool(message_text(message).strip())


def sendable_flags(
    task: Task,
    grounded: Sequence[bool] | None,
    n: int,
    trusted: Sequence[bool] | None = None,
) -> Sequence[bool]:
    """Per sample, whether the task lets its tool call be sent.

    Under ``execute: grounded`` only a grounded call; under a trust policy only a call
    whose values trusted sources supply (``trusted``: :func:`trusted_flags`; ``None``: all).

    Raises:
        ConfigurationError: A flag is missing: ``grounded`` under ``execute: grounded``, or
            ``trusted`` of another length than the samples.
    """
    spec = task.grounding
    if trusted is not None:
        if len(trusted) != n:
            msg = (
                f"task {task.name!r}: the trust policy needs one 'trusted' flag per sample, "
                f"got {len(trusted)} for {n} samples."
            )
            raise ConfigurationError(msg)
        flags = sendable_flags(task, grounded, n)
        return [f and t for f, t in zip(flags, trusted, strict=True)]
    if spec is None or spec.execute == "any" or n == 0:
        return [True] * n
    if grounded is None or len(grounded) != n:
        msg = (
            f"task {task.name!r} sends only grounded calls (grounding.execute='grounded'), so "
            f"the decision needs one 'grounded' flag per sample, got "
            f"{None if grounded is None else len(grounded)} for {n} samples; ground the "
            "samples with a GroundingContext of the request's tools and conversation."
        )
        raise ConfigurationError(msg)
    return grounded


def carried_actions(
    task: Task,
    messages: Sequence[AIMessage],
    labels: Sequence[str | None],
    *,
    tool_names: Sequence[str] | None = None,
    grounded: Sequence[bool] | None = None,
    trusted: Sequence[bool] | None = None,
) -> NDArray[np.bool_]:
    """Which of the task's actions these samples let the agent carry out.

    An action not in ``task.sampled_actions`` can always be carried out (the ask and
    abstain actions have their texts), except the confirm action, which can be taken iff
    the call action can (it names that call). A sampled action can be carried out iff some
    sample labelled with it carries it out (:func:`carries_out`); under the task's
    ``grounding.execute: grounded`` a tool call only by a sample whose calls are grounded.

    Args:
        task: The task.
        messages: The sampled completions.
        labels: Their labels as g_T reads them (``None``: unparsed), aligned with
            ``messages`` (before grounding relabels any: a relabelled call may still be
            sent under ``execute: any``).
        tool_names: The tools offered to the calls that drew the samples (``None``: any).
        grounded: Per sample, whether its calls are grounded
            (:attr:`~taskcal_agents.parsing._grounding.SampleGrounding.grounded`); needed under
            ``execute: grounded``.
        trusted: Per sample, whether its calls keep the task's trust policy
            (:func:`trusted_flags`; ``None``: all do).

    Returns:
        A boolean mask over ``task.action_list``.

    Raises:
        ConfigurationError: The task sends only grounded calls and ``grounded`` is missing.
    """
    sampled = set(task.sampled_actions)
    sendable = (
        sendable_flags(task, grounded, len(messages), trusted)
        if task.call_action in sampled
        else None
    )
    carried = {
        label
        for i, (message, label) in enumerate(zip(messages, labels, strict=True))
        if label in sampled
        and (label != task.call_action or sendable is None or sendable[i])
        and carries_out(label, message, tool_names=tool_names, call_action=task.call_action)
    }
    can = {a: a not in sampled or a in carried for a in task.action_list}
    if task.confirm_action is not None:
        can[task.confirm_action] = can.get(str(task.call_action), False)
    return np.array([can[a] for a in task.action_list], dtype=bool)


def replacement_reason(
    unrestricted: str,
    taken: str,
    groundings: Sequence[SampleGrounding] | None,
    call_action: str | None = TOOL_CALL_ACTION,
) -> str:
    """Why the MBR action ``unrestricted`` gave way to ``taken``, the cheapest executable one.

    For a tool call whose samples all made ungrounded calls, the reason names the arguments
    they lacked (:func:`~taskcal_agents.parsing._grounding.missing_arguments`); for one whose
    grounded calls all break the trust policy, the value, its source and the policy entry.
    """
    why = "no sample carried it out"
    if unrestricted == call_action and groundings and any(g.calls for g in groundings):
        untrusted = [v for g in groundings if g.grounded for v in g.violations]
        needed = missing_arguments(groundings)[1]
        if untrusted and not any(g.sendable for g in groundings):
            explained = "; ".join(dict.fromkeys(v.explain() for v in untrusted))
            why = f"every grounded sampled call breaks the trust policy ({explained})"
        else:
            why = "every sampled call is ungrounded" + (
                f" (they lack {', '.join(repr(a) for a in needed)})" if needed else ""
            )
    return (
        f"MBR chose {unrestricted!r}, but {why}; took the cheapest action that can be "
        f"carried out, {taken!r}"
    )
