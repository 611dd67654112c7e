"""Learn-then-Test: p-values of "the risk exceeds α" and the family-wise choice of λ.

The exact binomial tail for a 0/1 loss and the Hoeffding–Bentkus bound for a loss in
[0, 1]; :func:`ltt_select` tests a strict-to-lenient grid of thresholds at level δ
(fixed-sequence or Bonferroni) and takes the most lenient one rejected. The uncorrected
:func:`naive_threshold` is kept for comparison. See :mod:`taskcal_agents.decision._risk_control`.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from taskcal_agents.decision._risk_curve import RiskCurve
from taskcal_agents.decision._risk_guard import RiskSpec, check_level
from taskcal_agents.errors import ConfigurationError

__all__ = [
    "DEFAULT_GRID",
    "binomial_pvalues",
    "check_grid",
    "hoeffding_bentkus_pvalues",
    "ltt_select",
    "naive_threshold",
]

DEFAULT_GRID: NDArray[np.float64] = np.round(np.linspace(1.0, 0.0, 101), 2)
"""The thresholds tested, strict to lenient: 1.00, 0.99, …, 0.00 (0: plain MBR)."""


def binomial_pvalues(n_loss: ArrayLike, n: ArrayLike, alpha: float) -> NDArray[np.float64]:
    """P-values of H0: risk > α for 0/1 losses: ``P(Bin(n, α) <= n_loss)`` (1 where n = 0)."""
    k = np.asarray(n_loss, dtype=np.float64)
    n_ = np.asarray(n)
    p = stats.binom.cdf(np.round(k), np.maximum(n_, 1), alpha)
    return np.where(n_ > 0, p, 1.0).astype(np.float64)


def hoeffding_bentkus_pvalues(risk: ArrayLike, n: int, alpha: float) -> NDArray[np.float64]:
    """P-values of H0: risk > α for losses in [0, 1] (Bates et al. 2021, Hoeffding–Bentkus).

    ``min(exp(−n·h1(min(R̂, α), α)), e·P(Bin(n, α) <= ⌈n·R̂⌉))`` with
    ``h1(a, b) = a·log(a/b) + (1 − a)·log((1 − a)/(1 − b))``.
    """
    r_hat = np.asarray(risk, dtype=np.float64)
    if n <= 0:
        return np.ones_like(r_hat)
    r = np.minimum(r_hat, alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        h1 = np.where(r > 0, r * np.log(r / alpha), 0.0) + (1 - r) * np.log((1 - r) / (1 - alpha))
    hoeffding = np.exp(-n * h1)
    bentkus = math.e * stats.binom.cdf(np.ceil(np.round(n * r_hat, 9)), n, alpha)
    p: NDArray[np.float64] = np.minimum(np.minimum(hoeffding, bentkus), 1.0).astype(np.float64)
    return p


def check_grid(grid: ArrayLike | None) -> NDArray[np.float64]:
    """The thresholds to test (default :data:`DEFAULT_GRID`), checked strict to lenient."""
    lam = DEFAULT_GRID if grid is None else np.asarray(grid, dtype=np.float64)
    if lam.ndim != 1 or lam.size == 0 or not np.all(np.isfinite(lam)) or np.any(np.diff(lam) >= 0):
        msg = "the risk control grid must be a non-empty, finite, strictly decreasing 1-d array."
        raise ConfigurationError(msg)
    return lam


def ltt_select(
    spec: RiskSpec, curve: RiskCurve, delta: float
) -> tuple[NDArray[np.intp], NDArray[np.float64], str]:
    """Learn-then-Test on a risk curve over a strict-to-lenient grid.

    Args:
        spec: The risk and α.
        curve: The risk curve at the grid (strictly decreasing thresholds; any batch axes).
        delta: The level δ.

    Returns:
        Per calibration set (the curve's batch axes): the index of the most lenient
        rejected threshold (-1: none rejected), the p-values (..., m), and the method.

    Raises:
        ConfigurationError: If δ is not in (0, 1) or the thresholds are not a non-empty,
            finite, strictly decreasing grid.
    """
    delta = check_level(delta, "risk control delta δ")
    m = check_grid(curve.thresholds).size
    if spec.kind == "cost":
        p = hoeffding_bentkus_pvalues(curve.risk, curve.n, spec.alpha)
    else:
        p = binomial_pvalues(curve.n_loss, curve.n_taken, spec.alpha)
    if spec.kind == "when_not":
        rejected = np.logical_and.accumulate(p <= delta, axis=-1)
        method = "ltt-binomial-fixed-sequence"
    else:
        rejected = p <= delta / m
        test = "hoeffding-bentkus" if spec.kind == "cost" else "binomial"
        method = f"ltt-{test}-bonferroni"
    last = m - 1 - np.argmax(rejected[..., ::-1], axis=-1)
    index = np.where(rejected.any(axis=-1), last, -1).astype(np.intp)
    return index, p, method


def naive_threshold(curve: RiskCurve, alpha: float) -> NDArray[np.intp]:
    """The uncorrected baseline: the most lenient threshold with empirical risk <= α.

    No test and no multiplicity correction, so its true risk is above α about half the
    time where the limit binds; kept as the comparison for :func:`ltt_select` (tests and
    ``benchmarks/bench_risk_control.py``), not for deployment.

    Returns:
        Per calibration set (the curve's batch axes), the threshold index (-1: none).
    """
    ok = curve.risk <= alpha
    last = ok.shape[-1] - 1 - np.argmax(ok[..., ::-1], axis=-1)
    return np.where(ok.any(axis=-1), last, -1).astype(np.intp)
