"""Scoring rules: :func:`nll`, :func:`brier`, :func:`ece`, :func:`classwise_ece`.

Public as :mod:`calibrators.metrics`. They follow scikit-learn's argument order
``(y_true, y_prob, ...)`` and import no estimator, so that :meth:`BaseCalibrator.score`
can use :func:`nll` without importing :mod:`calibrators.metrics` (whose ``tce`` fits a
:class:`~calibrators.DirichletCalibrator` by default).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from calibrators._validation import check_consistent_length as _check_consistent_length
from calibrators._validation import check_labels as _check_labels
from calibrators._validation import check_probabilities
from calibrators._validation import check_sample_weight as _check_sample_weight


def _check_order(first: ArrayLike, second: ArrayLike, func: str, expected: str) -> None:
    """Raise a clear error when labels and probabilities were passed in swapped order."""
    labels_first = expected.startswith("y_true")
    a, b = np.ndim(first), np.ndim(second)
    if (labels_first and a == 2 and b == 1) or (not labels_first and a == 1 and b == 2):
        msg = (
            f"{func} expects its arguments in the order ({expected}); the "
            f"{'first' if labels_first else 'second'} argument looks like probabilities "
            f"(shape {np.shape(first if labels_first else second)}). Swap the arguments."
        )
        raise ValueError(msg)


def _prob_inputs(
    y_true: ArrayLike,
    y_prob: ArrayLike,
    sample_weight: ArrayLike | None,
    func: str,
) -> tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.float64]]:
    _check_order(y_true, y_prob, func, "y_true, y_prob")
    Q = check_probabilities(y_prob, name="y_prob")
    _check_consistent_length(y_true, Q, sample_weight)
    y = _check_labels(y_true, Q.shape[1], name="y_true")
    w = _check_sample_weight(sample_weight, Q.shape[0])
    return y, Q, w


def nll(
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    sample_weight: ArrayLike | None = None,
    eps: float = 1e-12,
) -> float:
    """Weighted mean negative log-likelihood (log-loss) of the true class.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class indices in ``[0, n_classes)``.
    y_prob : array-like of shape (n_samples, n_classes)
        Predicted probabilities; each row sums to 1.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.
    eps : float, default=1e-12
        Probabilities of the true class are clipped to ``[eps, 1]``.

    Returns
    -------
    nll : float
        ``sum_i w_i * -ln q_{i, y_i} / sum_i w_i``.

    Examples
    --------
    >>> from calibrators.metrics import nll
    >>> round(nll([0, 1], [[0.5, 0.5], [0.2, 0.8]]), 4)
    0.4581
    """
    y, Q, w = _prob_inputs(y_true, y_prob, sample_weight, "nll")
    p_true = np.maximum(Q[np.arange(y.size), y], eps)
    return float(w @ -np.log(p_true) / w.sum())


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
    weight = np.bincount(bins, weights=w, minlength=n_bins).astype(np.float64, copy=False)
    sum_conf = np.bincount(bins, weights=w * conf, minlength=n_bins)
    sum_hit = np.bincount(bins, weights=w * hit, minlength=n_bins)
    nonempty = weight > 0
    mean_conf: NDArray[np.float64] = np.full(n_bins, np.nan)
    freq: NDArray[np.float64] = np.full(n_bins, np.nan)
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
