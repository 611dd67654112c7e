"""One-vs-rest isotonic regression, renormalised."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from sklearn.isotonic import IsotonicRegression

from calibrators._base import N_CLASSES_CONSTRAINT, BaseCalibrator, normalise_rows

__all__ = ["IsotonicCalibrator"]


class IsotonicCalibrator(BaseCalibrator):
    """One-vs-rest isotonic regression, renormalised to sum to 1.

    For each class ``j`` a non-decreasing step function ``f_j`` maps ``p_j`` to the
    (weighted) frequency of ``y == j``; it is fitted by pool-adjacent-violators
    (:class:`sklearn.isotonic.IsotonicRegression`) and evaluated by linear
    interpolation between its thresholds, clipped at both ends. The calibrated row
    is ``f(p) / sum_j f_j(p_j)``; a row whose values are all 0 becomes uniform.
    Only the thresholds are stored, so fitted calibrators pickle and serialise.

    Parameters
    ----------
    n_classes : int, default=None
        Number of classes; ``None`` means one class per column of ``P``. This map
        needs one input column per class, so any other value is an error when
        fitting (only :class:`MatrixScaling` and ``DirichletCalibrator(kind="full")``
        read extra input columns).

    Attributes
    ----------
    x_thresholds_ : list of ndarray
        For each class, the increasing inputs of its interpolation table.
    y_thresholds_ : list of ndarray
        For each class, the non-decreasing outputs at ``x_thresholds_``.
    n_classes_ : int
        Number of classes (columns of ``P``).
    classes_ : ndarray of shape (n_classes,)
        ``np.arange(n_classes_)``.
    n_features_in_ : int
        Equal to ``n_classes_``.

    See Also
    --------
    HistogramBinning : A piecewise-constant non-parametric map.
    sklearn.isotonic.IsotonicRegression : The one-dimensional fit.

    References
    ----------
    .. [1] B. Zadrozny, C. Elkan, "Transforming classifier scores into accurate
       multiclass probability estimates", KDD 2002.

    Examples
    --------
    >>> import numpy as np
    >>> from calibrators import IsotonicCalibrator
    >>> P = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]])
    >>> IsotonicCalibrator().fit(P, [0, 1, 1, 0]).predict_proba(P).sum(axis=1)
    array([1., 1., 1., 1.])
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {"n_classes": N_CLASSES_CONSTRAINT}
    _state_attributes: ClassVar[tuple[tuple[str, str], ...]] = (
        ("x_thresholds_", "array_list"),
        ("y_thresholds_", "array_list"),
    )

    def _state_problem(self) -> str | None:
        k, xs, ys = self.n_classes_, self.x_thresholds_, self.y_thresholds_
        if len(xs) != k or len(ys) != k:
            return f"'x_thresholds_' and 'y_thresholds_' must hold {k} arrays each"
        for j, (x, y) in enumerate(zip(xs, ys, strict=True)):
            if x.ndim != 1 or x.shape != y.shape or x.size < 1:
                return (
                    f"'x_thresholds_'[{j}] and 'y_thresholds_'[{j}] must be equal non-empty lists"
                )
            if np.any(np.diff(x) < 0) or np.any((y < 0) | (y > 1)):
                return f"'x_thresholds_'[{j}] must increase and 'y_thresholds_'[{j}] lie in [0, 1]"
        return None

    def __init__(self, *, n_classes: int | None = None) -> None:
        self.n_classes = n_classes

    def _fit(
        self,
        P: NDArray[np.float64],
        y: NDArray[np.intp],
        sample_weight: NDArray[np.float64],
        n_classes: int,
    ) -> None:
        keep = sample_weight > 0
        P, y, w = P[keep], y[keep], sample_weight[keep]
        xs: list[NDArray[np.float64]] = []
        ys: list[NDArray[np.float64]] = []
        for j in range(n_classes):
            iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
            iso.fit(P[:, j], (y == j).astype(np.float64), sample_weight=w)
            xs.append(np.asarray(iso.X_thresholds_, dtype=np.float64))
            ys.append(np.asarray(iso.y_thresholds_, dtype=np.float64))
        self.x_thresholds_ = xs
        self.y_thresholds_ = ys

    def _predict_proba(self, P: NDArray[np.float64]) -> NDArray[np.float64]:
        Q = np.empty_like(P)
        for j, (xt, yt) in enumerate(zip(self.x_thresholds_, self.y_thresholds_, strict=True)):
            Q[:, j] = np.interp(P[:, j], xt, yt)
        return normalise_rows(Q)
