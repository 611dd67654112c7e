"""The monitor's tests under calibration: what a window's statistics are when ``y_i ~ q_i``.

The null hypothesis of the gaps (``cost_gap``, ``nll_gap``) and of the ECE reference is
calibration itself: each outcome is drawn from its logged belief. :func:`gap_estimate`
gives a gap's window mean, its SE under that null and the normal-equivalent z of the
window's sum by the Lugannani–Rice saddlepoint approximation (:func:`saddlepoint_z`);
:func:`ece_estimate` the classwise ECE and the ECE of calibrated beliefs of the same window
("consistency resampling"). :class:`Estimate` and :class:`Reference` are the values the
monitor's metrics compare. The method and its measured false-alarm rates: ``docs/production.md``
("What the monitor tests").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtri_exp

from calibrators.metrics import classwise_ece

__all__ = [
    "SERIES_BELOW",
    "Estimate",
    "Reference",
    "ece_estimate",
    "gap_estimate",
    "saddlepoint_z",
]


@dataclass(frozen=True)
class Estimate:
    """A metric's value in one window (``None`` without data), its SE and item count."""

    value: float | None
    se: float  # SE of the value itself
    n: int
    reference: Reference | None = None  # its own reference (the ECE of calibrated q)
    z: float | None = None  # the z of a test of its own (the gaps); None: (value - ref) / SE


@dataclass(frozen=True)
class Reference:
    """What a metric is compared with, and where it comes from (``source``)."""

    value: float
    source: str
    n: int | None = None  # None: SE unknown (treated as exact)
    se: float | None = None


_PHI_TAYLOR = 1.0 / np.array([math.factorial(j) for j in range(2, 18)])


def _expm1_minus(u: NDArray[np.float64], em1: NDArray[np.float64]) -> NDArray[np.float64]:
    """``e^u - 1 - u`` (``em1 = expm1(u)``) to full relative precision, also as ``u -> 0``.

    ``expm1(u) - u`` cancels for small ``|u|`` (``e^u - 1 - u ≈ u² / 2``): there it is
    summed as its Taylor series, ``sum_{j>=2} u^j / j!`` (to ``j = 17``, exact to rounding
    for ``|u| <= 1/2``).
    """
    small = np.abs(u) <= 0.5
    series = np.zeros_like(u)
    for c in _PHI_TAYLOR[::-1]:  # Horner in u, then times u²
        series = series * u + c
    return np.where(small, series * u * u, em1 - u)


def _cgf(
    q: NDArray[np.float64], log_q: NDArray[np.float64], x: NDArray[np.float64], t: float
) -> tuple[float, float, float]:
    """The cumulant generating function K(t) of a sum of independent items and K', K''.

    Item *i* takes the value ``x[i, l]`` with probability ``q[i, l]`` (``log_q`` its log,
    ``-inf`` off the support) and has mean 0. Each item's ``K_i(t)`` is computed centred,
    ``log1p(sum_l q_l (e^{t x_l} - 1 - t x_l))`` (:func:`_expm1_minus`), which keeps its
    relative precision as ``t -> 0`` (``K_i = O(t²)``: the log of a sum of exponentials of
    O(1) terms loses it, and ``2 (t K' - K)``, the saddlepoint's ``r²``, with it); an item
    with ``t x`` large (where ``expm1`` could overflow) is computed as a log-sum-exp.
    """
    tx = np.where(q > 0, t * x, 0.0)
    em1 = np.expm1(np.minimum(tx, 50.0))  # past 30: overwritten below
    excess = np.sum(q * _expm1_minus(tx, em1), axis=1)  # sum_l q (e^{tx} - 1 - tx) >= 0
    norm = 1.0 + excess  # sum_l q e^{tx}, as sum_l q x = 0; at least 1 (K_i >= 0)
    k_item = np.log1p(excess)
    mean = np.sum(q * x * em1, axis=1) / norm  # the terms share the sign of t: no cancelling
    second = np.sum(q * x * x * (1.0 + em1), axis=1) / norm
    big = np.max(np.where(q > 0, tx, -np.inf), axis=1) > 30.0
    if big.any():  # the tilted distribution from a log-sum-exp
        a = log_q[big] + tx[big]
        top = a.max(axis=1, keepdims=True)
        w = np.exp(a - top)
        total = w.sum(axis=1, keepdims=True)
        w /= total
        xb = x[big]
        k_item[big] = top[:, 0] + np.log(total[:, 0])
        mean[big] = np.sum(w * xb, axis=1)
        second[big] = np.sum(w * xb * xb, axis=1)
    var = np.maximum(second - mean**2, 0.0)
    return float(k_item.sum()), float(mean.sum()), float(var.sum())


