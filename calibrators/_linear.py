"""Linear maps on log-probabilities: vector scaling, matrix scaling, and their solver.

All three families of this module, and :class:`~calibrators.DirichletCalibrator`,
compute ``q = softmax(W ln p + b)`` with a clipped ``ln p``. They differ only in the
shape of ``W`` and in the regulariser:

- ``"full"``: ``W`` is any (k, d) matrix, ``b`` any vector (matrix scaling). The input
  ``p`` has ``d >= k`` columns: one per class, then extra input columns (such as the
  share of unparsed samples) that the map reads but does not predict.
- ``"diagonal"``: ``W = diag(w)``, ``b`` any vector (vector scaling); ``d = k``.
- ``"fixed_diagonal"``: ``W = a I``, ``b = 0`` (temperature scaling of ``ln p``); ``d = k``.

The objective is the weighted mean negative log-likelihood plus an optional
regulariser, minimised with scipy's L-BFGS-B using analytic gradients. The solver
starts at the identity map (``W = [I | 0]``, ``b = 0``: the extra columns start
ignored) and works on standardised features ``(ln p - mean) / std``, which makes the
problem well conditioned; the solution is mapped back to ``W`` and ``b`` on ``ln p``.
Everything is deterministic.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning

from calibrators._base import EPS_CONSTRAINT, N_CLASSES_CONSTRAINT, BaseCalibrator, softmax
from calibrators._validation import Integral, Interval, Real, clipped_log

__all__ = ["MatrixScaling", "VectorScaling"]

KINDS = ("full", "diagonal", "fixed_diagonal")

_ABNORMAL_GRAD_TOLERANCE = 1e-4
"""An L-BFGS-B line-search failure is accepted when the gradient is this small.

Such failures mean that float64 cannot decrease the objective any further; a larger
gradient means the optimiser really failed, and ``fit`` raises ``RuntimeError``.
"""


@dataclass(frozen=True)
class Regularizer:
    """Penalty on ``(W, b)`` added to the mean negative log-likelihood.

    ``W`` has shape (k, d) with ``d >= k`` input columns; ``I`` below is the (k, d)
    identity ``[I | 0]``. With ``mu`` set (ODIR, off-diagonal and intercept
    regularisation): ``lam * sum_{i != j} W_ij**2 / (k (d - 1)) + mu * sum_j b_j**2 / k``,
    where the weights of the extra columns count as off-diagonal (they are shrunk
    towards ignoring those columns). Otherwise (L2 towards the identity map):
    ``lam * (||W - I||_F**2 + ||b||**2) / (k (d + 1))``. Both divide by the number of
    penalised entries, and equal the square formulas of Kull et al. when ``d = k``.
    """

    lam: float = 0.0
    mu: float | None = None

    def is_zero(self) -> bool:
        """Whether the penalty vanishes identically."""
        return self.lam == 0.0 and not self.mu

    def value_and_grad(
        self, W: NDArray[np.float64], b: NDArray[np.float64]
    ) -> tuple[float, NDArray[np.float64], NDArray[np.float64]]:
        """Penalty and its gradients with respect to ``W`` and ``b``."""
        k, d = W.shape
        if self.mu is not None:
            off = W.copy()
            np.fill_diagonal(off, 0.0)
            cw = self.lam / (k * (d - 1))
            cb = self.mu / k
            value = cw * float(np.sum(off * off)) + cb * float(b @ b)
            return value, 2.0 * cw * off, 2.0 * cb * b
        dev = W - np.eye(k, d)
        c = self.lam / (k * (d + 1))
        value = c * (float(np.sum(dev * dev)) + float(b @ b))
        return value, 2.0 * c * dev, 2.0 * c * b


@dataclass
class LinearFit:
    """Result of :func:`fit_linear`."""

    coef: NDArray[np.float64]
    intercept: NDArray[np.float64]
    n_iter: int
    loss: float


def predict_linear(
    L: NDArray[np.float64], coef: NDArray[np.float64], intercept: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Return ``softmax(L @ coef.T + intercept)`` row by row."""
    Z = L @ coef.T
    Z += intercept
    return softmax(Z)


