"""The evaluation as JSON: what ``taskcal evaluate --out`` writes and ``taskcal report`` reads."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from taskcal_agents.workflow._eval_arrays import EvalArrays
from taskcal_agents.workflow._evaluate import Evaluation

__all__ = ["EVALUATION_FORMAT", "EVALUATION_FORMAT_VERSION", "evaluation_to_dict"]


EVALUATION_FORMAT = "taskcal.evaluation"


EVALUATION_FORMAT_VERSION = 2
"""2: scores of the runtime rule (executable MBR, served-row fits), paired savings,
cross-fitted signed ``tce``, macro-F1 over the task's labels."""


def evaluation_to_dict(
    evaluation: Evaluation,
    data: EvalArrays,
    *,
    task: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
    include_items: bool = True,
) -> dict[str, Any]:
    """The JSON-able evaluation (what ``taskcal evaluate --out`` writes and ``report`` reads).

    Args:
        evaluation: The result of :func:`evaluate_arrays`.
        data: Its input arrays.
        task: Task summary (name, labels, actions, cost).
        meta: Anything else worth recording (samples path, alpha, settings).
        include_items: Add per-item ids, labels, folds, no-sample flags, executable
            masks (rows over ``task.actions``), beliefs and actions (for ``report``), the
            number of answer clusters when the task clusters answers, and the
            ``executable_any`` and ``no_tools`` masks and ``call_correct`` when set.

    Returns:
        ``{"format", "format_version", "task", "n_items", "n_excluded_no_sample",
        "folds", "seed", "decoders", "permutation_test", "meta", "items"}``, and
        ``n_no_tools`` (items offered no tools) for a tool decision with ``no_tools``.
    """
    out: dict[str, Any] = {
        "format": EVALUATION_FORMAT,
        "format_version": EVALUATION_FORMAT_VERSION,
        "task": task
        or {
            "labels": list(data.labels),
            "actions": list(data.actions),
            "cost": data.cost.tolist(),
        },
        "n_items": data.n,
        "n_excluded_no_sample": evaluation.n_excluded_no_sample,
        "folds": evaluation.n_folds,
        "seed": evaluation.seed,
        "decoders": evaluation.rows,
        "permutation_test": evaluation.permutation.to_dict() if evaluation.permutation else None,
        "permutation_error": evaluation.permutation_error,
        "meta": meta or {},
    }
    if data.no_tools is not None:
        out["n_no_tools"] = int(np.sum(data.no_tools))
    if include_items:
        out["items"] = {
            "ids": list(data.ids),
            "y": data.y.tolist(),
            "fold": evaluation.folds.tolist(),
            "no_sample": data.no_sample.tolist(),
            "executable": np.asarray(data.executable).tolist(),
            "probs": {name: Q.tolist() for name, Q in evaluation.probs.items()},
            "actions": {name: a.tolist() for name, a in evaluation.actions.items()},
        }
        if data.n_clusters is not None:
            out["items"]["n_clusters"] = data.n_clusters.tolist()
        if data.executable_any is not None:
            out["items"]["executable_any"] = np.asarray(data.executable_any, bool).tolist()
        if data.no_tools is not None:
            out["items"]["no_tools"] = np.asarray(data.no_tools, bool).tolist()
        if data.call_correct is not None:  # NaN (no possible answer, no call) as null
            out["items"]["call_correct"] = [
                None if math.isnan(v) else v for v in data.call_correct.tolist()
            ]
    return out