SERIES_BELOW = 1e-3
"""Below this ``|w| (1 + |γ₁| + √|γ₂|)`` (``w`` the standardised sum, ``γ₁``, ``γ₂`` the
sum's skewness and excess kurtosis) :func:`saddlepoint_z` returns the limit of ``r*`` at
the mean (:func:`_near_mean_z`, the same expansion through first order in ``w``) instead
of solving for the saddlepoint: there ``r`` and ``u`` are equal to many digits and
``log(u / r) / r``, a ratio of two vanishing quantities, loses them. At the switch the
two differ by less than ``1e-6`` on the skewed sums of the unit tests, which check that
z is continuous and monotone across it."""


def saddlepoint_z(q: NDArray[np.float64], x: NDArray[np.float64], total: float) -> float:
    """The normal-equivalent z of an observed sum of independent, centred items.

    Item *i* takes the value ``x[i, l]`` with probability ``q[i, l]`` and mean 0; *total*
    is the observed sum. Returns ``Φ⁻¹`` of the sum's tail probability at *total* by the
    Lugannani–Rice saddlepoint approximation, in Barndorff-Nielsen's form
    ``r* = r + log(u / r) / r`` (``r`` the signed root of the likelihood ratio at the
    saddlepoint ``t̂``, ``K'(t̂) = total``, and ``u = t̂ √K''(t̂)``): accurate far into the
    tails of a skewed sum, where the normal approximation of the mean is not. For a
    continuous sum that is ``Φ⁻¹(P(sum ≤ total))``; this uncorrected form applied to a
    discrete sum (a lattice: integer costs) approximates the mid-p,
    ``Φ⁻¹(P(sum < total) + P(sum = total) / 2)``. Near the mean (``|w|`` small, see
    :data:`SERIES_BELOW`) it is the limit of ``r*`` there,
    ``w − γ₁(w² − 1)/6 − γ₂(w³ − 3w)/24 + γ₁²(4w³ − 7w)/36`` (``w = total / sd``), which
    is ``γ₁ / 6`` at the mean itself, not 0: a right-skewed sum's median lies below its
    mean. At an end of the support (every item at its least, or its greatest, value: an
    atom of probability ``p``) ``Φ⁻¹(p)``, or ``−Φ⁻¹(p)``; ``±inf`` for a sum the items
    cannot reach.
    """
    support = q > 0
    k2 = float(np.sum(q * x * x))
    scale = math.sqrt(k2)
    if scale == 0.0:
        return 0.0 if total == 0 else math.copysign(math.inf, total)
    z0 = total / scale
    tol = 1e-9 * (1.0 + float(np.max(np.abs(x[support])))) * x.shape[0]
    for sign in (1.0, -1.0):  # the greatest, then the least, sum the items can reach
        end = sign * np.max(np.where(support, sign * x, -np.inf), axis=1)
        past = sign * (total - float(np.sum(end)))
        if past > tol:
            return math.copysign(math.inf, sign)  # impossible under q
        if past > -tol:  # every item at its end: an atom
            at_end = support & (np.abs(x - end[:, None]) <= tol)
            log_p = float(np.sum(np.log(np.sum(np.where(at_end, q, 0.0), axis=1))))
            return -sign * float(ndtri_exp(log_p))
    x2 = q * x * x
    g1 = float(np.sum(x2 * x)) / k2**1.5
    g2 = float(np.sum(np.sum(x2 * x * x, axis=1) - 3.0 * np.sum(x2, axis=1) ** 2)) / k2**2
    if abs(z0) * (1.0 + abs(g1) + math.sqrt(abs(g2))) < SERIES_BELOW:
        return _near_mean_z(z0, g1, g2)
    log_q = np.where(support, np.log(np.where(support, q, 1.0)), -np.inf)
    t, below, above = z0 / scale, -math.inf, math.inf  # K'(t) < total below, > above
    k = k1 = kk = 0.0
    for _ in range(200):
        k, k1, kk = _cgf(q, log_q, x, t)
        if abs(k1 - total) <= 1e-14 * abs(total):
            break
        if k1 < total:
            below = t
        else:
            above = t
        step = t - (k1 - total) / kk if kk > 0 else math.nan
        if below < step < above:
            if abs(step - t) <= 1e-14 * abs(t):
                break  # at the precision of K'
            t = step
        elif math.isfinite(below) and math.isfinite(above):
            t = 0.5 * (below + above)
        else:  # widen towards the missing side of the bracket
            t = 2.0 * t if (t > 0) == (k1 < total) else 0.5 * t
    r = math.copysign(math.sqrt(max(2.0 * (t * total - k), 0.0)), t)
    u = t * math.sqrt(kk)
    if r == 0.0 or u / r <= 0:
        return _near_mean_z(z0, g1, g2)
    return r + math.log(u / r) / r


