"""Cross-fitted comparison of decoders, on plain arrays (no model, no files).

Inputs: the raw beliefs ``P`` (n, k) built from the parsed samples, the true label indices
``y`` (n,), the greedy completion's label index (-1 when unparsed or missing), a mask of
items with no usable sample, a mask of the actions each item's samples can carry out, and
the task's cost matrix ``C`` (k, m), row = true label, column = action.

Decoders (one row each):

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

The scores are those of what the runtime (:class:`~taskcal_agents.decision.decider.Decider`)
would do:

- Every MBR decoder takes the cheapest action its item's samples can carry out
  (:func:`calibrators.mbr_actions` with ``allowed=EvalArrays.executable``: a ``tool_call``
  needs a sample that makes a tool call), the rule the runtime applies
  (:func:`~taskcal_agents.decision.decider.executable_mbr`).
- Decoders that read samples take the task's fallback action on items without any usable
  sample, as the runtime does.
- Calibration maps are fitted on the served rows only (items with a usable sample):
  the others never reach the calibrator at run time. Scores are over all items.

Under the task's ``unparsed: other`` policy the arrays also hold the calibrator inputs
``X`` (n, k + 1): each belief's smoothed counts plus its unparsed share. The maps that read
extra input columns (matrix scaling, full Dirichlet calibration) are fitted on ``X`` with
``n_classes=k``, as the runtime feeds them (:class:`~taskcal_agents.decision.decider.Decider`
picks the input by the calibrator's ``n_features_in_``); the others need one input column
per label and are fitted on ``P`` (their rows say so in ``inputs`` and ``description``).
Raw MBR and the majority vote read ``P``.

``greedy``, ``majority`` and ``argmax_<calibrator>`` turn a label into the action of the
same name; they are only defined when every label is also an action.

Columns: mean realised cost and its standard error; the paired saving over the best
constant action and over ``mbr_raw`` (positive = this decoder is cheaper) with paired
standard errors (of the per-item cost differences); accuracy and macro-F1 over the task's
labels (scikit-learn semantics, actions that are no label do not enter the mean); NLL,
Brier, ECE, classwise ECE; and the cross-fitted, signed task calibration error ``tce``
(:func:`calibrators.metrics.tce` with ``method="crossfit"`` and the ODIR map
:data:`TCE_CALIBRATOR`: the cost a recalibration of these beliefs would save on held-out
items; it can be negative).

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

Folds are stratified by label and seeded, so every decoder and calibrator sees the same
splits. The label-shuffle test permutes ``y`` against ``P`` (the masks stay with their
items) and recomputes the whole cross-fitted cost gap (best constant − calibrated MBR)
with the same rules: its p-value says whether the gain of calibrated MBR over the best
constant action is more than chance.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from calibrators import mbr_actions
from taskcal_agents._stats import paired_difference
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.workflow._calibrator_specs import (
    DEFAULT_CALIBRATORS,
    TCE_CALIBRATOR,
    CalibratorFactory,
    default_factory,
)
from taskcal_agents.workflow._selective import action_confidence, selective_summary

PRIOR_PSEUDOCOUNT = 0.5
"""Pseudo-count added per label to the in-fold label prior (Jeffreys), so that its NLL
stays finite when a label is missing from a training fold."""

DECODER_DESCRIPTIONS = {
    "constant": "best constant action (MBR on the in-fold label prior)",
    "greedy": "greedy completion (temperature 0)",
    "majority": "majority vote (MAP of the raw belief)",
    "mbr_raw": "MBR on the raw belief",
    "mbr_raw_any": "MBR on the raw belief, any sampled call sent (execute: any)",
}

TOOL_CALL = "tool_call"
"""The label and action of a tool call (a tool decision has both)."""
CANNOT_ANSWER = "cannot_answer"
"""The label and action of a request no offered tool can serve."""


@dataclass(frozen=True)
class EvalArrays:
    """Everything the evaluation needs, as arrays.

    Attributes:
        P: Raw beliefs, shape (n, k), rows sum to 1.
        y: True label indices, shape (n,).
        cost: Cost matrix, shape (k, m), row = true label, column = action.
        labels: The k label names.
        actions: The m action names.
        greedy: Label index of the greedy completion, -1 when unparsed or missing, (n,).
        no_sample: Items without any usable sample (they get the fallback action), (n,).
        fallback: Index of the fallback action.
        ids: Item ids (for the per-item output).
        executable: Whether each item's samples can carry out each action, (n, m)
            (:func:`~taskcal_agents.decision.decider.carried_actions`); ``None`` means all True.
        X: Calibrator inputs (belief features), (n, d) with d > k: under the ``unparsed:
            other`` policy the smoothed counts and unparsed share (d = k + 1), under
            grounded belief features also the ungrounded calls' share (one more column);
            rows sum to 1. ``None`` when calibrators read ``P``.
        n_clusters: For a task with ``answer_clusters``, the number of meaning clusters
            among each item's answers, (n,) (0: no answer); ``None`` otherwise.
        has_greedy: Whether a ``greedy`` row means anything: a greedy completion was drawn
            (not with ``--no-greedy``, e.g. one-pass beliefs, where it would be the fallback
            action on every item) and the label grades it (not under answer clustering,
            where the label grades the modal answer). ``False`` leaves the row out.
        executable_any: Under a task that sends only grounded calls
            (``grounding.execute: grounded``), what each item's samples could carry out
            if any call could be sent, (n, m); ``None`` otherwise.
        no_tools: For a tool decision, the items offered no tools, (n,); ``None``
            otherwise.
        inputs: For a task that reads the relevance features (``grounding.relevance``),
            each item's :func:`~taskcal_agents.decision.decider.raw_inputs` (p̂, the belief
            features' extra shares, the relevance features), (n, task.n_inputs), read by a
            calibrator of raw input columns (``reads_raw_columns``); ``None`` otherwise.
        counts: Each item's samples counted into the stopping rule's outcomes (per task
            outcome, then unparsed; :func:`~taskcal_agents.decision.adaptive.outcome_counts`),
            (n, len(task.outcomes) + 1); a row of zeros for a one-pass (logprob) belief.
            ``None`` when the counts are not multinomial (answer clusters) or not built.
        call_correct: For a tool decision whose items carry BFCL's possible answers, whether
            the call each item would execute (the runtime's representative call) is an
            accepted answer (1.0 / 0.0), (n,); NaN where the item has no possible answer or
            no call can be carried out; ``None`` when no item has one.
    """

    P: NDArray[np.float64]
    y: NDArray[np.intp]
    cost: NDArray[np.float64]
    labels: tuple[str, ...]
    actions: tuple[str, ...]
    greedy: NDArray[np.intp]
    no_sample: NDArray[np.bool_]
    fallback: int
    ids: tuple[str, ...] = ()
    executable: NDArray[np.bool_] | None = None
    X: NDArray[np.float64] | None = None
    n_clusters: NDArray[np.intp] | None = None
    has_greedy: bool = True
    executable_any: NDArray[np.bool_] | None = None
    no_tools: NDArray[np.bool_] | None = None
    counts: NDArray[np.int64] | None = None
    inputs: NDArray[np.float64] | None = None
    call_correct: NDArray[np.float64] | None = None

    def __post_init__(self) -> None:
        n, k = self.P.shape
        m = len(self.actions)
        problems = []
        if self.executable is None:
            object.__setattr__(self, "executable", np.ones((n, m), dtype=bool))
        elif np.shape(self.executable) != (n, m):
            problems.append(
                f"executable must have shape (n, m) = ({n}, {m}), got {np.shape(self.executable)}"
            )
        if self.cost.shape != (k, m) or len(self.labels) != k:
            problems.append(
                f"cost has shape {self.cost.shape}, expected (k, m) = ({k}, {m}) for "
                f"{len(self.labels)} labels and {m} actions"
            )
        if self.y.shape != (n,) or self.greedy.shape != (n,) or self.no_sample.shape != (n,):
            problems.append(
                f"y, greedy and no_sample must have shape ({n},), got {self.y.shape}, "
                f"{self.greedy.shape} and {self.no_sample.shape}"
            )
        elif n and (self.y.min() < 0 or self.y.max() >= k):
            problems.append(f"y must hold label indices in [0, {k}), got {sorted(set(self.y))}")
        bad_x = self.X is not None and (self.X.ndim != 2 or self.X.shape[0] != n)
        if self.X is not None and (bad_x or self.X.shape[1] <= k):
            problems.append(
                f"X must have shape (n, d) with d > k = {k} (the belief features: counts plus "
                f"the unparsed or ungrounded shares) and n = {n}, got {self.X.shape}"
            )
        if self.inputs is not None and (
            self.inputs.ndim != 2 or self.inputs.shape[0] != n or self.inputs.shape[1] <= k
        ):
            problems.append(
                f"inputs must have shape (n, d) with d > k = {k} and n = {n}, got "
                f"{self.inputs.shape}"
            )
        if self.executable_any is not None and np.shape(self.executable_any) != (n, m):
            problems.append(
                f"executable_any must have shape (n, m) = ({n}, {m}), got "
                f"{np.shape(self.executable_any)}"
            )
        if self.call_correct is not None and np.shape(self.call_correct) != (n,):
            problems.append(
                f"call_correct must have shape ({n},), got {np.shape(self.call_correct)}"
            )
        if self.no_tools is not None and np.shape(self.no_tools) != (n,):
            problems.append(f"no_tools must have shape ({n},), got {np.shape(self.no_tools)}")
        if self.counts is not None and (np.ndim(self.counts) != 2 or np.shape(self.counts)[0] != n):
            problems.append(
                f"counts must have shape (n, outcomes + 1), got {np.shape(self.counts)}"
            )
        if self.n_clusters is not None and np.shape(self.n_clusters) != (n,):
            problems.append(f"n_clusters must have shape ({n},), got {np.shape(self.n_clusters)}")
        if not 0 <= self.fallback < m:
            problems.append(f"fallback must be an action index in [0, {m}), got {self.fallback}")
        if problems:
            msg = "EvalArrays are inconsistent: " + "; ".join(problems) + "."
            raise ConfigurationError(msg)

    @property
    def n(self) -> int:
        """The number of items."""
        return int(self.P.shape[0])

    @property
    def served(self) -> NDArray[np.bool_]:
        """Items with a usable sample: the rows a calibrator sees at run time."""
        return ~self.no_sample

    def label_to_action(self) -> NDArray[np.intp] | None:
        """Action index of each label (same name), or ``None`` when a label has no action."""
        index = {a: j for j, a in enumerate(self.actions)}
        if not all(label in index for label in self.labels):
            return None
        return np.array([index[label] for label in self.labels], dtype=np.intp)


# --------------------------------------------------------------------------------------
# building blocks


def stratified_folds(y: NDArray[np.intp], n_folds: int, seed: int) -> NDArray[np.intp]:
    """Assign each item to one of *n_folds* folds, stratified by label, seeded.

    Within each label the items are shuffled and dealt to the folds in turn, continuing
    where the previous label stopped, so fold sizes differ by at most one and every label
    is spread as evenly as its count allows (no warning for rare labels).

    Args:
        y: Label indices, shape (n,).
        n_folds: The number of folds (2 <= n_folds <= n).
        seed: The shuffling seed.

    Returns:
        The fold index of each item, shape (n,).

    Raises:
        ConfigurationError: *n_folds* is below 2 or above the number of items.
    """
    y = np.asarray(y)
    n = y.shape[0]
    if not 2 <= n_folds <= n:
        msg = f"folds must be between 2 and the number of items ({n}), got {n_folds!r}."
        raise ConfigurationError(msg)
    rng = np.random.default_rng(seed)
    folds = np.empty(n, dtype=np.intp)
    offset = 0
    for label in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == label))
        folds[idx] = (offset + np.arange(idx.size)) % n_folds
        offset += idx.size
    return folds


def runtime_actions(
    Q: NDArray[np.float64], data: EvalArrays, *, executable: NDArray[np.bool_] | None = None
) -> NDArray[np.intp]:
    """The actions the runtime takes on beliefs *Q*.

    MBR among the executable actions (the decision kernel's :func:`calibrators.mbr_actions`
    with ``allowed``, the rule of :func:`~taskcal_agents.decision.decider.executable_mbr`), the
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


def in_fold_prior(y: NDArray[np.intp], folds: NDArray[np.intp], k: int) -> NDArray[np.float64]:
    """Per item, the label prior of the *other* folds (with :data:`PRIOR_PSEUDOCOUNT`)."""
    out = np.empty((y.shape[0], k))
    for f in np.unique(folds):
        train = folds != f
        counts = np.bincount(y[train], minlength=k) + PRIOR_PSEUDOCOUNT
        out[folds == f] = counts / counts.sum()
    return out


def calibrator_inputs(
    data: EvalArrays, make: CalibratorFactory
) -> tuple[NDArray[np.float64], CalibratorFactory, str]:
    """The inputs the calibrators of *make* read, and the factory to fit them on those.

    A map of raw input columns (``reads_raw_columns``: logistic calibration) reads
    ``data.inputs`` when the task reads the relevance features, else ``P``. Under the ``unparsed:
    other`` policy (``data.X`` set), a map that reads extra input columns
    (``reads_extra_columns``: matrix scaling, full Dirichlet calibration) reads ``X``. Both
    are made with ``n_classes=k``; any other map reads ``P``.

    Returns:
        The inputs, (n, k), (n, k + 1) or (n, task.n_inputs); the factory; and
        ``"inputs"``, ``"features"`` or ``"probs"``.
    """
    k = len(data.labels)

    def make_k() -> Any:
        return make().set_params(n_classes=k)

    if data.inputs is not None and getattr(make(), "reads_raw_columns", False):
        return data.inputs, make_k, "inputs"
    if data.X is None:
        return data.P, make, "probs"
    probe = make()
    if getattr(probe, "reads_raw_columns", False):  # its class columns: a probability row
        return data.P, make, "probs"
    if not getattr(probe, "reads_extra_columns", False):
        return data.P, make, "probs"
    return data.X, make_k, "features"


def crossfit_calibrators(
    P: NDArray[np.float64],
    y: NDArray[np.intp],
    folds: NDArray[np.intp],
    make: CalibratorFactory,
    *,
    fit_mask: NDArray[np.bool_] | None = None,
) -> dict[int, Any]:
    """Fit one calibrator per fold on the other folds' rows (those in *fit_mask*).

    Args:
        P: Calibrator inputs: the raw beliefs (n, k), or the belief features (n, k + 1)
            for a map made with ``n_classes=k`` (see :func:`calibrator_inputs`).
        y: True label indices, (n,).
        folds: Fold index per item, (n,).
        make: Returns a fresh, unfitted calibrator (``fit(P, y)``, ``predict_proba(P)``).
        fit_mask: Rows a calibrator may be fitted on (default: all); the workflow passes
            the served rows (:attr:`EvalArrays.served`).

    Returns:
        The fitted calibrator of each fold, by fold index.
    """
    use = np.ones(P.shape[0], dtype=bool) if fit_mask is None else np.asarray(fit_mask, bool)
    fitted = {}
    for f in np.unique(folds):
        train = (folds != f) & use
        if not train.any():
            msg = (
                f"cannot cross-fit: the folds other than fold {int(f)} hold no item with a "
                f"usable sample ({int(use.sum())} of {use.size} items have one); use fewer "
                "folds or more items."
            )
            raise ConfigurationError(msg)
        fitted[int(f)] = make().fit(P[train], y[train])
    return fitted


def crossfit_calibrated(
    P: NDArray[np.float64],
    y: NDArray[np.intp],
    folds: NDArray[np.intp],
    make: CalibratorFactory,
    *,
    fit_mask: NDArray[np.bool_] | None = None,
) -> NDArray[np.float64]:
    """Calibrate each fold with a map fitted on the other folds.

    See :func:`crossfit_calibrators` for the arguments.

    Returns:
        The cross-fitted calibrated beliefs, (n, k), every row (also those outside
        *fit_mask*).
    """
    return _apply_calibrators(P, folds, crossfit_calibrators(P, y, folds, make, fit_mask=fit_mask))


def _apply_calibrators(
    P: NDArray[np.float64], folds: NDArray[np.intp], fitted: dict[int, Any]
) -> NDArray[np.float64]:
    """Each fold's rows of *P* through its calibrator: (n, n_classes_) beliefs."""
    parts = []
    for f, calibrator in fitted.items():
        test = folds == f
        parts.append((test, np.asarray(calibrator.predict_proba(P[test]), dtype=np.float64)))
    Q = np.empty((P.shape[0], parts[0][1].shape[1]))
    for test, rows in parts:
        Q[test] = rows
    return Q


# --------------------------------------------------------------------------------------
# scores


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
        For a tool decision (:data:`TOOL_CALL` among the labels and the actions):
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
    if TOOL_CALL not in data.labels or TOOL_CALL not in data.actions:
        return {}
    calls = np.asarray(actions) == data.actions.index(TOOL_CALL)
    should = data.y == data.labels.index(TOOL_CALL)

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


# --------------------------------------------------------------------------------------
# the evaluation


@dataclass
class PermutationTest:
    """Label-shuffle test of "calibrated MBR beats the best constant action".

    Attributes:
        calibrator: The calibrator of the tested MBR decoder.
        statistic: Observed cross-fitted gap, cost(constant) − cost(MBR + calibrator).
        gap_se: Standard error of the observed gap (paired over items).
        p_value: (1 + #{permuted gap >= observed}) / (1 + n_permutations).
        n_permutations: The number of label shuffles.
        seed: The seed of the shuffles.
        null: The permuted gaps.
    """

    calibrator: str
    statistic: float
    gap_se: float | None
    p_value: float
    n_permutations: int
    seed: int
    null: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (the null distribution summarised by its quantiles)."""
        null = np.asarray(self.null)
        return {
            "calibrator": self.calibrator,
            "statistic": self.statistic,
            "gap_se": self.gap_se,
            "p_value": self.p_value,
            "n_permutations": self.n_permutations,
            "seed": self.seed,
            "null_quantiles": {
                q: float(np.quantile(null, float(q))) for q in ("0.5", "0.9", "0.95", "0.99")
            }
            if null.size
            else {},
        }


@dataclass
class Evaluation:
    """The result of :func:`evaluate_arrays`.

    Attributes:
        rows: One dict per decoder (``decoder``, ``description``, scores, ``error``).
        probs: Cross-fitted beliefs per probabilistic decoder (``raw``, ``constant``,
            calibrator names), each (n, k).
        actions: Action indices per decoder, each (n,).
        permutation: The label-shuffle test, or ``None`` when not run.
        n_folds: The number of folds.
        seed: The fold seed.
        folds: The fold index of each item, (n,).
        calibrators: Per calibrator name, the fitted map of each fold (fold index →
            calibrator, fitted on the served rows of the other folds): what the runtime
            would use on that fold's items (not written to JSON).
        n_excluded_no_sample: Items left out of every calibrator fit because they have
            no usable sample (they get the fallback action).
        permutation_error: Why the label-shuffle test could not run (its calibrator
            could not be cross-fitted), or ``None``.
    """

    rows: list[dict[str, Any]]
    probs: dict[str, NDArray[np.float64]]
    actions: dict[str, NDArray[np.intp]]
    permutation: PermutationTest | None
    n_folds: int
    seed: int
    folds: NDArray[np.intp] = field(default_factory=lambda: np.zeros(0, dtype=np.intp))
    calibrators: dict[str, dict[int, Any]] = field(default_factory=dict)
    n_excluded_no_sample: int = 0
    permutation_error: str | None = None

    def row(self, decoder: str) -> dict[str, Any]:
        """The row of *decoder*."""
        for row in self.rows:
            if row["decoder"] == decoder:
                return row
        msg = f"no decoder {decoder!r}; decoders are {[r['decoder'] for r in self.rows]!r}."
        raise KeyError(msg)


def _with_fallback(actions: NDArray[np.intp], data: EvalArrays) -> NDArray[np.intp]:
    out = actions.copy()
    out[data.no_sample] = data.fallback
    return out


def _gap(
    P: NDArray[np.float64],
    y: NDArray[np.intp],
    data: EvalArrays,
    n_folds: int,
    seed: int,
    make: CalibratorFactory,
) -> tuple[float, NDArray[np.float64]]:
    """Cross-fitted cost(constant) − cost(MBR + calibrator), and the per-item differences.

    The calibrator is fitted on served rows only and its MBR is restricted to executable
    actions (:func:`runtime_actions`), exactly as in :func:`evaluate_arrays`. *P* holds
    the calibrator inputs (see :func:`calibrator_inputs`).
    """
    folds = stratified_folds(y, n_folds, seed)
    k = len(data.labels)
    const = mbr_actions(in_fold_prior(y, folds, k), data.cost)
    Q = crossfit_calibrated(P, y, folds, make, fit_mask=data.served)
    cal = runtime_actions(Q, data)
    diff = data.cost[y, const] - data.cost[y, cal]
    return float(diff.mean()), diff


def permutation_test(
    data: EvalArrays,
    make: CalibratorFactory,
    *,
    calibrator: str,
    n_folds: int = 5,
    fold_seed: int = 0,
    n_permutations: int = 200,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
    n_jobs: int | None = None,
) -> PermutationTest:
    """Label-shuffle test of the cross-fitted gap between best constant and calibrated MBR.

    Under the null hypothesis the beliefs carry no information about the labels, so
    shuffling ``y`` against ``P`` leaves the gap's distribution unchanged. The masks of
    served items and executable actions stay with their items (they describe the
    samples, not the label). Each shuffle refits the whole procedure (folds stratified
    by the shuffled labels, every fold's calibrator with its own inner selection).

    Args:
        data: The evaluation arrays.
        make: Returns a fresh calibrator.
        calibrator: Its name (for the report).
        n_folds: Folds of the cross-fitting.
        fold_seed: Seed of the folds (the same for the observed and permuted labels).
        n_permutations: The number of shuffles.
        seed: Seed of the shuffles.
        progress: Called with 1 after each shuffle.
        n_jobs: Shuffles run in parallel in this many processes (joblib; ``None`` is 1
            unless in a ``joblib.parallel_config`` context, -1 is all cores). The result
            does not depend on it.

    Returns:
        The test result.
    """
    from joblib import Parallel, delayed

    X, make, _ = calibrator_inputs(data, make)
    observed, diff = _gap(X, data.y, data, n_folds, fold_seed, make)
    rng = np.random.default_rng(seed)
    orders = [rng.permutation(data.n) for _ in range(n_permutations)]
    gaps = Parallel(n_jobs=n_jobs, return_as="generator")(
        delayed(_gap)(X, data.y[order], data, n_folds, fold_seed, make) for order in orders
    )
    null = []
    for gap, _ in gaps:
        null.append(gap)
        if progress is not None:
            progress(1)
    exceed = sum(g >= observed - 1e-12 for g in null)
    return PermutationTest(
        calibrator=calibrator,
        statistic=observed,
        gap_se=float(diff.std(ddof=1) / math.sqrt(data.n)) if data.n > 1 else None,
        p_value=(1 + exceed) / (1 + n_permutations),
        n_permutations=n_permutations,
        seed=seed,
        null=null,
    )


def evaluate_arrays(
    data: EvalArrays,
    *,
    calibrators: Sequence[str] = DEFAULT_CALIBRATORS,
    n_folds: int = 5,
    seed: int = 0,
    n_permutations: int = 200,
    test_calibrator: str | None = "dirichlet",
    factory: Callable[[str], CalibratorFactory] = default_factory,
    progress: Callable[[int], None] | None = None,
    target_risk: float | None = None,
    n_jobs: int | None = None,
) -> Evaluation:
    """Evaluate every decoder with cross-fitted calibration.

    Args:
        data: The evaluation arrays.
        calibrators: Calibrator specs to cross-fit (one ``mbr_<spec>`` row each), names of
            :func:`calibrators.make_calibrator` optionally with parameters
            (``"dirichlet:reg_lambda=auto"``, see :func:`parse_calibrator_spec`).
        n_folds: The number of stratified folds.
        seed: Seed of the folds and of the label shuffles.
        n_permutations: Label shuffles of the permutation test (0 skips it).
        test_calibrator: The calibrator whose MBR the test compares with the best constant
            action; ``None`` skips the test. It need not be in *calibrators*; when it is
            (and fits), an ``argmax_<test_calibrator>`` row adds its 0-1-cost decision.
        factory: Maps a calibrator spec to a factory of fresh calibrators.
        progress: Called with a step count as work completes (for a progress bar).
        target_risk: The risk a user accepts on the items a decoder keeps; each row's
            ``selective`` block then gives the coverage reached at it.
        n_jobs: Processes for the label shuffles (see :func:`permutation_test`).

    Returns:
        The rows, the cross-fitted beliefs and actions, the per-fold calibrators and the
        permutation test. Each row holds the scores of :func:`score_actions` plus the
        paired savings ``saving_vs_constant``, ``saving_vs_raw`` (mean per-item cost of
        the baseline minus this decoder's; positive = cheaper) and their paired standard
        errors ``saving_vs_constant_se``, ``saving_vs_raw_se``, and a ``selective`` block
        (:func:`~taskcal_agents.workflow._selective.selective_summary`: risk–coverage
        curve, AURC, coverage at *target_risk*) with items ranked by the decoder's
        expected-cost margin for its own action under the belief it decided on (the raw
        belief for ``greedy``; items without a usable sample come last). A calibrator
        that fails to fit gets a row with ``error`` set and no scores. Each calibrator
        row says in ``inputs`` what the map read: ``"probs"`` (p̂) or, under the
        ``unparsed: other`` policy, ``"features"`` (p̂'s counts plus the unparsed share;
        see :func:`calibrator_inputs`). ``mbr_raw_any`` appears when
        ``data.executable_any`` is set; tool decisions add the rates of
        :func:`tool_scores` to every scored row.

    Raises:
        ConfigurationError: Bad *n_folds* (see :func:`stratified_folds`), a negative
            *n_permutations*, ``n_jobs=0``, or an unknown calibrator name or parameter.
    """
    if n_permutations < 0:
        msg = f"permutations must be >= 0, got {n_permutations!r}."
        raise ConfigurationError(msg)
    if n_jobs == 0:
        msg = "jobs must be a number of processes >= 1, or negative (-1: all cores), got 0."
        raise ConfigurationError(msg)
    folds = stratified_folds(data.y, n_folds, seed)
    k = data.P.shape[1]
    tick = progress or (lambda _: None)
    rows: list[dict[str, Any]] = []
    probs: dict[str, NDArray[np.float64]] = {"raw": data.P}
    actions: dict[str, NDArray[np.intp]] = {}
    fitted: dict[str, dict[int, Any]] = {}
    tce_factory = factory(TCE_CALIBRATOR)

    def tce(Q: NDArray[np.float64]) -> float | None:
        try:
            served = data.served  # the rows a calibrator is fitted on and decides
            return crossfit_tce(
                Q[served], data.y[served], data.cost, n_folds=n_folds, seed=seed, make=tce_factory
            )
        except (ValueError, RuntimeError, np.linalg.LinAlgError):
            return None

    def add(
        name: str,
        acts: NDArray[np.intp],
        Q: NDArray[np.float64] | None,
        executable: NDArray[np.bool_] | None = None,
    ) -> None:
        actions[name] = acts
        description = DECODER_DESCRIPTIONS.get(name) or f"MBR on the {name[4:]}-calibrated belief"
        rows.append({"decoder": name, "description": description, "error": None})
        own_calls = name in ("greedy", "mbr_raw_any")  # not the representative call scored
        rows[-1].update(score_actions(acts, data, Q, tce=tce, representative_calls=not own_calls))
        allowed = data.executable if executable is None else executable
        confidence = action_confidence(data.P if Q is None else Q, data.cost, acts, allowed)
        if name != "constant" and data.no_sample.any():
            # Items without a usable sample are the least informed: deferred first.
            confidence = np.where(data.no_sample, confidence.min() - 1.0, confidence)
        rows[-1]["selective"] = selective_summary(
            data.cost[data.y, acts], confidence, target_risk=target_risk
        )

    prior = in_fold_prior(data.y, folds, k)
    probs["constant"] = prior
    add("constant", mbr_actions(prior, data.cost), prior)
    l2a = data.label_to_action()
    if l2a is not None:
        if data.has_greedy:
            greedy = np.where(data.greedy >= 0, l2a[np.clip(data.greedy, 0, None)], data.fallback)
            add("greedy", greedy.astype(np.intp), None)
        add("majority", _with_fallback(l2a[np.argmax(data.P, axis=1)], data), data.P)
    add("mbr_raw", runtime_actions(data.P, data), data.P)
    if data.executable_any is not None:
        anyway = np.asarray(data.executable_any, dtype=bool)
        add("mbr_raw_any", runtime_actions(data.P, data, executable=anyway), data.P, anyway)
    tick(1)
    factories = {name: factory(name) for name in calibrators}
    test_factory = factory(test_calibrator) if test_calibrator and n_permutations else None
    for name in calibrators:
        decoder = f"mbr_{name}"
        X, make, inputs = calibrator_inputs(data, factories[name])
        description = f"MBR on the {name}-calibrated belief"
        if inputs == "inputs":
            description += " (reads p̂, its shares and the relevance features)"
        elif data.X is not None:
            description += (
                " (reads the unparsed share)"
                if inputs == "features"
                else " (reads p̂ only: this map needs one input column per label)"
            )
        try:
            fitted[name] = crossfit_calibrators(X, data.y, folds, make, fit_mask=data.served)
            Q = _apply_calibrators(X, folds, fitted[name])
        except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
            fitted.pop(name, None)
            rows.append(
                {
                    "decoder": decoder,
                    "description": description,
                    "inputs": inputs,
                    "error": f"{type(exc).__name__}: {exc}",
                }
            )
        else:
            probs[name] = Q
            add(decoder, runtime_actions(Q, data), Q)
            rows[-1]["description"] = description
            rows[-1]["inputs"] = inputs
        tick(1)
    if l2a is not None and test_calibrator in calibrators and test_calibrator in fitted:
        Q = probs[test_calibrator]
        argmax = f"argmax_{test_calibrator}"
        add(argmax, _with_fallback(l2a[np.argmax(Q, axis=1)], data), Q)
        rows[-1]["description"] = f"most probable {test_calibrator}-calibrated label (0-1 cost)"
    _add_paired_savings(rows, actions, data)
    test = None
    test_error = None
    if test_factory is not None and test_calibrator is not None:
        try:
            test = permutation_test(
                data,
                test_factory,
                calibrator=test_calibrator,
                n_folds=n_folds,
                fold_seed=seed,
                n_permutations=n_permutations,
                seed=seed,
                progress=progress,
                n_jobs=n_jobs,
            )
        except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
            test_error = f"{type(exc).__name__}: {exc}"
    return Evaluation(
        rows=rows,
        probs=probs,
        actions=actions,
        permutation=test,
        n_folds=n_folds,
        seed=seed,
        folds=folds,
        calibrators=fitted,
        n_excluded_no_sample=int(data.no_sample.sum()),
        permutation_error=test_error,
    )


def _add_paired_savings(
    rows: list[dict[str, Any]], actions: dict[str, NDArray[np.intp]], data: EvalArrays
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
