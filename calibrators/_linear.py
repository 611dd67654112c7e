"""Linear maps on log-probabilities: vector scaling and matrix scaling.

Both estimators, and :class:`~calibrators.DirichletCalibrator`, fit
``q = softmax(W ln p + b)`` with a clipped ``ln p`` by minimising the weighted mean
negative log-likelihood (plus, for Dirichlet calibration, a regulariser) from the
identity map. Vector scaling has a diagonal ``W``, matrix scaling a full (k, d) one that
may read extra input columns. The map and its objective are in
:mod:`calibrators._linear_objective`, the solver in :mod:`calibrators._linear_solver`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from calibrators._base import EPS_CONSTRAINT, N_CLASSES_CONSTRAINT, BaseCalibrator
from calibrators._linear_objective import Regularizer, predict_linear
from calibrators._linear_solver import fit_linear
from calibrators._validation import Integral, Interval, Real, clipped_log

__all__ = ["MatrixScaling", "VectorScaling"]


def linear_state_problem(calibrator: BaseCalibrator) -> str | None:
    """Return what is wrong with a stored ``coef_``, ``intercept_`` or ``n_iter_``, or ``None``."""
    k, d = calibrator.n_classes_, calibrator.n_features_in_
    if calibrator.coef_.shape != (k, d):
        return f"'coef_' must have shape {(k, d)}, got {calibrator.coef_.shape}"
    if calibrator.intercept_.shape != (k,):
        return f"'intercept_' must have shape {(k,)}, got {calibrator.intercept_.shape}"
    if calibrator.n_iter_ < 0:
        return f"'n_iter_' must be >= 0, got {calibrator.n_iter_!r}"
    return None


class _LinearCalibrator(BaseCalibrator):
    """Shared implementation of the maps ``softmax(W ln p + b)``."""

    _state_attributes: ClassVar[tuple[tuple[str, str], ...]] = (
        ("coef_", "array"),
        ("intercept_", "array"),
        ("n_iter_", "int"),
    )
    _kind: ClassVar[str] = "full"

    def _state_problem(self) -> str | None:
        return linear_state_problem(self)

    def _regularizer(self) -> Regularizer:
        return Regularizer()

    def _fit(
        self,
        P: NDArray[np.float64],
        y: NDArray[np.intp],
        sample_weight: NDArray[np.float64],
        n_classes: int,
    ) -> None:
        L = clipped_log(P, self.eps)
        fitted = fit_linear(
            L,
            y,
            sample_weight,
            kind=self._kind,
            reg=self._regularizer(),
            max_iter=self.max_iter,
            tol=self.tol,
            owner=type(self).__name__,
            n_classes=n_classes,
        )
        self.coef_ = fitted.coef
        self.intercept_ = fitted.intercept
        self.n_iter_ = fitted.n_iter

    def _init_state(self, n_classes: int, n_features: int | None = None) -> None:
        """Set the fitted attributes to the optimiser's starting point (identity)."""
        d = n_classes if n_features is None else n_features
        self.coef_ = np.eye(n_classes, d)
        self.intercept_ = np.zeros(n_classes)
        self.n_iter_ = 0
        self.n_classes_ = n_classes
        self.classes_ = np.arange(n_classes)
        self.n_features_in_ = d

    def _predict_proba(self, P: NDArray[np.float64]) -> NDArray[np.float64]:
        return predict_linear(clipped_log(P, self.eps), self.coef_, self.intercept_)


_LINEAR_CONSTRAINTS: dict[str, list[Any]] = {
    "n_classes": N_CLASSES_CONSTRAINT,
    "eps": [EPS_CONSTRAINT],
    "max_iter": [Interval(Integral, 1, None, closed="left")],
    "tol": [Interval(Real, 0.0, None, closed="left")],
}