class _Objective:
    """Mean weighted NLL plus penalty as a function of the optimiser's vector ``theta``.

    ``theta`` parametrises the map on standardised features ``X = (L - m) / s``:
    full: ``theta = [V.ravel(), c]`` with ``z = V x + c`` (``V`` of shape (k, d));
    diagonal: ``theta = [v, c]`` with ``z = v * x + c``;
    fixed_diagonal: ``theta = [a]`` with ``z = a ln p`` (one parameter needs no scaling).
    Arrays are stored transposed, (n_classes, n_samples), so that the reductions over
    classes run along the fast axis.
    """

    def __init__(
        self,
        L: NDArray[np.float64],
        y: NDArray[np.intp],
        weights: NDArray[np.float64],
        kind: str,
        reg: Regularizer,
        n_classes: int | None = None,
    ) -> None:
        n, d = L.shape
        k = d if n_classes is None else n_classes
        if kind != "full" and d != k:  # pragma: no cover - validated in fit
            msg = f"kind={kind!r} needs one input column per class; got {d} for {k} classes"
            raise AssertionError(msg)
        self.k = k
        self.d = d
        self.kind = kind
        self.reg = reg
        self.y = y
        self.cols = np.arange(n)
        self.w = weights / weights.sum()
        Lt = np.ascontiguousarray(L.T)
        if kind == "fixed_diagonal":
            self.m = np.zeros(d)
            self.s = np.ones(d)
            self.Xt = Lt
        else:
            self.m = Lt @ self.w
            Xt = Lt - self.m[:, None]
            s = np.sqrt((Xt * Xt) @ self.w)
            s[s < 1e-12] = 1.0
            Xt /= s[:, None]
            self.s = s
            self.Xt = Xt
        self._Z = np.empty((k, n))

    # Parametrisation ---------------------------------------------------------

    def theta_from_wb(self, W: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
        """Map ``(W, b)`` on ``ln p`` to ``theta``."""
        if self.kind == "full":
            V = W * self.s[None, :]
            c = b + W @ self.m
            return np.concatenate([V.ravel(), c])
        if self.kind == "diagonal":
            w = np.diag(W)
            return np.concatenate([w * self.s, b + w * self.m])
        return np.array([float(np.mean(np.diag(W)))])

    def wb_from_theta(
        self, theta: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Map ``theta`` to ``(W, b)`` on ``ln p``."""
        k, d = self.k, self.d
        if self.kind == "full":
            V = theta[: k * d].reshape(k, d)
            W = V / self.s[None, :]
            b = theta[k * d :] - W @ self.m
            return W, b
        if self.kind == "diagonal":
            w = theta[:k] / self.s
            return np.diag(w), theta[k:] - w * self.m
        return theta[0] * np.eye(k), np.zeros(k)

    # Objective ---------------------------------------------------------------

    def _logits(self, theta: NDArray[np.float64]) -> NDArray[np.float64]:
        """Transposed logits, shape (n_classes, n_samples), in a reused buffer."""
        k, d = self.k, self.d
        Z = self._Z
        if self.kind == "full":
            np.matmul(theta[: k * d].reshape(k, d), self.Xt, out=Z)
            Z += theta[k * d :, None]
        elif self.kind == "diagonal":
            np.multiply(self.Xt, theta[:k, None], out=Z)
            Z += theta[k:, None]
        else:
            np.multiply(self.Xt, theta[0], out=Z)
        return Z

    def __call__(self, theta: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        """Objective value and gradient at ``theta``."""
        Z = self._logits(theta)
        Z -= Z.max(axis=0)
        zy = Z[self.y, self.cols]
        np.exp(Z, out=Z)
        sums = Z.sum(axis=0)
        value = float((np.log(sums) - zy) @ self.w)
        # Z becomes G = w_i (q_i - e_{y_i}), the gradient with respect to the logits.
        Z *= self.w / sums
        Z[self.y, self.cols] -= self.w
        if self.kind == "full":
            grad = np.concatenate([(Z @ self.Xt.T).ravel(), Z.sum(axis=1)])
        elif self.kind == "diagonal":
            grad = np.concatenate([np.einsum("ij,ij->i", Z, self.Xt), Z.sum(axis=1)])
        else:
            grad = np.array([float(np.einsum("ij,ij->", Z, self.Xt))])
        if not self.reg.is_zero():
            W, b = self.wb_from_theta(theta)
            r, gW, gb = self.reg.value_and_grad(W, b)
            value += r
            grad += self._penalty_grad_to_theta(gW, gb)
        return value, grad

    def _penalty_grad_to_theta(
        self, gW: NDArray[np.float64], gb: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Chain rule from gradients in ``(W, b)`` to gradients in ``theta``."""
        if self.kind == "full":
            # W = V / s (columns), b = c - W m
            gV = gW / self.s[None, :] - np.outer(gb, self.m / self.s)
            return np.concatenate([gV.ravel(), gb])
        if self.kind == "diagonal":
            gv = (np.diag(gW) - gb * self.m) / self.s
            return np.concatenate([gv, gb])
        return np.array([float(np.trace(gW))])


def fit_linear(
    L: NDArray[np.float64],
    y: NDArray[np.intp],
    weights: NDArray[np.float64],
    *,
    kind: str,
    reg: Regularizer,
    max_iter: int,
    tol: float,
    owner: str,
    init: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None,
    n_classes: int | None = None,
) -> LinearFit:
    """Minimise the regularised mean NLL of ``softmax(W L + b)`` with L-BFGS-B.

    Parameters
    ----------
    L : ndarray of shape (n_samples, n_features)
        Clipped log-probabilities: one column per class, then any extra input columns.
    y : ndarray of shape (n_samples,)
        Class indices in ``[0, n_classes)``.
    weights : ndarray of shape (n_samples,)
        Non-negative sample weights (not all zero).
    kind : {"full", "diagonal", "fixed_diagonal"}
        Shape of ``W``.
    reg : Regularizer
        Penalty added to the mean NLL.
    max_iter : int
        Maximum number of L-BFGS-B iterations.
    tol : float
        Stop when the largest gradient component (standardised parametrisation) is
        below ``tol``.
    owner : str
        Class name used in warnings and errors.
    init : tuple of ndarray, default=None
        Starting ``(W, b)``; the identity map ``([I | 0], 0)`` when ``None``.
    n_classes : int, default=None
        Number of classes ``k`` (rows of ``W``); ``None`` means ``n_features``. Only
        ``kind="full"`` accepts fewer classes than columns.

    Returns
    -------
    LinearFit
        ``coef`` (W, shape (k, d)), ``intercept`` (b), iterations and final objective.
    """
    d = L.shape[1]
    k = d if n_classes is None else n_classes
    objective = _Objective(L, y, weights, kind, reg, k)
    W0, b0 = init if init is not None else (np.eye(k, d), np.zeros(k))
    theta0 = objective.theta_from_wb(W0, b0)
    result = minimize(
        objective,
        theta0,
        jac=True,
        method="L-BFGS-B",
        options={
            "maxiter": max_iter,
            "maxfun": 2 * max_iter + 20,
            "gtol": tol,
            "ftol": 64 * np.finfo(np.float64).eps,
            "maxcor": 20,
        },
    )
    check_optimizer_result(result, owner=owner, max_iter=max_iter)
    W, b = objective.wb_from_theta(result.x)
    return LinearFit(coef=W, intercept=b, n_iter=int(result.nit), loss=float(result.fun))


def check_optimizer_result(result: Any, *, owner: str, max_iter: int) -> None:
    """Warn when L-BFGS-B hit ``max_iter``; raise ``RuntimeError`` when it failed."""
    if not np.isfinite(result.fun) or not np.all(np.isfinite(result.x)):
        msg = (
            f"{owner} failed to fit: the objective became non-finite. Reason from "
            f"scipy.optimize.minimize (L-BFGS-B): {result.message}"
        )
        raise RuntimeError(msg)
    if result.success:
        return
    if result.status == 1:
        msg = (
            f"{owner} did not converge in max_iter={max_iter} iterations (scipy: "
            f"{result.message}). Increase max_iter, or add regularisation."
        )
        warnings.warn(msg, ConvergenceWarning, stacklevel=4)
        return
    grad = np.asarray(getattr(result, "jac", np.inf))
    if np.all(np.abs(grad) <= _ABNORMAL_GRAD_TOLERANCE):
        return  # the line search cannot improve at float64 precision: converged
    msg = f"{owner} failed to fit. Reason from scipy.optimize.minimize (L-BFGS-B): {result.message}"
    raise RuntimeError(msg)


class _LinearCalibrator(BaseCalibrator):
    """Shared implementation of the maps ``softmax(W ln p + b)``."""

    _state_attributes: ClassVar[tuple[tuple[str, str], ...]] = (
        ("coef_", "array"),
        ("intercept_", "array"),
        ("n_iter_", "int"),
    )
    _kind: ClassVar[str] = "full"

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
    weighted maximum likelihood (L-BFGS-B, analytic gradient, started at the
    identity map).

    Parameters
    ----------
    eps : float, default=1e-12
        Probabilities are clipped to ``[eps, 1]`` before taking ``ln``.
    max_iter : int, default=1000
        Maximum number of L-BFGS-B iterations.
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
        Maximum number of L-BFGS-B iterations.
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
