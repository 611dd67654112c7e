"""Metrics for probabilistic predictions and for the decisions taken from them.

Scoring rules follow scikit-learn's argument order ``(y_true, y_prob, ...)``:
:func:`nll`, :func:`brier`, :func:`ece`, :func:`classwise_ece`. Decision metrics take
the probabilities first, then the labels and the cost matrix: :func:`mbr_actions`,
:func:`expected_cost`, :func:`tce`, :func:`reliability_diagram`. Swapped arguments
raise a ``ValueError`` that says so.

Cost matrices have shape (n_labels, n_actions): ``cost[l, a]`` is the cost of action
``a`` when the true label is ``l`` (row = true label, column = action).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import KFold

from calibrators._loss import _check_order, _prob_inputs, nll
from calibrators._validation import check_consistent_length as _check_consistent_length
from calibrators._validation import check_cost_matrix, check_probabilities
from calibrators._validation import check_is_fitted as _check_is_fitted
from calibrators._validation import check_labels as _check_labels
from calibrators._validation import check_sample_weight as _check_sample_weight

__all__ = [
    "ReliabilityDiagram",
    "brier",
    "check_cost_matrix",
    "check_probabilities",
    "classwise_ece",
    "ece",
    "expected_cost",
    "mbr_actions",
    "nll",
    "reliability_diagram",
    "tce",
]


def brier(y_true: ArrayLike, y_prob: ArrayLike, *, sample_weight: ArrayLike | None = None) -> float:
    """Weighted mean multi-class Brier score ``sum_j (q_j - [y == j])**2``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class indices in ``[0, n_classes)``.
    y_prob : array-like of shape (n_samples, n_classes)
        Predicted probabilities; each row sums to 1.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.

    Returns
    -------
    brier : float
        Between 0 (perfect) and 2; summed over classes, not divided by ``n_classes``.

    Examples
    --------
    >>> from calibrators.metrics import brier
    >>> round(brier([0, 1], [[0.5, 0.5], [0.2, 0.8]]), 4)
    0.29
    """
    y, Q, w = _prob_inputs(y_true, y_prob, sample_weight, "brier")
    diff = Q.copy()
    diff[np.arange(y.size), y] -= 1.0
    return float(w @ np.sum(diff * diff, axis=1) / w.sum())


def _binned_gap(
    conf: NDArray[np.float64],
    hit: NDArray[np.float64],
    w: NDArray[np.float64],
    n_bins: int,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], float]:
    """Per-bin mean confidence, frequency, weight on equal-width bins, and the ECE."""
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    bins = np.searchsorted(edges[1:-1], conf)
    weight = np.bincount(bins, weights=w, minlength=n_bins)
    sum_conf = np.bincount(bins, weights=w * conf, minlength=n_bins)
    sum_hit = np.bincount(bins, weights=w * hit, minlength=n_bins)
    nonempty = weight > 0
    mean_conf = np.full(n_bins, np.nan)
    freq = np.full(n_bins, np.nan)
    mean_conf[nonempty] = sum_conf[nonempty] / weight[nonempty]
    freq[nonempty] = sum_hit[nonempty] / weight[nonempty]
    gap = float(np.sum(np.abs(sum_hit - sum_conf)) / w.sum())
    return mean_conf, freq, weight, gap


def _check_n_bins(n_bins: int) -> None:
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        msg = f"n_bins must be a positive integer; got {n_bins!r}."
        raise ValueError(msg)


def ece(
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    n_bins: int = 15,
    sample_weight: ArrayLike | None = None,
) -> float:
    """Top-label expected calibration error with equal-width bins.

    The confidence of a row is its largest probability and it is correct when that
    class (lowest index on ties) is the true one. Rows are binned by confidence into
    ``n_bins`` equal-width bins of ``[0, 1]``; the ECE is the weighted mean over bins
    of ``|accuracy - mean confidence|``, each bin weighted by its share of the
    sample weight.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class indices in ``[0, n_classes)``.
    y_prob : array-like of shape (n_samples, n_classes)
        Predicted probabilities; each row sums to 1.
    n_bins : int, default=15
        Number of equal-width bins.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.

    Returns
    -------
    ece : float
        In ``[0, 1]``.

    Examples
    --------
    >>> from calibrators.metrics import ece
    >>> round(ece([0, 1], [[0.9, 0.1], [0.6, 0.4]], n_bins=10), 4)
    0.35
    """
    _check_n_bins(n_bins)
    y, Q, w = _prob_inputs(y_true, y_prob, sample_weight, "ece")
    pred = np.argmax(Q, axis=1)
    conf = Q[np.arange(y.size), pred]
    return _binned_gap(conf, (pred == y).astype(np.float64), w, n_bins)[3]


def classwise_ece(
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    n_bins: int = 15,
    sample_weight: ArrayLike | None = None,
) -> float:
    """Class-wise expected calibration error: the mean over classes of one-vs-rest ECE.

    For each class ``j``, rows are binned by ``q_j`` into ``n_bins`` equal-width bins
    and the weighted mean of ``|freq(y == j) - mean q_j|`` over bins is taken; the
    result is the average over the ``n_classes`` classes (Kull et al., 2019).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class indices in ``[0, n_classes)``.
    y_prob : array-like of shape (n_samples, n_classes)
        Predicted probabilities; each row sums to 1.
    n_bins : int, default=15
        Number of equal-width bins.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.

    Returns
    -------
    classwise_ece : float
        In ``[0, 1]``.

    Examples
    --------
    >>> from calibrators.metrics import classwise_ece
    >>> round(classwise_ece([0, 1], [[0.9, 0.1], [0.6, 0.4]], n_bins=10), 4)
    0.35
    """
    _check_n_bins(n_bins)
    y, Q, w = _prob_inputs(y_true, y_prob, sample_weight, "classwise_ece")
    gaps = [
        _binned_gap(Q[:, j], (y == j).astype(np.float64), w, n_bins)[3] for j in range(Q.shape[1])
    ]
    return float(np.mean(gaps))


def mbr_actions(P: ArrayLike, cost: ArrayLike) -> NDArray[np.intp]:
    """Minimum-Bayes-risk actions: ``argmin_a sum_l P[i, l] * cost[l, a]`` per row.

    Parameters
    ----------
    P : array-like of shape (n_samples, n_labels)
        Probabilities over the labels; each row sums to 1.
    cost : array-like of shape (n_labels, n_actions)
        Row = true label, column = action.

    Returns
    -------
    actions : ndarray of shape (n_samples,)
        Index of the action with the lowest expected cost; on exact ties the lowest
        index.

    Examples
    --------
    >>> from calibrators.metrics import mbr_actions
    >>> cost = [[0, 1, 2], [4, 0, 2], [4, 1, 0]]
    >>> mbr_actions([[0.9, 0.05, 0.05], [0.5, 0.3, 0.2]], cost)
    array([0, 1])
    """
    Q = check_probabilities(P, name="P")
    C = check_cost_matrix(cost, n_labels=Q.shape[1])
    return np.argmin(Q @ C, axis=1)


def expected_cost(
    P_or_actions: ArrayLike,
    y: ArrayLike,
    cost: ArrayLike,
    *,
    sample_weight: ArrayLike | None = None,
) -> float:
    """Weighted mean realised cost ``cost[y_i, a_i]`` of a set of decisions.

    Parameters
    ----------
    P_or_actions : array-like of shape (n_samples, n_labels) or (n_samples,)
        Either probabilities, in which case the actions are their MBR actions
        (:func:`mbr_actions`), or action indices in ``[0, n_actions)``.
    y : array-like of shape (n_samples,)
        True label indices in ``[0, n_labels)``.
    cost : array-like of shape (n_labels, n_actions)
        Row = true label, column = action.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.

    Returns
    -------
    cost : float
        ``sum_i w_i * cost[y_i, a_i] / sum_i w_i``.

    Examples
    --------
    >>> from calibrators.metrics import expected_cost
    >>> cost = [[0, 1, 2], [4, 0, 2], [4, 1, 0]]
    >>> expected_cost([0, 1, 2], [0, 0, 2], cost)
    0.3333333333333333
    """
    _check_order(P_or_actions, y, "expected_cost", "P_or_actions, y, cost")
    C = check_cost_matrix(cost)
    n_labels, n_actions = C.shape
    if np.ndim(P_or_actions) == 2:
        actions = mbr_actions(P_or_actions, C)
    else:
        actions = _check_labels(P_or_actions, n_actions, name="actions")
    _check_consistent_length(actions, y, sample_weight)
    labels = _check_labels(y, n_labels, name="y")
    w = _check_sample_weight(sample_weight, labels.size)
    return float(w @ C[labels, actions] / w.sum())


def tce(
    P: ArrayLike,
    y: ArrayLike,
    cost: ArrayLike,
    *,
    calibrator: Any = None,
    method: str = "plugin",
    n_splits: int = 5,
    sample_weight: ArrayLike | None = None,
    random_state: int | None = 0,
) -> float:
    r"""Task calibration error: the excess cost of acting by MBR on ``P`` instead of ``q``.

    Let ``q = f(P)`` be the output of a calibration map ``f`` and ``delta(p)`` the MBR
    action of ``p`` (:func:`mbr_actions`). Two forms are available.

    Plug-in (``method="plugin"``), with ``f`` fitted on ``(P, y)`` (or used as given
    when ``calibrator`` is already fitted) and the expectation taken under ``q``:

    .. math::

        \mathrm{TCE} = \frac{1}{\sum_i w_i} \sum_i w_i \sum_\ell q_{i\ell}
            \left(C[\ell, \delta(P_i)] - C[\ell, \delta(q_i)]\right).

    It is ``>= 0`` by construction, since ``delta(q_i)`` minimises the inner sum, and
    0 when the calibrated and the raw probabilities lead to the same actions. It
    measures how much cost ``q`` believes is lost by trusting ``P``, so it is only
    as good as ``f``.

    Cross-fitted (``method="crossfit"``): the rows are split into ``n_splits``
    shuffled folds; for each fold a fresh clone of ``calibrator`` is fitted on the
    other folds and both actions are scored on the held-out labels:

    .. math::

        \mathrm{TCE}_\mathrm{cf} = \frac{1}{\sum_i w_i} \sum_i w_i
            \left(C[y_i, \delta(P_i)] - C[y_i, \delta(f_{-k(i)}(P_i))]\right).

    It is an unbiased estimate of the cost saved by calibrating (an honest,
    possibly negative, number when the calibrator overfits).

    Parameters
    ----------
    P : array-like of shape (n_samples, n_labels)
        Uncalibrated probabilities; each row sums to 1.
    y : array-like of shape (n_samples,)
        True label indices in ``[0, n_labels)``.
    cost : array-like of shape (n_labels, n_actions)
        Row = true label, column = action.
    calibrator : estimator, default=None
        A calibrator from this package (or any estimator with ``fit(P, y,
        sample_weight)`` and ``predict_proba(P)``); ``None`` means
        ``DirichletCalibrator()``. With ``method="plugin"`` a fitted calibrator is
        used as is and an unfitted one is cloned and fitted on ``(P, y)``.
    method : {"plugin", "crossfit"}, default="plugin"
        Which estimate to return (see above).
    n_splits : int, default=5
        Number of folds for ``method="crossfit"``.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights, used both to fit and to average.
    random_state : int or None, default=0
        Seed of the fold shuffling for ``method="crossfit"``.

    Returns
    -------
    tce : float
        The weighted mean excess cost per decision.

    Examples
    --------
    >>> import numpy as np
    >>> from calibrators import TemperatureScaling
    >>> from calibrators.metrics import tce
    >>> rng = np.random.default_rng(0)
    >>> P = rng.dirichlet(np.ones(3), size=300)
    >>> y = np.array([rng.choice(3, p=p) for p in P])
    >>> cost = [[0, 1, 2], [4, 0, 2], [4, 1, 0]]
    >>> tce(P, y, cost, calibrator=TemperatureScaling()) >= 0
    True
    """
    _check_order(P, y, "tce", "P, y, cost")
    Q0 = check_probabilities(P, name="P")
    C = check_cost_matrix(cost, n_labels=Q0.shape[1])
    _check_consistent_length(Q0, y, sample_weight)
    labels = _check_labels(y, Q0.shape[1], name="y")
    w = _check_sample_weight(sample_weight, labels.size)
    if calibrator is None:
        from calibrators._dirichlet import DirichletCalibrator

        calibrator = DirichletCalibrator()
    raw_actions = np.argmin(Q0 @ C, axis=1)
    if method == "plugin":
        try:
            _check_is_fitted(calibrator)
            fitted = calibrator
        except NotFittedError:
            fitted = clone(calibrator).fit(Q0, labels, sample_weight=w)
        Q = np.asarray(fitted.predict_proba(Q0), dtype=np.float64)
        risk = Q @ C
        rows = np.arange(labels.size)
        excess = risk[rows, raw_actions] - risk.min(axis=1)
        return float(w @ excess / w.sum())
    if method == "crossfit":
        cal_actions = np.empty_like(raw_actions)
        folds = KFold(n_splits=n_splits, shuffle=True, random_state=random_state)
        for train, test in folds.split(Q0):
            fitted = clone(calibrator).fit(Q0[train], labels[train], sample_weight=w[train])
            Q = np.asarray(fitted.predict_proba(Q0[test]), dtype=np.float64)
            cal_actions[test] = np.argmin(Q @ C, axis=1)
        gain = C[labels, raw_actions] - C[labels, cal_actions]
        return float(w @ gain / w.sum())
    msg = f"tce got method={method!r}; expected 'plugin' or 'crossfit'."
    raise ValueError(msg)


@dataclass(frozen=True)
class ReliabilityDiagram:
    """Binned calibration data, and the figure when one was drawn.

    Attributes
    ----------
    bin_edges : ndarray of shape (n_bins + 1,)
        Equal-width bin edges of ``[0, 1]``.
    confidence : ndarray of shape (n_bins,)
        Weighted mean predicted probability in each bin (NaN for empty bins).
    frequency : ndarray of shape (n_bins,)
        Weighted observed frequency (accuracy for top-label) in each bin (NaN for
        empty bins).
    weight : ndarray of shape (n_bins,)
        Total sample weight in each bin.
    ece : float
        The expected calibration error of these bins.
    label : str
        ``"top-label"`` or ``"class <j>"``.
    figure : matplotlib.figure.Figure or None
        The drawn figure, or ``None`` when nothing was drawn.
    """

    bin_edges: NDArray[np.float64]
    confidence: NDArray[np.float64]
    frequency: NDArray[np.float64]
    weight: NDArray[np.float64]
    ece: float
    label: str
    figure: Any = None


def reliability_diagram(
    P: ArrayLike,
    y: ArrayLike,
    *,
    n_bins: int = 15,
    class_index: int | None = None,
    sample_weight: ArrayLike | None = None,
    ax: Any = None,
    plot: bool = False,
    title: str | None = None,
) -> ReliabilityDiagram:
    """Bin data of a reliability diagram, and optionally the drawn diagram.

    Parameters
    ----------
    P : array-like of shape (n_samples, n_classes)
        Predicted probabilities; each row sums to 1.
    y : array-like of shape (n_samples,)
        True class indices in ``[0, n_classes)``.
    n_bins : int, default=15
        Number of equal-width bins.
    class_index : int, default=None
        ``None`` for the top-label diagram (confidence vs accuracy); an index ``j``
        for the one-vs-rest diagram of class ``j`` (``q_j`` vs frequency of ``y == j``).
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    ax : matplotlib.axes.Axes, default=None
        Axes to draw on; implies ``plot=True``.
    plot : bool, default=False
        Draw the diagram on a new figure when ``ax`` is None.
    title : str, default=None
        Title of the axes.

    Returns
    -------
    diagram : ReliabilityDiagram
        Bin data; ``figure`` is set when a diagram was drawn.

    Raises
    ------
    ImportError
        When drawing is requested and matplotlib is not installed.

    Examples
    --------
    >>> from calibrators.metrics import reliability_diagram
    >>> d = reliability_diagram([[0.9, 0.1], [0.6, 0.4]], [0, 1], n_bins=10)
    >>> d.weight.tolist()
    [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    """
    _check_n_bins(n_bins)
    _check_order(P, y, "reliability_diagram", "P, y")
    Q = check_probabilities(P, name="P")
    _check_consistent_length(Q, y, sample_weight)
    labels = _check_labels(y, Q.shape[1], name="y")
    w = _check_sample_weight(sample_weight, labels.size)
    if class_index is None:
        pred = np.argmax(Q, axis=1)
        conf = Q[np.arange(labels.size), pred]
        hit = (pred == labels).astype(np.float64)
        label = "top-label"
    else:
        if not 0 <= int(class_index) < Q.shape[1]:
            msg = (
                f"class_index must lie in [0, {Q.shape[1]}) for P with {Q.shape[1]} columns; "
                f"got {class_index!r}."
            )
            raise ValueError(msg)
        conf = Q[:, int(class_index)]
        hit = (labels == int(class_index)).astype(np.float64)
        label = f"class {int(class_index)}"
    mean_conf, freq, weight, gap = _binned_gap(conf, hit, w, n_bins)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    figure = None
    if ax is not None or plot:
        figure = _draw(edges, mean_conf, freq, weight, gap, label, ax, title)
    return ReliabilityDiagram(edges, mean_conf, freq, weight, gap, label, figure)


def _draw(
    edges: NDArray[np.float64],
    mean_conf: NDArray[np.float64],
    freq: NDArray[np.float64],
    weight: NDArray[np.float64],
    gap: float,
    label: str,
    ax: Any,
    title: str | None,
) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        msg = (
            "reliability_diagram needs matplotlib to draw; install the 'plot' extra: "
            "pip install 'taskcal-agents[plot]'."
        )
        raise ImportError(msg) from exc
    if ax is None:
        figure = Figure(figsize=(4.5, 4.5))
        ax = figure.add_subplot()
    else:
        figure = ax.figure
    width = np.diff(edges)
    filled = weight > 0
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="perfect")
    ax.bar(
        edges[:-1][filled],
        freq[filled],
        width=width[filled],
        align="edge",
        edgecolor="black",
        alpha=0.7,
        label="observed",
    )
    ax.plot(mean_conf[filled], freq[filled], "o", color="black", markersize=3)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("confidence" if label == "top-label" else f"predicted p ({label})")
    ax.set_ylabel("accuracy" if label == "top-label" else "observed frequency")
    ax.set_title(title if title is not None else f"{label} reliability (ECE {gap:.3f})")
    ax.legend(loc="upper left")
    return figure
