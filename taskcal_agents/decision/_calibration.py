"""The calibrator's side of a decision: what it reads and the q it returns.

A calibrator reads p̂ (k columns), the k + 1 belief features under the task's ``unparsed:
other`` policy, or the raw inputs with the relevance features (:func:`raw_inputs`); which one
follows from its ``n_features_in_`` (:func:`reads_features`, :func:`reads_inputs`).
:func:`calibrate` checks and renormalises what its ``predict_proba`` returns. The
:class:`~taskcal_agents.decision.Decider` and the evaluation read calibrators
through here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from langchain_core.messages import AIMessage
from numpy.typing import NDArray

from taskcal_agents.decision._belief import Belief
from taskcal_agents.decision._task import Task
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.parsing import (
    RELEVANCE_FEATURES,
    GroundingContext,
    SampleGrounding,
    call_agreement,
    relevance_features,
)

__all__ = [
    "calibrate",
    "calibrator_input",
    "item_relevance",
    "raw_inputs",
    "reads_features",
    "reads_inputs",
]


def item_relevance(
    task: Task,
    messages: Sequence[AIMessage],
    labels: Sequence[str | None],
    context: GroundingContext | None,
    groundings: Sequence[SampleGrounding] | None = None,
) -> tuple[float, ...] | None:
    """The relevance features of one decision, or ``None`` when the task reads none.

    The one function that computes them, at run time (:meth:`Decider.decide
    <taskcal_agents.decision.Decider.decide>`), in evaluation (``taskcal
    evaluate``) and for the decision log (``Decision.relevance``, which ``refit`` reads
    back).

    Args:
        task: The task (:attr:`Task.reads_relevance
            <taskcal_agents.decision.Task.reads_relevance>`).
        messages: The samples.
        labels: Their labels as the task's parser read them with the offered tools.
        context: The request's tools and conversation.
        groundings: The samples' groundings (for ``call_agreement``; ``None``: grounded
            here from ``context``).

    Raises:
        ConfigurationError: The task reads relevance features and ``context`` is missing.
    """
    if not task.reads_relevance:
        return None
    if context is None:
        msg = (
            f"task {task.name!r} reads the relevance features, which need the request's "
            "tools and conversation; pass decide(..., context=GroundingContext(tools, messages))."
        )
        raise ConfigurationError(msg)
    refusal = task.abstain_action if task.abstain_action in task.labels else "cannot_answer"
    tools = [
        {"name": name, "description": schema.get("x-tool-description", ""), "parameters": schema}
        for name, schema in context.schemas.items()
    ]
    if groundings is None:
        groundings = context.ground_samples(messages)
    return relevance_features(
        context.request, tools, messages, labels, refusal_label=refusal,
        modal_calls=call_agreement(groundings),
    )  # fmt: skip


def raw_inputs(task: Task, belief: Belief, relevance: Sequence[float]) -> NDArray[np.float64]:
    """The input of a calibrator that reads raw columns.

    Its width is :attr:`Task.n_inputs <taskcal_agents.decision.Task.n_inputs>`: p̂
    (k columns, a probability row), then the shares the belief features add, as raw
    numbers (ungrounded calls under grounded features, unparsed samples under
    ``"other"``), then the relevance features.
    """
    n = max(belief.n, 1)
    shares = []
    if task.splits_ungrounded:
        shares.append(belief.n_ungrounded / n)
    if task.unparsed_evidence:
        shares.append(belief.n_unparsed / n)
    return np.concatenate([belief.probs, np.asarray(shares, dtype=np.float64), relevance])


def reads_features(task: Task, calibrator: Any) -> bool:
    """Whether ``calibrator`` reads the k + 1 belief features rather than p̂.

    That is when its ``n_features_in_`` is ``task.n_features`` = k + 1 (the ``"other"``
    unparsed policy); a calibrator without ``n_features_in_`` reads p̂.
    """
    n = getattr(calibrator, "n_features_in_", None)
    return n is not None and int(n) == task.n_features != len(task.labels)


def reads_inputs(task: Task, calibrator: Any) -> bool:
    """Whether ``calibrator`` reads :func:`raw_inputs` (its width is ``task.n_inputs``)."""
    n = getattr(calibrator, "n_features_in_", None)
    return task.reads_relevance and n is not None and int(n) == task.n_inputs


def calibrator_input(
    task: Task,
    calibrator: Any,
    belief: Belief,
    relevance: Sequence[float] | None,
    *,
    on_features: bool,
    on_inputs: bool,
) -> NDArray[np.float64]:
    """What ``calibrator`` reads of ``belief``: p̂, the belief features or :func:`raw_inputs`.

    ``on_features`` and ``on_inputs`` are :func:`reads_features` and :func:`reads_inputs`
    of the pair (see :meth:`Decider.calibrator_input
    <taskcal_agents.decision.Decider.calibrator_input>`).
    """
    if on_inputs:
        if relevance is None or len(relevance) != len(RELEVANCE_FEATURES):
            msg = (
                f"calibrator {type(calibrator).__name__} for task {task.name!r} "
                f"reads the {len(RELEVANCE_FEATURES)} relevance features, got "
                f"{relevance!r}; Decider.decide computes them from the context."
            )
            raise ConfigurationError(msg)
        return raw_inputs(task, belief, relevance)
    if not on_features:
        return belief.probs
    features = belief.features
    if belief.unparsed_evidence != task.unparsed_evidence or (features.shape != (task.n_features,)):
        msg = (
            f"calibrator {type(calibrator).__name__} for task {task.name!r} "
            f"reads {task.n_features} belief features, but the belief {belief!r} has "
            f"{features.shape[0]}; build it with the task's rule "
            "(task.belief_from_outcomes(task.sample_outcomes(labels, ungrounded)))."
        )
        raise ConfigurationError(msg)
    return features


def calibrate(task: Task, calibrator: Any, x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Return q = f(x) (x itself without calibrator), checked and renormalised to sum to 1.

    See :meth:`Decider.calibrate <taskcal_agents.decision.Decider.calibrate>`.
    """
    if calibrator is None:
        return x
    X = np.atleast_2d(x)
    q = np.asarray(calibrator.predict_proba(X), dtype=np.float64)
    k = len(task.labels)
    if (
        q.shape != (X.shape[0], k)
        or not np.all(np.isfinite(q))
        or np.any(q < 0)
        or np.any(q.sum(axis=1) <= 0)
    ):
        msg = (
            f"calibrator {type(calibrator).__name__}.predict_proba must return one "
            f"row of {k} finite probabilities >= 0 for task {task.name!r}, got "
            f"{q.tolist()!r}."
        )
        raise ConfigurationError(msg)
    rows: NDArray[np.float64] = q / q.sum(axis=1, keepdims=True)
    return rows[0] if np.ndim(x) == 1 else rows
