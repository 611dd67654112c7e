"""The solver of the linear maps: minimise their objective, a :class:`LinearObjective`.

The objective is minimised with Newton's method (exact Hessian, Cholesky solve,
backtracking line search) for maps with at most
:data:`~calibrators._linear_objective.NEWTON_MAX_PARAMS` parameters, and with scipy's
L-BFGS-B using analytic gradients for larger ones. The solver starts at the identity map
(``W = [I | 0]``, ``b = 0``: the extra columns start ignored), on the objective's
standardised features. Both stop when the largest gradient component falls below ``tol``
and reach the same minimiser when there is one. When the data are separable along an
unpenalised direction (no penalty, or ODIR's free diagonal) the infimum is not attained
and the fitted map depends on where the optimiser stops. Everything is deterministic.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.linalg.lapack import dposv
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning

from calibrators._linear_objective import LinearObjective, Regularizer

_ABNORMAL_GRAD_TOLERANCE = 1e-4
"""A fit that cannot decrease the objective any further is accepted when the gradient
is this small.

Such stalls (an L-BFGS-B line-search failure, or a Newton step whose effect is below
float64 rounding and does not shrink the gradient) mean that float64 cannot decrease the
objective any further. With a larger gradient a Newton stall hands over to L-BFGS-B from
where it stopped; an L-BFGS-B failure means the optimiser really failed, and ``fit`` raises
``RuntimeError``.
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


@dataclass
class LinearFit:
    """Result of :func:`fit_linear`."""

    coef: NDArray[np.float64]
    intercept: NDArray[np.float64]
    n_iter: int
    loss: float


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