def _near_mean_z(w: float, g1: float, g2: float) -> float:
    """The saddlepoint z near the mean: the Cornish–Fisher inverse, ``r*`` expanded at 0."""
    return (
        w
        - g1 * (w * w - 1.0) / 6.0
        - g2 * (w**3 - 3.0 * w) / 24.0
        + g1 * g1 * (4.0 * w**3 - 7.0 * w) / 36.0
    )


def gap_estimate(q: NDArray[np.float64], x: NDArray[np.float64], y: NDArray[np.intp]) -> Estimate:
    """A gap's window mean, its SE and z under calibration (``y_i ~ q_i``), not assuming normality.

    *x* holds each item's term per outcome label (mean 0 under its own ``q``). The SE is
    the null SE ``sqrt(sum_i Var_q(x_i)) / n``, whatever the outcomes (on a drifted stream
    too); z is :func:`saddlepoint_z` of the sum.
    """
    n = y.size
    if n == 0:
        return Estimate(None, math.nan, 0)
    observed = x[np.arange(n), y]
    centre = np.sum(q * x, axis=1)  # 0 up to rounding
    x = x - centre[:, None]
    total = float(np.sum(observed - centre))
    se = math.sqrt(float(np.sum(q * x * x))) / n
    return Estimate(float(observed.mean()), se, n, z=saddlepoint_z(q, x, total))


def ece_estimate(y: NDArray[np.intp], Q: NDArray[np.float64], n_boot: int, seed: int) -> Estimate:
    """The classwise ECE of a window's outcomes *y* and beliefs *Q*, and its own reference.

    The reference is the ECE the same beliefs would show if they were calibrated: its value
    and SE are the mean and standard deviation of the ECE over *n_boot* seeded draws of
    outcomes from *Q* itself ("consistency resampling").
    """
    if y.size == 0:
        return Estimate(None, math.nan, 0)
    value = float(classwise_ece(y, Q))
    if y.size < 2 or n_boot < 2:
        return Estimate(value, math.inf, int(y.size))
    rng = np.random.default_rng(seed)
    cum = np.cumsum(Q, axis=1)
    null = [
        float(classwise_ece((rng.random((y.size, 1)) > cum[:, :-1]).sum(axis=1), Q))
        for _ in range(n_boot)
    ]  # outcomes drawn from q itself: the ECE of calibrated beliefs at this window size
    ref = Reference(float(np.mean(null)), "calibrated q", None, float(np.std(null, ddof=1)))
    return Estimate(value, 0.0, int(y.size), ref)