class VectorScaling(_LinearCalibrator):
    """Vector scaling: ``q = softmax(w * ln p + b)`` with one weight per class.

    The diagonal Dirichlet calibration map without regularisation, fitted by
    weighted maximum likelihood (Newton's method, started at the identity map).

    Parameters
    ----------
    eps : float, default=1e-12
        Probabilities are clipped to ``[eps, 1]`` before taking ``ln``.
    max_iter : int, default=1000
        Maximum number of optimiser iterations (Newton steps; L-BFGS-B iterations for
        maps of more than 128 parameters).
    tol : float, default=1e-7
        Gradient tolerance of the optimiser.
    n_classes : int, default=None
        Number of classes; ``None`` means one class per column of ``P``. This map
        needs one input column per class, so any other value is an error when
        fitting (only :class:`MatrixScaling` and ``DirichletCalibrator(kind="full")``
        read extra input columns).

    Attributes
    ----------
    coef_ : ndarray of shape (n_classes, n_classes)
        Diagonal weight matrix ``W = diag(w)``.
    intercept_ : ndarray of shape (n_classes,)
        Bias ``b``.
    n_iter_ : int
        Number of optimiser iterations.
    n_classes_ : int
        Number of classes (columns of ``P``).
    classes_ : ndarray of shape (n_classes,)
        ``np.arange(n_classes_)``.
    n_features_in_ : int
        Equal to ``n_classes_``.

    See Also
    --------
    MatrixScaling : A full weight matrix.
    DirichletCalibrator : The same family with regularisation.

    References
    ----------
    .. [1] C. Guo, G. Pleiss, Y. Sun, K. Q. Weinberger, "On Calibration of Modern
       Neural Networks", ICML 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from calibrators import VectorScaling
    >>> P = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]])
    >>> y = np.array([0, 1, 1, 0])
    >>> VectorScaling().fit(P, y).predict_proba(P).sum(axis=1)
    array([1., 1., 1., 1.])
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = dict(_LINEAR_CONSTRAINTS)
    _kind: ClassVar[str] = "diagonal"

    def __init__(
        self,
        *,
        eps: float = 1e-12,
        max_iter: int = 1000,
        tol: float = 1e-7,
        n_classes: int | None = None,
    ) -> None:
        self.eps = eps
        self.max_iter = max_iter
        self.tol = tol
        self.n_classes = n_classes


class MatrixScaling(_LinearCalibrator):
    """Matrix scaling: ``q = softmax(W ln p + b)`` with a full (k, d) matrix ``W``.

    On probability inputs this is the unregularised full Dirichlet calibration map
    and the same model as multinomial logistic regression on ``ln p`` features.
    Usually ``d = k`` (one input column per class). With ``n_classes`` set below the
    number of columns ``d`` of ``P``, the first ``n_classes`` columns are the
    classes and the others are extra inputs (such as the share of unparsed
    samples): the map reads them but predicts only the ``n_classes`` classes.

    Parameters
    ----------
    eps : float, default=1e-12
        Probabilities are clipped to ``[eps, 1]`` before taking ``ln``.
    max_iter : int, default=1000
        Maximum number of optimiser iterations (Newton steps; L-BFGS-B iterations for
        maps of more than 128 parameters).
    tol : float, default=1e-7
        Gradient tolerance of the optimiser.
    n_classes : int, default=None
        Number of classes ``k``, at most the number of columns ``d`` of ``P``;
        ``None`` means ``d``. Set it when ``P`` carries extra input columns, or when
        ``y`` might miss a class.

    Attributes
    ----------
    coef_ : ndarray of shape (n_classes, n_features_in)
        Weight matrix ``W``; the optimiser starts at ``[I | 0]``.
    intercept_ : ndarray of shape (n_classes,)
        Bias ``b``.
    n_iter_ : int
        Number of optimiser iterations.
    n_classes_ : int
        Number of classes (``n_classes``, or the number of columns of ``P``).
    classes_ : ndarray of shape (n_classes,)
        ``np.arange(n_classes_)``.
    n_features_in_ : int
        Number of input columns of ``P`` seen in ``fit``.

    See Also
    --------
    VectorScaling : A diagonal weight matrix.
    DirichletCalibrator : The same family with regularisation (ODIR or L2).

    References
    ----------
    .. [1] C. Guo, G. Pleiss, Y. Sun, K. Q. Weinberger, "On Calibration of Modern
       Neural Networks", ICML 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from calibrators import MatrixScaling
    >>> P = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]])
    >>> y = np.array([0, 1, 1, 0])
    >>> MatrixScaling().fit(P, y).coef_.shape
    (2, 2)

    A third input column (here: the share of unparsed samples) read for two classes:

    >>> X = np.array([[0.8, 0.1, 0.1], [0.2, 0.1, 0.7], [0.1, 0.6, 0.3], [0.5, 0.4, 0.1]])
    >>> cal = MatrixScaling(n_classes=2).fit(X, y)
    >>> cal.coef_.shape, cal.predict_proba(X).shape
    ((2, 3), (4, 2))
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = dict(_LINEAR_CONSTRAINTS)
    _kind: ClassVar[str] = "full"

    def __init__(
        self,
        *,
        eps: float = 1e-12,
        max_iter: int = 1000,
        tol: float = 1e-7,
        n_classes: int | None = None,
    ) -> None:
        self.eps = eps
        self.max_iter = max_iter
        self.tol = tol
        self.n_classes = n_classes

    @property
    def reads_extra_columns(self) -> bool:
        """Whether the map can read more input columns than it has classes (always).

        Returns
        -------
        bool
            ``True``: ``W`` may have shape (n_classes, n_features).
        """
        return True
