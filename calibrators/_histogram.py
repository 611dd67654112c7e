"""One-vs-rest histogram binning, renormalised."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from calibrators._base import N_CLASSES_CONSTRAINT, BaseCalibrator, normalise_rows
from calibrators._validation import Integral, Interval, StrOptions

__all__ = ["HistogramBinning"]


def _weighted_quantiles(
    values: NDArray[np.float64], weights: NDArray[np.float64], qs: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Inverted-CDF weighted quantiles (integer weights act like repeated rows)."""
    order = np.argsort(values, kind="stable")
    v, cw = values[order], np.cumsum(weights[order])
    idx = np.searchsorted(cw, qs * cw[-1], side="left")
    quantiles: NDArray[np.float64] = v[np.minimum(idx, v.size - 1)]
    return quantiles


class HistogramBinning(BaseCalibrator):
    """One-vs-rest histogram binning, renormalised to sum to 1.

    For each class ``j``, ``[0, 1]`` is cut into ``n_bins`` bins (equal width, or
    equal weighted mass of ``p_j`` with ``strategy="quantile"``); every bin maps to
    the weighted frequency of ``y == j`` among the calibration rows that fall into
    it. A bin without calibration rows maps to its midpoint. The calibrated row is
    then divided by its sum; a row whose values are all 0 becomes uniform.

    Parameters
    ----------
    n_bins : int, default=15
        Number of bins per class.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width bins, or bins holding equal weighted mass of the calibration
        probabilities of each class.
    n_classes : int, default=None
        Number of classes; ``None`` means one class per column of ``P``. This map
        needs one input column per class, so any other value is an error when
        fitting (only :class:`MatrixScaling` and ``DirichletCalibrator(kind="full")``
        read extra input columns).

    Attributes
    ----------
    bin_edges_ : ndarray of shape (n_classes, n_bins + 1)
        Bin edges of each class; the first is 0 and the last is 1.
    bin_values_ : ndarray of shape (n_classes, n_bins)
        Calibrated value of each bin.
    n_classes_ : int
        Number of classes (columns of ``P``).
    classes_ : ndarray of shape (n_classes,)
        ``np.arange(n_classes_)``.
    n_features_in_ : int
        Equal to ``n_classes_``.

    See Also
    --------
    IsotonicCalibrator : A monotone non-parametric map.

    References
    ----------
    .. [1] B. Zadrozny, C. Elkan, "Obtaining calibrated probability estimates from
       decision trees and naive Bayesian classifiers", ICML 2001.

    Examples
    --------
    >>> import numpy as np
    >>> from calibrators import HistogramBinning
    >>> P = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]])
    >>> HistogramBinning(n_bins=2).fit(P, [0, 1, 1, 0]).bin_values_
    array([[0.        , 0.66666667],
           [0.33333333, 1.        ]])
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_bins": [Interval(Integral, 1, None, closed="left")],
        "strategy": [StrOptions({"uniform", "quantile"})],
        "n_classes": N_CLASSES_CONSTRAINT,
    }
    _state_attributes: ClassVar[tuple[tuple[str, str], ...]] = (
        ("bin_edges_", "array"),
        ("bin_values_", "array"),
    )

    def _state_problem(self) -> str | None:
        k, edges, values = self.n_classes_, self.bin_edges_, self.bin_values_
        if values.ndim != 2 or values.shape[0] != k or values.shape[1] < 1:
            return f"'bin_values_' must have shape ({k}, n_bins), got {values.shape}"
        if edges.shape != (k, values.shape[1] + 1):
            return f"'bin_edges_' must have shape {(k, values.shape[1] + 1)}, got {edges.shape}"
        if np.any(np.diff(edges, axis=1) < 0) or np.any((values < 0) | (values > 1)):
            return "'bin_edges_' must increase along each row and 'bin_values_' lie in [0, 1]"
        return None

    def __init__(
        self, *, n_bins: int = 15, strategy: str = "uniform", n_classes: int | None = None
    ) -> None:
        self.n_bins = n_bins
        self.strategy = strategy
        self.n_classes = n_classes

    def _edges(self, p: NDArray[np.float64], w: NDArray[np.float64]) -> NDArray[np.float64]:
        if self.strategy == "uniform":
            return np.linspace(0.0, 1.0, self.n_bins + 1)
        inner = _weighted_quantiles(p, w, np.arange(1, self.n_bins) / self.n_bins)
        return np.concatenate([[0.0], inner, [1.0]])

    def _fit(
        self,
        P: NDArray[np.float64],
        y: NDArray[np.intp],
        sample_weight: NDArray[np.float64],
        n_classes: int,
    ) -> None:
        keep = sample_weight > 0
        P, y, w = P[keep], y[keep], sample_weight[keep]
        edges = np.empty((n_classes, self.n_bins + 1))
        values = np.empty((n_classes, self.n_bins))
        for j in range(n_classes):
            e = self._edges(P[:, j], w)
            bins = np.searchsorted(e[1:-1], P[:, j], side="right")
            mass = np.bincount(bins, weights=w, minlength=self.n_bins)
            hits = np.bincount(bins, weights=w * (y == j), minlength=self.n_bins)
            mid = (e[:-1] + e[1:]) / 2
            values[j] = np.divide(hits, mass, out=mid, where=mass > 0)
            edges[j] = e
        self.bin_edges_ = edges
        self.bin_values_ = values

    def _predict_proba(self, P: NDArray[np.float64]) -> NDArray[np.float64]:
        Q = np.empty_like(P)
        for j in range(P.shape[1]):
            bins = np.searchsorted(self.bin_edges_[j, 1:-1], P[:, j], side="right")
            Q[:, j] = self.bin_values_[j, bins]
        return normalise_rows(Q)
