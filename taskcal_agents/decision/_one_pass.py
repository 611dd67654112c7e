"""The one-pass tool decision's belief: a distribution over the labels, and one greedy call.

A one-pass decision reads the labels' probabilities from one forward pass (the model's
top log-probabilities under a choice among "call TOOL", "ask" and "refuse", see
:mod:`taskcal_agents.sampling._one_pass`) and takes the call to ground and send from one
greedy completion. :func:`one_pass_belief` turns the two into the
:class:`~taskcal_agents.decision.Belief` a calibrator reads, the same way at run time
(:meth:`Decider.decide_one_pass <taskcal_agents.decision.Decider.decide_one_pass>`) and
when fitting and evaluating (``taskcal calibrate --belief one_pass``,
``taskcal evaluate``):

- the probabilities count as :data:`ONE_PASS_PSEUDO_SAMPLES` pseudo-samples, smoothed by
  the Dirichlet prior α like a sampled belief;
- when the greedy completion's call is ungrounded, the call mass is read as the task's
  ``grounding.belief`` reads an ungrounded sample (:meth:`Task.sample_outcomes
  <taskcal_agents.decision.Task.sample_outcomes>`): as the ask label's under ``relabel``
  (the default of :func:`~taskcal_agents.decision.tool_decision`), in the ungrounded
  column of its own under ``features`` (the pseudo-count rounded down to a whole
  sample), as a call under ``off``;
- an unparsed share, under the ``"other"`` policy, is 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from langchain_core.messages import AIMessage
from numpy.typing import NDArray

from taskcal_agents.decision._belief import Belief
from taskcal_agents.decision._calibration import item_relevance
from taskcal_agents.decision._executability import ungrounded_flags
from taskcal_agents.decision._task import Task
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.parsing import GroundingContext, SampleGrounding

__all__ = ["ONE_PASS_PSEUDO_SAMPLES", "one_pass_belief", "read_one_pass"]

ONE_PASS_PSEUDO_SAMPLES = 16
"""The pseudo-samples a one-pass belief counts as (the default N, so α smooths it alike)."""


def one_pass_belief(
    task: Task,
    probs: Sequence[float] | NDArray[np.float64],
    *,
    ungrounded: bool,
    alpha: float,
) -> Belief:
    """The belief of a one-pass decision (see the module docstring).

    Args:
        task: The task the probabilities are over (one per label, in its order).
        probs: The one pass's probability per task label.
        ungrounded: Whether the greedy completion's call (labelled a call) is not grounded.
        alpha: The Dirichlet prior.

    Raises:
        ConfigurationError: ``probs`` does not give one non-negative number per label with a
            positive sum.
    """
    p = np.asarray(probs, dtype=np.float64)
    if p.shape != (len(task.labels),) or not np.all(np.isfinite(p)) or np.any(p < 0):
        msg = (
            f"one_pass_belief: probs must give one finite probability >= 0 per label of task "
            f"{task.name!r} {list(task.labels)!r}, got {p.tolist()!r}."
        )
        raise ConfigurationError(msg)
    if not p.sum() > 0:
        msg = f"one_pass_belief: probs {p.tolist()!r} have no mass."
        raise ConfigurationError(msg)
    counts = p / p.sum() * ONE_PASS_PSEUDO_SAMPLES
    split = task.call_action if task.splits_ungrounded else None
    n_ungrounded = 0
    spec = task.grounding
    if ungrounded and spec is not None and task.call_action is not None:
        call = task.label_index(task.call_action)
        if spec.belief == "features":
            n_ungrounded = math.floor(counts[call])
        elif spec.belief == "relabel" and task.ask_action in task.labels:
            counts[task.label_index(str(task.ask_action))] += counts[call]
            counts[call] = 0.0
    return Belief(
        counts,
        task.labels,
        n=ONE_PASS_PSEUDO_SAMPLES,
        alpha=alpha,
        unparsed_evidence=task.unparsed_evidence,
        split_label=split,
        n_ungrounded=n_ungrounded,
    )


def read_one_pass(
    task: Task,
    probs: Sequence[float] | NDArray[np.float64],
    messages: Sequence[AIMessage],
    labels: Sequence[str | None],
    groundings: Sequence[SampleGrounding] | None,
    context: GroundingContext | None,
    *,
    alpha: float,
) -> tuple[Belief, tuple[float, ...] | None]:
    """The belief and relevance features of a one-pass decision.

    The one reading of a one-pass decision's evidence, at run time
    (:meth:`Decider.decide_one_pass <taskcal_agents.decision.Decider.decide_one_pass>`)
    and when fitting and evaluating (``taskcal evaluate`` on ``belief: one_pass`` records).

    Args:
        task: The task.
        probs: The one pass's probability per task label.
        messages: The greedy completion (or none).
        labels: Its label as the task's parser reads it (``None``: unparsed or a repeat).
        groundings: Its grounding under the task's ``grounding`` (``None`` without it).
        context: The request's tools and conversation.
        alpha: The Dirichlet prior.
    """
    flags = ungrounded_flags(groundings) or [False] * len(messages)
    ungrounded = any(
        bad and label == task.call_action for bad, label in zip(flags, labels, strict=True)
    )
    belief = one_pass_belief(task, probs, ungrounded=ungrounded, alpha=alpha)
    return belief, item_relevance(task, messages, labels, context, groundings)
