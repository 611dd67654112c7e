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
regulariser. It is minimised with Newton's method (exact Hessian, Cholesky solve,
backtracking line search) for maps with at most :data:`NEWTON_MAX_PARAMS` parameters,
and with scipy's L-BFGS-B using analytic gradients for larger ones. The solver starts at
the identity map (``W = [I | 0]``, ``b = 0``: the extra columns start ignored) and works
on standardised features ``(ln p - mean) / std``, which makes the problem well
conditioned; the solution is mapped back to ``W`` and ``b`` on ``ln p``. Both stop when
the largest gradient component falls below ``tol`` and reach the same minimiser when
there is one (the objective is convex; the L2 penalty and ODIR with both strengths
positive make it strictly convex). When the data are separable along an unpenalised
direction (no penalty, or ODIR's free diagonal) the infimum is not attained and the
fitted map depends on where the optimiser stops. Everything is deterministic.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from scipy.linalg.lapack import dposv
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning

from calibrators._base import EPS_CONSTRAINT, N_CLASSES_CONSTRAINT, BaseCalibrator, softmax
from calibrators._validation import Integral, Interval, Real, clipped_log

__all__ = ["MatrixScaling", "VectorScaling"]

KINDS = ("full", "diagonal", "fixed_diagonal")

_ABNORMAL_GRAD_TOLERANCE = 1e-4
"""A fit that cannot decrease the objective any further is accepted when the gradient
is this small.

Such stalls (an L-BFGS-B line-search failure, or a Newton step whose effect is below
float64 rounding and does not shrink the gradient) mean that float64 cannot decrease the
objective any further. With a larger gradient a Newton stall hands over to L-BFGS-B from
where it stopped; an L-BFGS-B failure means the optimiser really failed, and ``fit`` raises
``RuntimeError``.
"""

NEWTON_MAX_PARAMS = 128
"""Maps with at most this many parameters are fitted with Newton's method, larger ones
with L-BFGS-B.

A Newton step forms the (p, p) Hessian in O(n p**2) and factorises it in O(p**3); it
converges in a handful of steps however badly the penalty is conditioned (for example
ODIR's intercept penalty, which couples the standardised weights when a feature is
nearly constant). An L-BFGS-B step costs O(n p) but may need hundreds of them, and it
stopped far from the minimum on such features. Measured (one thread): ODIR at k = 6,
n = 120, 5 Newton steps in about 1 ms against 500-1,000 L-BFGS-B iterations; ODIR at
k = 10, n = 20,000, 0.09 s against 0.41 s; the unpenalised full map at that size,
0.09 s against 0.08 s.
"""

_NEWTON_RIDGE = 1e-10
"""Ridge added to the Hessian, relative to the largest diagonal entry of its NLL part.

It makes the Cholesky factorisation succeed on the flat directions of an unpenalised
softmax (adding the same vector to every row of ``[W | b]`` changes nothing) without
moving along them, and barely slows convergence elsewhere.
"""

_ARMIJO = 1e-4
"""Sufficient-decrease constant of the backtracking line search."""

_LINE_SEARCH_HALVINGS = 40
"""Step lengths the line search tries (halving each time) before declaring a stall."""

_MAX_STEP_GROWTH = 10.0
"""Largest component of a Newton step, relative to the largest of ``max(1, |theta|)``."""


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

    def weights(
        self, k: int, d: int
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """Return the penalty as a weighted sum of squares of ``(W, b)`` entries.

        Returns
        -------
        weight_W, target_W, weight_b
            Arrays of shapes (k, d), (k, d) and (k,) such that the penalty is
            ``sum(weight_W * (W - target_W)**2) + sum(weight_b * b**2)``.
        """
        if self.mu is not None:
            weight_W = np.full((k, d), self.lam / (k * (d - 1)))
            weight_W[np.arange(k), np.arange(k)] = 0.0
            return weight_W, np.zeros((k, d)), np.full(k, self.mu / k)
        c = self.lam / (k * (d + 1))
        return np.full((k, d), c), np.eye(k, d), np.full(k, c)

    def value_and_grad(
        self, W: NDArray[np.float64], b: NDArray[np.float64]
    ) -> tuple[float, NDArray[np.float64], NDArray[np.float64]]:
        """Penalty and its gradients with respect to ``W`` and ``b``."""
        weight_W, target_W, weight_b = self.weights(*W.shape)
        dev = W - target_W
        value = float(np.sum(weight_W * dev * dev)) + float(weight_b @ (b * b))
        return value, 2.0 * weight_W * dev, 2.0 * weight_b * b


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


class LinearObjective:
    """Mean weighted NLL plus penalty as a function of the optimiser's vector ``theta``.

    ``theta`` parametrises the map on standardised features ``X = (L - m) / s``:
    full: ``theta = [V | c].ravel()`` with ``z = V x + c`` (``V`` of shape (k, d), one
    row ``[V_a, c_a]`` per class); diagonal: ``theta = [v, c]`` with ``z = v * x + c``;
    fixed_diagonal: ``theta = [a]`` with ``z = a ln p`` (one parameter needs no
    scaling). Arrays are stored transposed, (n_classes, n_samples), so that the
    reductions over classes run along the fast axis. The data part is set once; the
    penalty can be swapped with :meth:`set_reg` (a grid of strengths on one split).
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
        self.y = y
        self.cols = np.arange(n)
        self.w = weights / weights.sum()
        Lt = np.ascontiguousarray(L.T)
        if kind == "fixed_diagonal":
            self.m = np.zeros(d)
            self.s = np.ones(d)
            Xt = Lt
        else:
            self.m = Lt @ self.w
            Xt = Lt - self.m[:, None]
            s = np.sqrt((Xt * Xt) @ self.w)
            s[s < 1e-12] = 1.0
            Xt /= s[:, None]
            self.s = s
        if kind == "full":
            Xt = np.vstack([Xt, np.ones((1, n))])  # the intercept's input
        self.Xt: NDArray[np.float64] = Xt
        self.n_params: int = {"full": k * (d + 1), "diagonal": 2 * k, "fixed_diagonal": 1}[kind]
        self._Z = np.empty((k, n))
        self._outer: NDArray[np.float64] | None = None
        self._J: NDArray[np.float64] | None = None
        self._at: NDArray[np.float64] | None = None  # where the probabilities in _Z are
        self.set_reg(reg)

    @property
    def newton(self) -> bool:
        """Whether :func:`fit_linear` minimises this objective with Newton's method."""
        return self.n_params <= NEWTON_MAX_PARAMS

    def set_reg(self, reg: Regularizer) -> None:
        """Use penalty *reg* from now on.

        For a Newton-sized map the penalty is evaluated through the Jacobian ``J`` of
        the linear map from ``theta`` to the entries ``e`` of ``(W, b)``: the value is
        ``sum(D * (e - T)**2)`` with the weights ``D`` and targets ``T`` of
        :meth:`Regularizer.weights`, the gradient ``J @ (2 D (e - T))`` and the Hessian
        ``R = 2 J diag(D) J'``, a constant.
        """
        self.reg = reg
        self._R: NDArray[np.float64] | None = None
        if reg.is_zero() or not self.newton:
            return
        k, d = self.k, self.d
        if self._J is None:  # (W, b) of each unit vector of theta
            W, b = self._wb_rows(np.eye(self.n_params))
            self._J = np.hstack([W.reshape(self.n_params, k * d), b])
        weight_W, target_W, weight_b = reg.weights(k, d)
        self._D = np.concatenate([weight_W.ravel(), weight_b])
        self._T = np.concatenate([target_W.ravel(), np.zeros(k)])
        self._R = 2.0 * ((self._J * self._D) @ self._J.T)

    # Parametrisation ---------------------------------------------------------

    def theta_from_wb(self, W: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
        """Map ``(W, b)`` on ``ln p`` to ``theta``."""
        if self.kind == "full":
            V = W * self.s[None, :]
            c = b + W @ self.m
            return np.hstack([V, c[:, None]]).ravel()
        if self.kind == "diagonal":
            w = np.diag(W)
            return np.concatenate([w * self.s, b + w * self.m])
        return np.array([float(np.mean(np.diag(W)))])

    def wb_from_theta(
        self, theta: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Map ``theta`` to ``(W, b)`` on ``ln p``."""
        W, b = self._wb_rows(theta[None, :])
        return W[0], b[0]

    def _wb_rows(
        self, thetas: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """:meth:`wb_from_theta` of each row of *thetas*: shapes (m, k, d) and (m, k)."""
        k, d = self.k, self.d
        if self.kind == "full":
            rows = thetas.reshape(-1, k, d + 1)
            W = rows[:, :, :d] / self.s
            return W, rows[:, :, d] - W @ self.m
        eye = np.eye(k)
        if self.kind == "diagonal":
            v = thetas[:, :k] / self.s
            return v[:, :, None] * eye, thetas[:, k:] - v * self.m
        return thetas[:, :1, None] * eye, np.zeros((thetas.shape[0], k))

    # Objective ---------------------------------------------------------------

    def _probabilities(self, theta: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        """Mean weighted NLL and the probabilities, (n_classes, n_samples), in a buffer.

        The buffer keeps the probabilities at ``theta`` until the next call, for
        :meth:`hessian`.
        """
        k = self.k
        Z = self._Z
        if self.kind == "full":
            np.matmul(theta.reshape(k, -1), self.Xt, out=Z)
        elif self.kind == "diagonal":
            np.multiply(self.Xt, theta[:k, None], out=Z)
            Z += theta[k:, None]
        else:
            np.multiply(self.Xt, theta[0], out=Z)
        Z -= Z.max(axis=0)
        zy = Z[self.y, self.cols]
        np.exp(Z, out=Z)
        sums = Z.sum(axis=0)
        value = float((np.log(sums) - zy) @ self.w)
        Z /= sums
        self._at = theta
        return value, Z

    def _penalty(self, theta: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        """Penalty and its gradient in ``theta``."""
        if self._R is not None and self._J is not None:  # both set by set_reg
            dev = theta @ self._J - self._T
            weighted = self._D * dev
            return float(weighted @ dev), self._J @ (2.0 * weighted)
        W, b = self.wb_from_theta(theta)
        r, gW, gb = self.reg.value_and_grad(W, b)
        return r, self._penalty_grad_to_theta(gW, gb)

    def __call__(self, theta: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        """Objective value and gradient at ``theta``."""
        value, Q = self._probabilities(theta)
        grad = self._grad(Q)
        if not self.reg.is_zero():
            r, g = self._penalty(theta)
            value += r
            grad += g
        return value, grad

    def hessian(self, theta: NDArray[np.float64]) -> tuple[NDArray[np.float64], float]:
        """Objective Hessian at ``theta`` and the scale of its NLL part (Newton-sized maps).

        The scale is the largest diagonal entry of the NLL Hessian: on standardised
        features it measures the curvature the data can give, whatever the penalty adds.
        The probabilities of the last evaluation are reused when it was at ``theta``
        (the same array), as in Newton's method, which needs the Hessian only where it
        continues.
        """
        Q = self._Z if theta is self._at else self._probabilities(theta)[1]
        hess = self._nll_hessian(Q)
        scale = float(hess.flat[:: hess.shape[0] + 1].max())
        if self._R is not None:
            hess += self._R
        return hess, scale

    def _grad(self, Q: NDArray[np.float64]) -> NDArray[np.float64]:
        """NLL gradient in ``theta``, through ``w_i (q_i - e_{y_i})`` (*Q* is kept)."""
        G = Q * self.w
        G[self.y, self.cols] -= self.w
        if self.kind == "full":
            grad: NDArray[np.float64] = (G @ self.Xt.T).ravel()
            return grad
        if self.kind == "diagonal":
            return np.concatenate([np.einsum("ij,ij->i", G, self.Xt), G.sum(axis=1)])
        return np.array([float(np.einsum("ij,ij->", G, self.Xt))])

    def _nll_hessian(self, Q: NDArray[np.float64]) -> NDArray[np.float64]:
        """NLL Hessian in ``theta``: ``sum_i w_i J_i' (diag(q_i) - q_i q_i') J_i``.

        ``J_i`` maps ``theta`` to the logits of sample ``i``. For the diagonal map the
        ``q_i q_i'`` part is ``U' U`` with ``U_i = sqrt(w_i) J_i' q_i``.
        """
        k = Q.shape[0]
        Qw = Q * self.w
        X = self.Xt
        if self.kind == "full":
            # H[(a, i), (b, j)] = sum_n w_n (q_a delta_ab - q_a q_b) x_i x_j: one product
            # of the distinct class pairs (a <= b) with the distinct feature pairs (i <= j).
            dt = self.d + 1
            pairs_k, pairs_k2, same, pairs_d, pairs_d2, flat, source = _full_hessian_layout(k, dt)
            if self._outer is None:  # x_i x_j of each sample, (distinct pairs, n)
                self._outer = X[pairs_d] * X[pairs_d2]
            C = Qw[pairs_k] * Q[pairs_k2]
            C *= -1.0
            C[same] += Qw
            H: NDArray[np.float64] = np.empty((k * dt, k * dt))
            H.flat[flat] = (C @ self._outer.T).ravel()[source]
            return H
        if self.kind == "diagonal":
            QX = Qw * X
            Qs = Q * np.sqrt(self.w)
            U = np.vstack([Qs * X, Qs]).T
            H = -(U.T @ U)
            idx = np.arange(k)
            H[idx, idx] += (QX * X).sum(axis=1)
            H[idx, idx + k] += QX.sum(axis=1)
            H[idx + k, idx] += QX.sum(axis=1)
            H[idx + k, idx + k] += Qw.sum(axis=1)
            return H
        qx = (Q * X).sum(axis=0)  # sum_a q_ia x_ia per sample
        return np.array([[float((Qw * X * X).sum() - self.w @ (qx * qx))]])

    def _penalty_grad_to_theta(
        self, gW: NDArray[np.float64], gb: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Chain rule from gradients in ``(W, b)`` to gradients in ``theta``."""
        if self.kind == "full":
            # W = V / s (columns), b = c - W m
            gV = gW / self.s[None, :] - np.outer(gb, self.m / self.s)
            return np.hstack([gV, gb[:, None]]).ravel()
        if self.kind == "diagonal":
            gv = (np.diag(gW) - gb * self.m) / self.s
            return np.concatenate([gv, gb])
        return np.array([float(np.trace(gW))])


@functools.lru_cache(maxsize=16)
def _full_hessian_layout(k: int, dt: int) -> tuple[NDArray[Any], ...]:
    """Return the index arrays that assemble the full map's Hessian.

    The (k dt, k dt) Hessian is built from its distinct entries ``M[(a, b), (i, j)]``
    with ``a <= b`` and ``i <= j``; the arrays are read-only and shared.

    Returns
    -------
    pairs_k, pairs_k2, same, pairs_d, pairs_d2, flat, source
        The class pairs, which of them have ``a == b``, the feature pairs, and where
        each entry of ``M`` goes in the flattened Hessian (four symmetric places).
    """
    pairs_k, pairs_k2 = np.triu_indices(k)
    pairs_d, pairs_d2 = np.triu_indices(dt)
    n_k, n_d = pairs_k.size, pairs_d.size
    ab = np.repeat(np.arange(n_k), n_d)
    ij = np.tile(np.arange(n_d), n_k)
    a, b, i, j = pairs_k[ab], pairs_k2[ab], pairs_d[ij], pairs_d2[ij]
    rows = np.concatenate([a * dt + i, a * dt + j, b * dt + i, b * dt + j])
    cols = np.concatenate([b * dt + j, b * dt + i, a * dt + j, a * dt + i])
    out = (
        pairs_k,
        pairs_k2,
        pairs_k == pairs_k2,
        pairs_d,
        pairs_d2,
        rows * (k * dt) + cols,
        np.tile(np.arange(n_k * n_d), 4),
    )
    for array in out:
        array.flags.writeable = False
    return out


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
    """Minimise the regularised mean NLL of ``softmax(W L + b)``.

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
        Maximum number of optimiser iterations.
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
    objective = LinearObjective(L, y, weights, kind, reg, n_classes)
    return minimise_linear(objective, max_iter=max_iter, tol=tol, owner=owner, init=init)


def minimise_linear(
    objective: LinearObjective,
    *,
    max_iter: int,
    tol: float,
    owner: str,
    init: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None,
) -> LinearFit:
    """Minimise *objective*: Newton's method up to :data:`NEWTON_MAX_PARAMS`, else L-BFGS-B.

    See :func:`fit_linear` for the arguments; a prepared objective lets a grid of
    penalties (:meth:`LinearObjective.set_reg`) share one standardisation.
    """
    k, d = objective.k, objective.d
    W0, b0 = init if init is not None else (np.eye(k, d), np.zeros(k))
    theta0 = objective.theta_from_wb(W0, b0)
    if objective.newton:
        try:
            theta, n_iter, loss = _newton(
                objective, theta0, max_iter=max_iter, tol=tol, owner=owner
            )
        except _NewtonStall as stall:
            # No Newton step decreases the objective (a Hessian that misleads far from the
            # optimum, e.g. on nearly separable folds): continue with L-BFGS-B from there.
            theta, n_iter, loss = _lbfgs(
                objective,
                stall.theta,
                max_iter=max(1, max_iter - stall.n_iter),  # one budget for both solvers
                tol=tol,
                owner=owner,
            )
            n_iter += stall.n_iter
    else:
        theta, n_iter, loss = _lbfgs(objective, theta0, max_iter=max_iter, tol=tol, owner=owner)
    W, b = objective.wb_from_theta(theta)
    return LinearFit(coef=W, intercept=b, n_iter=n_iter, loss=loss)


class _NewtonStall(RuntimeError):
    """Newton's method found no step that decreases the objective (carries where it stopped)."""

    def __init__(self, msg: str, theta: NDArray[np.float64], n_iter: int) -> None:
        super().__init__(msg)
        self.theta = theta
        self.n_iter = n_iter


def _lbfgs(
    objective: LinearObjective,
    theta0: NDArray[np.float64],
    *,
    max_iter: int,
    tol: float,
    owner: str,
) -> tuple[NDArray[np.float64], int, float]:
    """Minimise *objective* with L-BFGS-B from *theta0*; returns theta, n_iter, loss."""
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
    return result.x, int(result.nit), float(result.fun)


def _newton(
    objective: LinearObjective,
    theta: NDArray[np.float64],
    *,
    max_iter: int,
    tol: float,
    owner: str,
) -> tuple[NDArray[np.float64], int, float]:
    """Damped Newton's method with a backtracking (Armijo) line search.

    Stops when the largest gradient component is at most *tol*. A step whose effect on
    the objective is below float64 rounding is taken when it shrinks the gradient;
    when no step helps, the fit is accepted if the gradient is below
    :data:`_ABNORMAL_GRAD_TOLERANCE`, and :class:`_NewtonStall` is raised otherwise (the
    caller continues with L-BFGS-B).

    Returns
    -------
    theta, n_iter, loss
    """
    value, grad = objective(theta)
    _check_finite(value, owner)
    n_iter = 0
    while (largest := float(np.max(np.abs(grad)))) > tol:
        if n_iter >= max_iter:
            msg = (
                f"{owner} did not converge in max_iter={max_iter} iterations (largest "
                f"gradient component {largest:.3g} > tol={tol:g}). Increase max_iter, or add "
                "regularisation."
            )
            warnings.warn(msg, ConvergenceWarning, stacklevel=5)
            break
        step = _newton_step(*objective.hessian(theta), grad)
        slope = float(grad @ step)
        rounding = 16 * np.finfo(np.float64).eps * max(1.0, abs(value))
        accepted = None
        # A flat direction (no curvature, as in separable data) gives an enormous step:
        # cap its largest component, so that the map grows geometrically instead.
        cap = _MAX_STEP_GROWTH * max(1.0, float(np.max(np.abs(theta))))
        longest = float(np.max(np.abs(step)))
        t = 1.0 if longest <= cap else cap / longest
        for _ in range(_LINE_SEARCH_HALVINGS):
            trial = theta + t * step
            trial_value, trial_grad = objective(trial)
            if trial_value <= value + _ARMIJO * t * slope:
                accepted = (trial, trial_value, trial_grad)
                break
            if trial_value <= value + rounding:
                # The change is below float64 rounding: let the gradient decide.
                if np.max(np.abs(trial_grad)) < largest:
                    accepted = (trial, trial_value, trial_grad)
                break
            t *= 0.5
        if accepted is None:
            if largest <= _ABNORMAL_GRAD_TOLERANCE:
                break  # float64 cannot decrease the objective any further: converged
            msg = (
                f"{owner} failed to fit: Newton's method found no step that decreases the "
                f"objective (largest gradient component {largest:.3g})."
            )
            raise _NewtonStall(msg, theta, n_iter)
        theta, value, grad = accepted
        n_iter += 1
        _check_finite(value, owner)
    return theta, n_iter, value


def _newton_step(
    hess: NDArray[np.float64], scale: float, grad: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Solve ``(H + ridge I) step = -grad`` by Cholesky, raising the ridge if needed.

    The ridge starts at :data:`_NEWTON_RIDGE` times *scale*, the curvature of the NLL
    part, not of the penalty: a penalty made huge by a nearly constant feature must not
    drown the curvature of the other directions. The scale is at least 1 (standardised
    features), so that saturated probabilities (no curvature left) still give a finite
    step, which the caller caps.
    """
    diag = slice(None, None, hess.shape[0] + 1)  # the diagonal of the flattened matrix
    ridge = _NEWTON_RIDGE * max(scale, 1.0)
    for _ in range(12):
        shifted = hess.copy()
        shifted.flat[diag] += ridge
        _, step, info = dposv(shifted, -grad, lower=1, overwrite_a=1)
        if info == 0:
            return np.asarray(step, dtype=np.float64)
        ridge *= 100.0
    return -grad / ridge  # not even nearly positive semi-definite: a gradient step


def _check_finite(value: float, owner: str) -> None:
    """Raise ``RuntimeError`` when the objective is not finite (``theta`` is, then)."""
    if not math.isfinite(value):
        msg = f"{owner} failed to fit: the objective became non-finite."
        raise RuntimeError(msg)


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
        warnings.warn(msg, ConvergenceWarning, stacklevel=5)
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
