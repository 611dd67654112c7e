"""The scores of one decoder's row: realised cost, label scores, calibration, tool-use rates.

Columns: mean realised cost and its standard error; the paired saving over the best
constant action and over ``mbr_raw`` (positive = this decoder is cheaper) with paired
standard errors (of the per-item cost differences, :func:`add_paired_savings`); accuracy
and macro-F1 over the task's labels (scikit-learn semantics, actions that are no label do
not enter the mean); NLL, Brier, ECE, classwise ECE; and the cross-fitted, signed task
calibration error ``tce`` (:func:`crossfit_tce`: :func:`calibrators.metrics.tce` with
``method="crossfit"`` and the ODIR map :data:`TCE_CALIBRATOR`: the cost a recalibration of
these beliefs would save on held-out items; it can be negative).

A tool decision (``tool_call`` among the labels and the actions) adds When2Call's
comparable columns to every row (:func:`tool_scores`): ``tool_call_recall`` (share of the
items labelled ``tool_call`` on which the decoder calls a tool), ``over_calling_rate``
(share of the other items on which it does), ``cannot_answer_recall`` (share of the items
labelled ``cannot_answer`` that it refuses), when some item was offered no tools
(``EvalArrays.no_tools``), ``no_tool_call_rate`` (share of those on which it calls a tool:
When2Call's tool hallucination rate), and where the items carry BFCL's possible answers
(``EvalArrays.call_correct``), ``executed_call_correct`` (share of its calls on those items
that BFCL accepts, the call being the one the runtime would send). Macro-F1 is When2Call's
headline score.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from taskcal_agents._stats import paired_difference
from taskcal_agents.workflow._calibrator_specs import (
    TCE_CALIBRATOR,
    CalibratorFactory,
    default_factory,
)
from taskcal_agents.workflow._eval_arrays import EvalArrays

__all__ = [
    "CANNOT_ANSWER",
    "add_paired_savings",
    "crossfit_tce",
    "score_actions",
    "tool_scores",
]

CANNOT_ANSWER = "cannot_answer"
"""The label and action of a request no offered tool can serve."""


def crossfit_tce(
    Q: NDArray[np.float64],
    y: NDArray[np.intp],
    cost: NDArray[np.float64],
    *,
    n_folds: int = 5,
    seed: int = 0,
    make: CalibratorFactory | None = None,
) -> float:
    """The cross-fitted, signed task calibration error of beliefs *Q*.

    :func:`calibrators.metrics.tce` with ``method="crossfit"``: the mean cost saved on
    held-out items by acting on a recalibration of *Q* (fitted on the other folds)
    instead of on *Q*. About 0 for calibrated beliefs, negative when the recalibration
    overfits; unlike the in-sample plug-in it is not biased upwards.

    Args:
        Q: Beliefs, (n, k).
        y: True label indices, (n,).
        cost: The cost matrix, (k, m).
        n_folds: Folds of the cross-fitting (at most n).
        seed: Seed of the folds.
        make: Returns the recalibration map (default: the workflow's
            :data:`TCE_CALIBRATOR`).

    Returns:
        The TCE.
    """
    from calibrators import metrics

    calibrator = (make or default_factory(TCE_CALIBRATOR))()
    return float(
        metrics.tce(
            Q, y, cost, calibrator=calibrator, method="crossfit",
            n_splits=min(n_folds, len(y)), random_state=seed,
        )
    )  # fmt: skip


def _probability_scores(
    Q: NDArray[np.float64],
    y: NDArray[np.intp],
    cost: NDArray[np.float64],
    tce: Callable[[NDArray[np.float64]], float | None] | None,
) -> dict[str, float | None]:
    from calibrators import metrics

    return {
        "nll": float(metrics.nll(y, Q)),
        "brier": float(metrics.brier(y, Q)),
        "ece": float(metrics.ece(y, Q)),
        "classwise_ece": float(metrics.classwise_ece(y, Q)),
        "tce": None if tce is None else tce(Q),
    }


def tool_scores(
    actions: NDArray[np.intp], data: EvalArrays, *, representative_calls: bool = True
) -> dict[str, float | int | None]:
    """When2Call's tool-use rates of one decoder's actions (empty for other tasks).

    Args:
        actions: Action index per item, (n,).
        data: The evaluation arrays.
        representative_calls: Whether the decoder's calls are the runtime's representative
            calls that ``data.call_correct`` scored (``False`` for the greedy completion
            and for a decoder that may send calls the task would not: no
            ``executed_call_correct`` then).

    Returns:
        For a tool decision (``data.call_action`` among the labels and the actions):
        ``tool_call_recall``, the share of the items labelled ``tool_call`` whose action
        is ``tool_call``; ``over_calling_rate``, the share of the other items whose action
        is ``tool_call`` (each ``None`` when it has no items); ``cannot_answer_recall``,
        the share of the items labelled ``cannot_answer`` whose action is
        ``cannot_answer`` (when the task has that label and action); when
        ``data.no_tools`` marks some item, ``no_tool_call_rate``, the share of those
        items whose action is ``tool_call`` (When2Call's tool hallucination rate); and
        when ``data.call_correct`` is set, ``executed_call_correct``, the share of the
        calls made on items with a possible answer that are accepted answers, with
        ``n_executed_checked``, how many such calls there were. ``{}`` for any other
        task.
    """
    call = data.call_action
    if call is None or call not in data.labels or call not in data.actions:
        return {}
    calls = np.asarray(actions) == data.actions.index(call)
    should = data.y == data.labels.index(call)

    def share(mask: NDArray[np.bool_]) -> float | None:
        return float(calls[mask].mean()) if mask.any() else None

    out: dict[str, float | int | None] = {
        "tool_call_recall": share(should),
        "over_calling_rate": share(~should),
    }
    if CANNOT_ANSWER in data.labels and CANNOT_ANSWER in data.actions:
        refused = np.asarray(actions) == data.actions.index(CANNOT_ANSWER)
        unservable = data.y == data.labels.index(CANNOT_ANSWER)
        out["cannot_answer_recall"] = (
            float(refused[unservable].mean()) if unservable.any() else None
        )
    if data.no_tools is not None and np.any(data.no_tools):
        out["no_tool_call_rate"] = share(np.asarray(data.no_tools, dtype=bool))
    if data.call_correct is not None and representative_calls:
        checked = calls & np.isfinite(data.call_correct)
        out["executed_call_correct"] = (
            float(data.call_correct[checked].mean()) if checked.any() else None
        )
        out["n_executed_checked"] = int(checked.sum())
    return out


def score_actions(
    actions: NDArray[np.intp],
    data: EvalArrays,
    probs: NDArray[np.float64] | None = None,
    *,
    tce: Callable[[NDArray[np.float64]], float | None] | None = None,
    representative_calls: bool = True,
) -> dict[str, Any]:
    """Score one decoder's actions (and the probabilities it decided on, if any).

    Args:
        actions: Action index per item, (n,).
        data: The evaluation arrays.
        probs: The beliefs behind the actions, (n, k), for NLL, Brier, ECE and TCE.
        tce: Maps beliefs to their TCE (e.g. :func:`crossfit_tce` with the folds fixed;
            it may return ``None`` when the TCE cannot be estimated); ``None`` leaves
            ``tce`` empty.
        representative_calls: Passed to :func:`tool_scores`.

    Returns:
        ``expected_cost`` (mean realised cost), ``cost_se`` (its standard error),
        ``accuracy`` and ``macro_f1`` (when every label is an action; else ``None``;
        macro-F1 averages over the task's labels only, like scikit-learn's
        ``f1_score(labels=..., average="macro", zero_division=0)``), the probability
        scores (``None`` without *probs*), ``action_counts``, and for a tool decision
        the rates of :func:`tool_scores`.
    """
    from sklearn.metrics import f1_score

    realised = data.cost[data.y, actions]
    n = data.n
    row: dict[str, Any] = {
        "expected_cost": float(realised.mean()),
        "cost_se": float(realised.std(ddof=1) / math.sqrt(n)) if n > 1 else None,
    }
    l2a = data.label_to_action()
    if l2a is not None:
        target = l2a[data.y]
        row["accuracy"] = float(np.mean(actions == target))
        row["macro_f1"] = float(
            f1_score(target, actions, labels=l2a, average="macro", zero_division=0)
        )
    else:
        row["accuracy"] = row["macro_f1"] = None
    if probs is not None:
        row.update(_probability_scores(probs, data.y, data.cost, tce))
    else:
        row.update(dict.fromkeys(("nll", "brier", "ece", "classwise_ece", "tce")))
    counts = np.bincount(actions, minlength=len(data.actions))
    row["action_counts"] = {a: int(c) for a, c in zip(data.actions, counts, strict=True)}
    row.update(tool_scores(actions, data, representative_calls=representative_calls))
    return row


def add_paired_savings(
    rows: list[dict[str, Any]], actions: Mapping[str, NDArray[np.intp]], data: EvalArrays
) -> None:
    """Add ``saving_vs_constant``/``saving_vs_raw`` and their paired se to each row."""
    realised = {name: data.cost[data.y, a] for name, a in actions.items()}
    for row in rows:
        if row.get("error"):
            continue
        own = realised[row["decoder"]]
        for key, base in (("constant", "constant"), ("raw", "mbr_raw")):
            mean, se = paired_difference(realised[base], own)
            row[f"saving_vs_{key}"] = mean
            row[f"saving_vs_{key}_se"] = se
