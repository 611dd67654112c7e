"""The linear map ``softmax(W ln p + b)`` on log-probabilities and the objective of its fit.

The three families of this module, fitted by :class:`~calibrators.VectorScaling`,
:class:`~calibrators.MatrixScaling` and :class:`~calibrators.DirichletCalibrator`,
compute ``q = softmax(W ln p + b)`` with a clipped ``ln p``. They differ only in the
shape of ``W`` and in the regulariser:

- ``"full"``: ``W`` is any (k, d) matrix, ``b`` any vector (matrix scaling). The input
  ``p`` has ``d >= k`` columns: one per class, then extra input columns (such as the
  share of unparsed samples) that the map reads but does not predict.
- ``"diagonal"``: ``W = diag(w)``, ``b`` any vector (vector scaling); ``d = k``.
- ``"fixed_diagonal"``: ``W = a I``, ``b = 0`` (temperature scaling of ``ln p``); ``d = k``.

The objective (:class:`LinearObjective`) is the weighted mean negative log-likelihood plus
an optional regulariser (:class:`Regularizer`), with its analytic gradient and, for maps
of at most :data:`NEWTON_MAX_PARAMS` parameters, its exact Hessian. It works on
standardised features ``(ln p - mean) / std``, which makes the problem well conditioned,
and maps a solution back to ``W`` and ``b`` on ``ln p``. It is convex; the L2 penalty and
ODIR with both strengths positive make it strictly convex. The solver that minimises it
is :mod:`calibrators._linear_solver`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from calibrators._base import softmax

KINDS = ("full", "diagonal", "fixed_diagonal")

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
