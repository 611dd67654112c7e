"""What a cost matrix buys: each decoder re-decided as the wrong-call cost varies.

A tool decision's costs are a deployment's choice, and the one that moves its behaviour
most is the cost of calling a tool when it should not (asking or refusing was right). For
each wrong-call cost in :data:`WRONG_CALL_COSTS`, the other costs fixed, every
probabilistic decoder of an evaluation decides again on its own cross-fitted beliefs (the
calibrators are fitted by likelihood, which no cost enters) by the runtime's rule
(:func:`~taskcal_agents.workflow._decoders.runtime_actions`), and is scored under that
cost: its expected cost, and how often it calls, asks and refuses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from calibrators import mbr_actions
from taskcal_agents.workflow._decoders import runtime_actions
from taskcal_agents.workflow._eval_arrays import EvalArrays
from taskcal_agents.workflow._evaluate import Evaluation

__all__ = ["WRONG_CALL_COSTS", "cost_sweep"]

WRONG_CALL_COSTS = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0)
"""The wrong-call costs swept by ``taskcal evaluate``."""

_ASK, _REFUSE = "request_for_info", "cannot_answer"


def _decoder(name: str) -> str:
    return name if name == "constant" else f"mbr_{name}"


def cost_sweep(
    evaluation: Evaluation, data: EvalArrays, costs: Sequence[float] = WRONG_CALL_COSTS
) -> dict[str, Any] | None:
    """Each probabilistic decoder re-decided and scored at each wrong-call cost.

    Args:
        evaluation: The result of :func:`~taskcal_agents.workflow._evaluate.evaluate_arrays`.
        data: Its input arrays.
        costs: The wrong-call costs: the cost of the ``tool_call`` action on every item
            whose label is not ``tool_call``.

    Returns:
        ``{"wrong_call_cost": [...], "decoders": {decoder: {"expected_cost": [...],
        "cost_se": [...], "call_rate": [...], "ask_rate": [...], "refuse_rate": [...]}}}``,
        one value per cost; rates are shares of all items. ``None`` for a task without a
        ``tool_call`` label and action.
    """
    if data.call_action not in data.actions or data.call_action not in data.labels:
        return None
    call = data.actions.index(data.call_action)
    indices = {
        "call_rate": call,
        "ask_rate": data.actions.index(_ASK) if _ASK in data.actions else None,
        "refuse_rate": data.actions.index(_REFUSE) if _REFUSE in data.actions else None,
    }
    others = np.array([label != data.call_action for label in data.labels])
    out: dict[str, Any] = {"wrong_call_cost": [float(c) for c in costs], "decoders": {}}
    for name, Q in evaluation.probs.items():
        series: dict[str, list[float | None]] = {
            "expected_cost": [],
            "cost_se": [],
            **{k: [] for k in indices},
        }
        for c in costs:
            cost = data.cost.copy()
            cost[others, call] = float(c)
            if name == "constant":  # the best constant action under this cost, per fold
                actions = mbr_actions(Q, cost)
            else:
                actions = runtime_actions(Q, dataclasses.replace(data, cost=cost))
            realised = cost[data.y, actions]
            series["expected_cost"].append(float(realised.mean()))
            se = float(realised.std(ddof=1) / np.sqrt(data.n)) if data.n > 1 else None
            series["cost_se"].append(se)
            for key, index in indices.items():
                series[key].append(None if index is None else float(np.mean(actions == index)))
        out["decoders"][_decoder(name)] = series
    return out
