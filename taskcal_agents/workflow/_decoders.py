"""The decoders the evaluation compares: a registry of decision rules on cross-fitted beliefs.

Each decoder turns the evaluation's beliefs (``raw``: ``P``; ``constant``: the in-fold label
prior; one per fitted calibrator, by its spec) into one action per item (:class:`Decided`).
:data:`DECODERS` holds those every evaluation runs, in row order; :func:`calibrated_mbr` and
:func:`calibrated_argmax` make the decoders of a calibrator.

``constant``
    The best constant action: MBR on the label prior estimated in the training folds,
    argmin_a Σ_ℓ π(ℓ) C[ℓ, a] — what a model with no signal should do.
``greedy``
    The action named by the greedy (temperature 0) completion's label.
``majority``
    Majority vote over the samples: the action named by the MAP label of the raw belief.
``mbr_raw``
    MBR on the raw belief.
``mbr_raw_any``
    Only under a task that sends grounded calls only (``EvalArrays.executable_any`` set):
    MBR on the same raw belief where any sampled call may be sent (``execute: any``): the
    execution rule's effect is ``mbr_raw`` minus this row. Under ``belief: relabel`` that
    belief already reads ungrounded calls as asks; a task without grounding gives raw MBR
    with neither.
``mbr_<calibrator>``
    MBR on the belief calibrated by a map fitted on the other folds (cross-fitting).
    ``dirichlet`` is the regularised default (ODIR, ``reg_lambda`` and ``reg_mu`` chosen
    by inner cross-validation, see :data:`WORKFLOW_CALIBRATOR_PARAMS`); ``matrix`` is the
    same map without regularisation (matrix scaling).
``argmax_<test calibrator>``
    The action named by the most probable label of the test calibrator's cross-fitted
    belief (the 0-1-cost decision, blind to the cost matrix and to what the samples can
    carry out): only when that calibrator is among those evaluated and fitted.

The decisions are those the runtime (:class:`~taskcal_agents.decision.Decider`)
would take:

- Every MBR decoder takes the cheapest action its item's samples can carry out
  (:func:`calibrators.mbr_actions` with ``allowed=EvalArrays.executable``: a ``tool_call``
  needs a sample that makes a tool call), the rule the runtime applies
  (:func:`~taskcal_agents.decision._decider.executable_mbr`; :func:`runtime_actions`).
- Decoders that read samples take the task's fallback action on items without any usable
  sample, as the runtime does.

``greedy``, ``majority`` and ``argmax_<calibrator>`` turn a label into the action of the
same name; they are only defined when every label is also an action (else they decide
``None``: no row).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

import numpy as np
from numpy.typing import NDArray

from calibrators import mbr_actions
from taskcal_agents.workflow._eval_arrays import EvalArrays

__all__ = [
    "DECODERS",
    "Decided",
    "Decoder",
    "calibrated_argmax",
    "calibrated_mbr",
    "runtime_actions",
    "with_fallback",
]

Beliefs = Mapping[str, NDArray[np.float64]]
"""The evaluation's cross-fitted beliefs by name (``raw``, ``constant``, calibrator specs),
each (n, k)."""


@dataclass(frozen=True)
class Decided:
    """What one decoder did on every item.

    Attributes:
        actions: The action index of each item, (n,).
        belief: The belief it decided on, (n, k), scored for calibration and ranking its
            items by confidence; ``None`` when it read none (``greedy``: ranked by ``P``).
        allowed: The actions it could take, (n, m); ``None``: ``EvalArrays.executable``.
    """

    actions: NDArray[np.intp]
    belief: NDArray[np.float64] | None
    allowed: NDArray[np.bool_] | None = None


@dataclass(frozen=True)
class Decoder:
    """A decision rule of the evaluation: one row of its table.

    Attributes:
        description: The row's ``description``.
        decide: Maps the evaluation arrays and beliefs to the decisions, or to ``None``
            when the rule is not defined on them (no row).
        reads_samples: Whether it decides on the samples (``False``: the best constant
            action); items without a usable sample then rank first to defer.
        representative_calls: Whether its calls are the runtime's representative calls
            that ``EvalArrays.call_correct`` scored (see
            :func:`~taskcal_agents.workflow._scores.tool_scores`).
        inputs: What a calibrated decoder's map read (its row's ``inputs``), else ``None``.
    """

    description: str
    decide: Callable[[EvalArrays, Beliefs], Decided | None]
    reads_samples: bool = True
    representative_calls: bool = True
    inputs: str | None = None


def runtime_actions(
    Q: NDArray[np.float64], data: EvalArrays, *, executable: NDArray[np.bool_] | None = None
) -> NDArray[np.intp]:
    """The actions the runtime takes on beliefs *Q*.

    MBR among the executable actions (the decision kernel's :func:`calibrators.mbr_actions`
    with ``allowed``, the rule of :func:`~taskcal_agents.decision._decider.executable_mbr`), the
    fallback action on items without a usable sample.

    Args:
        Q: Beliefs, (n, k).
        data: The evaluation arrays.
        executable: The actions each item may take, (n, m) (default:
            ``data.executable``; ``data.executable_any`` for ``mbr_raw_any``).

    Returns:
        The action index of each item, (n,).
    """
    if executable is None:
        executable = data.executable
    assert executable is not None  # filled in by EvalArrays.__post_init__
    allowed = np.asarray(executable, dtype=bool)
    actions = mbr_actions(Q, data.cost, allowed=allowed)
    actions[data.no_sample] = data.fallback
    return actions


def with_fallback(actions: NDArray[np.intp], data: EvalArrays) -> NDArray[np.intp]:
    """*actions* with the fallback action on items without a usable sample."""
    out = actions.copy()
    out[data.no_sample] = data.fallback
    return out


def _mbr(data: EvalArrays, Q: NDArray[np.float64]) -> Decided:
    return Decided(runtime_actions(Q, data), Q)


def _argmax(data: EvalArrays, Q: NDArray[np.float64]) -> Decided | None:
    l2a = data.label_to_action()
    if l2a is None:
        return None
    return Decided(with_fallback(l2a[np.argmax(Q, axis=1)], data), Q)


def _on(
    belief: str,
    rule: Callable[[EvalArrays, NDArray[np.float64]], Decided | None],
    data: EvalArrays,
    beliefs: Beliefs,
) -> Decided | None:
    """*rule* on the belief named *belief*."""
    return rule(data, beliefs[belief])


def _constant(data: EvalArrays, beliefs: Beliefs) -> Decided:
    prior = beliefs["constant"]
    return Decided(mbr_actions(prior, data.cost), prior)


def _greedy(data: EvalArrays, beliefs: Beliefs) -> Decided | None:
    l2a = data.label_to_action()
    if l2a is None or not data.has_greedy:
        return None
    greedy = np.where(data.greedy >= 0, l2a[np.clip(data.greedy, 0, None)], data.fallback)
    return Decided(greedy.astype(np.intp), None)


def _mbr_raw_any(data: EvalArrays, beliefs: Beliefs) -> Decided | None:
    if data.executable_any is None:
        return None
    anyway = np.asarray(data.executable_any, dtype=bool)
    return Decided(runtime_actions(beliefs["raw"], data, executable=anyway), beliefs["raw"], anyway)


DECODERS: dict[str, Decoder] = {
    "constant": Decoder(
        "best constant action (MBR on the in-fold label prior)", _constant, reads_samples=False
    ),
    "greedy": Decoder("greedy completion (temperature 0)", _greedy, representative_calls=False),
    "majority": Decoder("majority vote (MAP of the raw belief)", partial(_on, "raw", _argmax)),
    "mbr_raw": Decoder("MBR on the raw belief", partial(_on, "raw", _mbr)),
    "mbr_raw_any": Decoder(
        "MBR on the raw belief, any sampled call sent (execute: any)",
        _mbr_raw_any,
        representative_calls=False,  # it may send calls the task would not
    ),
}
"""The decoders every evaluation runs, by row name, in row order (before the calibrated
ones); one that decides ``None`` on the arrays has no row."""


def calibrated_mbr(calibrator: str, inputs: str, *, features: bool = False) -> Decoder:
    """The ``mbr_<calibrator>`` decoder: MBR on the belief of its cross-fitted map.

    Args:
        calibrator: The calibrator spec (the name of its belief).
        inputs: What the map reads (:func:`~taskcal_agents.workflow._crossfit.
            calibrator_inputs`): ``"probs"``, ``"features"`` or ``"inputs"``.
        features: Whether the arrays hold belief features (``EvalArrays.X``): the
            description then says whether the map read them.
    """
    description = f"MBR on the {calibrator}-calibrated belief"
    if inputs == "inputs":
        description += " (reads p̂, its shares and the relevance features)"
    elif features:
        description += (
            " (reads the unparsed share)"
            if inputs == "features"
            else " (reads p̂ only: this map needs one input column per label)"
        )
    return Decoder(description, partial(_on, calibrator, _mbr), inputs=inputs)


def calibrated_argmax(calibrator: str) -> Decoder:
    """The ``argmax_<calibrator>`` decoder: the most probable label of its calibrated belief."""
    return Decoder(
        f"most probable {calibrator}-calibrated label (0-1 cost)",
        partial(_on, calibrator, _argmax),
    )
