"""The log-loss and the input checks the metrics share (no estimator imported here).

:func:`nll` is public as :func:`calibrators.metrics.nll`; it lives below the estimators so
that :meth:`BaseCalibrator.score` can use it without importing :mod:`calibrators.metrics`
(whose ``tce`` fits a :class:`~calibrators.DirichletCalibrator` by default).
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
