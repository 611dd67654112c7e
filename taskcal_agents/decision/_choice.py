"""Choosing the action from calibrated beliefs: executable MBR, then the risk guard.

Per row, the action of least expected cost among those the samples can carry out
(:func:`~taskcal_agents.decision._executability.executable_mbr`); a risk limit's guard then
downgrades a guarded action whose score is below its threshold
(:class:`~taskcal_agents.decision._risk_control.RiskGuard`). This is the one map from q to the
action the :class:`~taskcal_agents.decision.Decider` returns, which the adaptive-N
stopping rule and ``refit`` replay.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from calibrators import expected_costs
from taskcal_agents.decision._executability import executable_mbr
from taskcal_agents.decision._risk_control import RiskControl, RiskGuard
from taskcal_agents.decision._task import Task
from taskcal_agents.errors import ConfigurationError

__all__ = ["ActionChoice", "choose_actions", "guard_fields"]


class ActionChoice(NamedTuple):
    """The actions the Decider takes, row by row (:func:`choose_actions`).

    Attributes:
        actions: The final action indices ``(n,)``: what the Decider returns.
        unguarded: The executable MBR action indices ``(n,)``, before the risk guard.
        replaced: Whether the unrestricted MBR action could not be carried out and
            another one was taken ``(n,)``.
        guarded: Whether the risk guard downgraded the row ``(n,)`` (all ``False``
            without a guard).
        scores: The guard's score of each row's unguarded action ``(n,)``; ``None``
            without a guard.
        expected_costs: The expected cost of each action under each row's belief ``(n, m)``.
    """

    actions: NDArray[np.intp]
    unguarded: NDArray[np.intp]
    replaced: NDArray[np.bool_]
    guarded: NDArray[np.bool_]
    scores: NDArray[np.float64] | None
    expected_costs: NDArray[np.float64]


def choose_actions(
    task: Task,
    cost: NDArray[np.float64],
    Q: NDArray[np.float64],
    executable: NDArray[np.bool_],
    guard: RiskGuard | None,
    risk_control: RiskControl | None,
) -> ActionChoice:
    """The actions taken on calibrated beliefs ``Q`` ``(n, k)``: executable MBR, then the guard.

    ``cost`` is the cost matrix ``(k, m)``, or one per row ``(n, k, m)``; ``guard`` the risk
    control's guard on the task (see
    :meth:`Decider.choose_actions <taskcal_agents.decision.Decider.choose_actions>`).

    Raises:
        ConfigurationError: If the shapes do not match.
    """
    q = np.asarray(Q, dtype=np.float64)
    if q.ndim != 2 or q.shape[1] != len(task.labels):
        msg = (
            f"Decider.choose_actions parameter 'Q' must have shape (n, {len(task.labels)}) "
            f"(one calibrated belief over {list(task.labels)!r} per row), got {q.shape}."
        )
        raise ConfigurationError(msg)
    cost = np.asarray(cost, dtype=np.float64)
    if cost.ndim == 3:  # one matrix per row (each row's call effect)
        ec = np.einsum("nk,nkm->nm", q, cost)
    else:
        ec = expected_costs(q, cost, check_input=False)
    chosen, replaced = executable_mbr(ec, executable)
    if guard is None or risk_control is None:
        no = np.zeros(len(chosen), dtype=bool)
        return ActionChoice(chosen, chosen, replaced, no, None, ec)
    actions, down, score = guard.apply(q, chosen, risk_control.threshold, executable=executable)
    return ActionChoice(actions, chosen, replaced, down, score, ec)


def guard_fields(
    choice: ActionChoice, guard: RiskGuard | None, risk_control: RiskControl | None
) -> dict[str, Any]:
    """The Decision's guard fields for the first row of ``choice`` (none without a guard)."""
    if guard is None or risk_control is None or choice.scores is None:
        return {}
    index = int(choice.unguarded[0])
    return {
        "guard": str(risk_control.spec),
        "guard_threshold": risk_control.threshold,
        "guard_score": float(choice.scores[0]) if guard.guarded[index] else None,
        "guarded": bool(choice.guarded[0]),
    }
