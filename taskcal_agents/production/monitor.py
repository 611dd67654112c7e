"""Drift monitor: does the deployed calibrator still predict what happens?

:func:`monitor` reads decision-log records (:meth:`~taskcal_agents.production.DecisionLog.read`)
and, per window of decisions, compares what the system predicted with what happened. Per
labelled decision *i* with outcome ``y_i``, action ``a_i``, calibrated belief ``q_i`` and
cost matrix ``C`` (of the task, not the record):

* ``cost_gap``: mean of ``d_i = C[y_i, a_i] - e_i[a_i]`` with ``e_i`` the expected costs
  under ``q_i`` (:func:`calibrators.expected_costs`, the one decision kernel). A
  calibrated system predicts its own cost, so ``E[d] = 0`` (reference 0, two-sided;
  tested under calibration itself, see Statistics).
* ``nll``: mean ``-log q_i[y_i]`` vs the artefact's cross-validated fit-time NLL (up).
* ``nll_gap``: mean of ``g_i = -log q_i[y_i] - H(q_i)``; ``E[g] = 0`` when ``q`` is
  calibrated (reference 0, two-sided: over- and underconfidence both show; tested as
  ``cost_gap``).
* ``classwise_ece``: :func:`calibrators.metrics.classwise_ece` of the window vs the
  ECE the same beliefs would show if they were calibrated (up): the reference and its
  SE are the mean and standard deviation of the ECE over ``n_boot`` seeded draws of
  outcomes from the window's own ``q`` ("consistency resampling"). A binned ECE is
  biased upward, the more so the fewer items, so a window is never compared with the
  fit-time value (measured on another number of items): that comparison alarmed in
  most windows of an unchanged stream (the drift benchmark).
* ``label_prior:<label>``: the share of each outcome label vs the fit-time prior
  (two-sided; one row per label, so the table says *which* label moved). It is computed
  on the labelled decisions only: outcomes that arrive for some decisions only (a review
  queue, failures reported by a tool) bias it.
* ``unparsed_rate``: mean per decision of ``n_unparsed / n_samples`` over **all**
  decisions (labelled or not), vs fit time (up).
* ``fallback_rate``: share of fallback decisions over **all** decisions, vs fit time (up).

The labelled metrics use the served (non-fallback) decisions only: a fallback action is
not chosen from ``q``, and its rate is monitored on its own.

References: the artefact's ``fit_metrics`` when they record the value (for NLL the
``holdout`` scores of a refit, else ``crossval``; ``label_prior``, ``unparsed_rate``,
``fallback_rate``), otherwise the first window
(which is then shown as the reference, never alarmed). ``cost_gap`` and ``nll_gap``
always have the theoretical reference 0, ``classwise_ece`` the resampled ECE of
calibrated beliefs.

Statistics: the SE of a mean is ``std / sqrt(n)``, of a share the binomial SE at the
pooled share (plus ½ a count, so a zero rate does not give a zero SE). A difference from
a reference adds the reference's SE when its ``n`` is known. ``z = (value - reference) / SE``,
except for the two gaps: their null hypothesis, calibration, says each outcome is drawn
from its belief (``y_i ~ q_i``), which fixes the distribution of a window's sum of
``d_i`` (of ``g_i``) given its beliefs. Their SE is the SE under it,
``sqrt(sum_i Var_{q_i}(d_i)) / n``: the null SE, which a report shows on a drifted
stream too, where the window's mean varies by another amount. Their z is the normal
equivalent of the sum's tail probability under it, by the Lugannani–Rice saddlepoint
approximation (``_saddlepoint_z``), which allows for the skew of the terms (most
decisions cost nothing and a few much; most outcomes are expected, a few surprise). It is
an approximation, not an exactly standard normal z: with integer costs the sum of ``d_i``
lies on a lattice, where it approximates the z of the mid-p ``P(S < s) + P(S = s) / 2``
(the unit tests: within 0.06 for a binomial sum of 200 items, 0.03 for an enumerated
window of 12), so there z takes discrete values and its alarm rate is only about the
nominal one; at the mean itself z is ``γ₁ / 6`` (the sum's skewness over 6), not 0. The
plain ``mean / (std / sqrt(n))`` of such terms has a heavy lower tail (a window without a
rare costly outcome has a low mean *and* a low std). ``benchmarks/bench_monitor_null.py``
compares the two on the same windows of 200 with outcomes drawn from the logged beliefs
(the gaps' own null): over its 50,000 redrawn windows per run (two runs, seeds 0–49 and
50–99) the saddlepoint z alarmed in 0.24–0.26 % of the windows for ``cost_gap`` and
0.28–0.29 % for ``nll_gap``, about evenly on both sides, against 0.27 % nominal; the
plain z in 0.58–0.60 % and 0.72–0.73 %, nearly all below −3. An alarm is
``z > threshold`` (``|z|`` for two-sided metrics) in a window with at least ``min_n``
items (labelled decisions for the labelled metrics, decisions for the rates). The default
threshold 3 rather than 2: a report tests about ``6 + k`` metrics per window over several
windows, and a two-SE rule (p ≈ 0.05 per test) would alarm by chance in most reports; at
``z = 3`` (p ≈ 0.003 two-sided) ten tests per window give a false alarm in about 3 % of
windows. ``benchmarks/bench_monitor_null.py`` measures the false-alarm rate of each metric
and side on stationary streams, the drift benchmark that of whole streams.

For streams (the drift benchmark) :func:`first_alarm` slides a trailing window over the
records and returns the index of the first decision at which it alarms.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtri_exp

from calibrators import expected_costs
from calibrators.metrics import classwise_ece
from taskcal_agents.errors import ConfigurationError, DataFileError, LabelMismatchError
from taskcal_agents.production.decision_log import record_belief
from taskcal_agents.production.monitor_report import (
    MetricResult,
    MonitorReport,
    Sided,
    WindowResult,
)

if TYPE_CHECKING:
    from taskcal_agents.decision.artefact import CalibratorArtefact
    from taskcal_agents.decision.task import Task

__all__ = [
    "first_alarm",
    "monitor",
    "monitor_log",
    "parse_window",
]

DEFAULT_Z = 3.0
DEFAULT_MIN_N = 30
EPS = 1e-12
"""Probabilities are clipped to ``[EPS, 1]`` before the log (as :func:`calibrators.metrics.nll`)."""

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_window(window: int | str | None) -> int | float | None:
    """A window as a count of decisions (``int``) or a duration in seconds (``float``).

    Accepts ``None`` (one window: the whole log), a positive int, or a string: digits
    (``"200"``, a count) or digits with a unit ``s``, ``m``, ``h``, ``d``, ``w``
    (``"24h"``, ``"7d"``, a duration).

    Raises:
        ConfigurationError: Anything else.
    """
    if window is None:
        return None
    if isinstance(window, int) and not isinstance(window, bool) and window > 0:
        return window
    if isinstance(window, str):
        match = re.fullmatch(r"\s*(\d+)\s*([smhdw]?)\s*", window.lower())
        if match and int(match[1]) > 0:
            n, unit = int(match[1]), match[2]
            return n if not unit else float(n * _UNITS[unit])
    msg = (
        f"monitor window must be a positive count of decisions (200) or a duration "
        f"(30m, 24h, 7d, 2w), got {window!r}."
    )
    raise ConfigurationError(msg)


# --------------------------------------------------------------------------------------
# report


# --------------------------------------------------------------------------------------
# arrays


@dataclass(frozen=True)
class _Stream:
    """The records as arrays (one row per decision, in log order)."""

    Q: NDArray[np.float64]  # calibrated beliefs (n, k)
    y: NDArray[np.intp]  # outcome label index, -1 when unlabelled
    a: NDArray[np.intp]  # action index
    fallback: NDArray[np.bool_]
    unparsed: NDArray[np.float64]  # n_unparsed / n_samples, nan without samples
    n_samples: NDArray[np.float64]
    t: NDArray[np.float64]  # POSIX seconds, nan when unknown
    times: tuple[str | None, ...]
    cost: NDArray[np.float64]  # (k, m)

    @property
    def n(self) -> int:
        return int(self.y.size)


def _time(value: Any) -> float:
    if not isinstance(value, str):
        return math.nan
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return math.nan


def _stream(records: Sequence[Mapping[str, Any]], task: Task, source: str | None = None) -> _Stream:
    labels = list(task.labels)
    k, n = len(labels), len(records)
    Q = np.empty((n, k))
    y = np.full(n, -1, dtype=np.intp)
    a = np.empty(n, dtype=np.intp)
    fallback = np.zeros(n, dtype=bool)
    unparsed = np.full(n, np.nan)
    n_samples = np.zeros(n)
    for i, r in enumerate(records):
        where = f"decision {r.get('id')!r} (record {i})"
        if r.get("task") != task.name:
            msg = (
                f"monitor: {where} is for task {r.get('task')!r}, not {task.name!r}; pass the "
                "artefact or task file of the logged task, or a log of this task."
            )
            raise ConfigurationError(msg)
        if list(r.get("labels") or []) != labels:
            msg = (
                f"monitor: {where} has labels {r.get('labels')!r}, but task {task.name!r} has "
                f"{labels!r}; the log was written for other labels (or another label order)."
            )
            raise LabelMismatchError(msg, expected=labels, got=list(r.get("labels") or []))
        Q[i] = record_belief(r, "calibrated", labels, source=source)
        try:
            a[i] = task.action_index(str(r.get("action")))
            if r.get("outcome") is not None:
                y[i] = task.label_index(str(r["outcome"]))
            m = float(r.get("n_samples") or 0)
            u = float(r.get("n_unparsed") or 0)
        except (KeyError, TypeError, ValueError) as exc:
            msg = f"monitor: {where} is not a usable decision record ({exc})."
            raise DataFileError(msg, path=source or "<decision log>") from exc
        if not (math.isfinite(m) and m >= 0 and math.isfinite(u) and 0 <= u <= max(m, 0)):
            msg = f"monitor: {where} has n_unparsed {u:g} of n_samples {m:g}."
            raise DataFileError(msg, path=source or "<decision log>")
        fallback[i] = bool(r.get("fallback"))
        n_samples[i] = m
        if m > 0:
            unparsed[i] = u / m
    times = tuple(r.get("time") for r in records)
    t = np.array([_time(v) for v in times]) if n else np.empty(0)
    cost = np.asarray(task.cost_matrix(), dtype=np.float64)
    return _Stream(Q, y, a, fallback, unparsed, n_samples, t, times, cost)


# --------------------------------------------------------------------------------------
# statistics


@dataclass(frozen=True)
class _Estimate:
    value: float | None
    se: float  # SE of the value itself
    n: int
    reference: _Reference | None = None  # its own reference (the ECE of calibrated q)
    z: float | None = None  # the z of a test of its own (the gaps); None: (value - ref) / SE


def _mean(x: NDArray[np.float64]) -> _Estimate:
    if x.size == 0:
        return _Estimate(None, math.nan, 0)
    se = float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else math.inf
    return _Estimate(float(x.mean()), se, int(x.size))


def _served_labelled(s: _Stream, idx: NDArray[np.intp]) -> NDArray[np.intp]:
    return idx[(s.y[idx] >= 0) & ~s.fallback[idx]]


def _item_terms(
    s: _Stream, idx: NDArray[np.intp]
) -> tuple[NDArray[np.float64], dict[str, NDArray[np.float64]]]:
    """Per item and outcome label, what each term would be: the NLL and the two gaps, (n, k).

    The observed term of item *i* is its column ``y_i``; under calibration (``y_i ~ q_i``)
    each gap has mean 0 per item.
    """
    Q = s.Q[idx]
    rows = np.arange(idx.size)
    e = expected_costs(Q, s.cost, check_input=False)[rows, s.a[idx]]
    surprise = -np.log(np.clip(Q, EPS, 1.0))
    entropy = np.sum(Q * surprise, axis=1)
    return Q, {
        "cost_gap": s.cost[:, s.a[idx]].T - e[:, None],
        "nll": surprise,
        "nll_gap": surprise - entropy[:, None],
    }


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


_SERIES_BELOW = 1e-3
"""Below this ``|w| (1 + |γ₁| + √|γ₂|)`` (``w`` the standardised sum, ``γ₁``, ``γ₂`` the
sum's skewness and excess kurtosis) :func:`_saddlepoint_z` returns the limit of ``r*`` at
the mean (:func:`_near_mean_z`, the same expansion through first order in ``w``) instead
of solving for the saddlepoint: there ``r`` and ``u`` are equal to many digits and
``log(u / r) / r``, a ratio of two vanishing quantities, loses them. At the switch the
two differ by less than ``1e-6`` on the skewed sums of the unit tests, which check that
z is continuous and monotone across it."""


def _saddlepoint_z(q: NDArray[np.float64], x: NDArray[np.float64], total: float) -> float:
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
    :data:`_SERIES_BELOW`) it is the limit of ``r*`` there,
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
    if abs(z0) * (1.0 + abs(g1) + math.sqrt(abs(g2))) < _SERIES_BELOW:
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


def _gap(q: NDArray[np.float64], x: NDArray[np.float64], y: NDArray[np.intp]) -> _Estimate:
    """A gap's window mean, its SE and z under calibration (``y_i ~ q_i``), not assuming normality.

    *x* holds each item's term per outcome label (mean 0 under its own ``q``). The SE is
    the null SE ``sqrt(sum_i Var_q(x_i)) / n``, whatever the outcomes (on a drifted stream
    too); z is :func:`_saddlepoint_z` of the sum.
    """
    n = y.size
    if n == 0:
        return _Estimate(None, math.nan, 0)
    observed = x[np.arange(n), y]
    centre = np.sum(q * x, axis=1)  # 0 up to rounding
    x = x - centre[:, None]
    total = float(np.sum(observed - centre))
    se = math.sqrt(float(np.sum(q * x * x))) / n
    return _Estimate(float(observed.mean()), se, n, z=_saddlepoint_z(q, x, total))


def _ece(s: _Stream, idx: NDArray[np.intp], n_boot: int, seed: int) -> _Estimate:
    if idx.size == 0:
        return _Estimate(None, math.nan, 0)
    y, Q = s.y[idx], s.Q[idx]
    value = float(classwise_ece(y, Q))
    if idx.size < 2 or n_boot < 2:
        return _Estimate(value, math.inf, int(idx.size))
    rng = np.random.default_rng(seed)
    cum = np.cumsum(Q, axis=1)
    null = [
        float(classwise_ece((rng.random((idx.size, 1)) > cum[:, :-1]).sum(axis=1), Q))
        for _ in range(n_boot)
    ]  # outcomes drawn from q itself: the ECE of calibrated beliefs at this window size
    ref = _Reference(float(np.mean(null)), "calibrated q", None, float(np.std(null, ddof=1)))
    return _Estimate(value, 0.0, int(idx.size), ref)


def _share(x: NDArray[np.float64]) -> _Estimate:
    """A share (``x`` in [0, 1] per item); SE added later at the pooled share."""
    if x.size == 0:
        return _Estimate(None, math.nan, 0)
    return _Estimate(float(x.mean()), math.nan, int(x.size))


@dataclass(frozen=True)
class _Reference:
    value: float
    source: str
    n: int | None = None  # None: SE unknown (treated as exact)
    se: float | None = None


def _compare(
    name: str,
    est: _Estimate,
    ref: _Reference | None,
    *,
    sided: Sided,
    z: float,
    min_n: int,
    binomial: bool = False,
    floor: float = 0.0,
) -> MetricResult:
    """One metric vs its reference.

    ``binomial``: a share, SE at the pooled share; ``floor``: the least SE (an all-zero
    window of a rate has sample SE 0).
    """
    if est.value is None:
        return MetricResult(
            name,
            None,
            None,
            None if ref is None else ref.value,
            "-" if ref is None else ref.source,
            None,
            0,
            sided,
            "no data",
        )
    if ref is None:
        return MetricResult(name, est.value, None, None, "-", None, est.n, sided, "reference")
    if binomial:  # a share: binomial SE at the pooled share, ½ count added
        n_ref = ref.n or 0
        pooled = (est.value * est.n + ref.value * n_ref + 0.5) / (est.n + n_ref + 1)
        var = pooled * (1 - pooled)
        se2 = var / est.n + (var / n_ref if n_ref else 0.0)
    else:
        ref_se = ref.se if ref.se is not None else 0.0
        se2 = est.se**2 + ref_se**2
    se = max(math.sqrt(se2), floor) if math.isfinite(se2) else math.inf
    diff = est.value - ref.value
    if est.z is not None:  # a test of its own (the gaps, against their reference 0)
        zval = est.z
    else:
        zval = diff / se if se > 0 else (0.0 if diff == 0 else math.copysign(math.inf, diff))
    too_few = est.n < min_n or (ref.source.startswith("window") and (ref.n or 0) < min_n)
    hit = (zval if sided == "up" else abs(zval)) > z
    status = "too few" if too_few else "ALARM" if hit else "ok"
    return MetricResult(name, est.value, se, ref.value, ref.source, zval, est.n, sided, status)


def _estimates(
    s: _Stream, idx: NDArray[np.intp], labels: Sequence[str], n_boot: int, seed: int
) -> dict[str, _Estimate]:
    lab = _served_labelled(s, idx)
    Q, terms = _item_terms(s, lab)
    y = s.y[lab]
    out = {
        "cost_gap": _gap(Q, terms["cost_gap"], y),
        "nll": _mean(terms["nll"][np.arange(lab.size), y]),
        "nll_gap": _gap(Q, terms["nll_gap"], y),
    }
    out["classwise_ece"] = _ece(s, lab, n_boot, seed)
    labelled = idx[s.y[idx] >= 0]
    for j, label in enumerate(labels):
        out[f"label_prior:{label}"] = _share((s.y[labelled] == j).astype(np.float64))
    u = s.unparsed[idx]
    out["unparsed_rate"] = _mean(u[~np.isnan(u)])
    out["fallback_rate"] = _share(s.fallback[idx].astype(np.float64))
    return out


_SIDED: dict[str, Sided] = {
    "cost_gap": "both",
    "nll": "up",
    "nll_gap": "both",
    "classwise_ece": "up",
    "unparsed_rate": "up",
    "fallback_rate": "up",
}


def _fit_references(
    fit_metrics: Mapping[str, Any] | None, labels: Sequence[str]
) -> dict[str, _Reference]:
    """The references recorded at fit time (``fit_metrics`` of the artefact)."""
    refs: dict[str, _Reference] = {}
    if not fit_metrics:
        return refs
    for key in ("holdout", "crossval"):  # the fitted map on held-out items, else cross-fit
        scores = fit_metrics.get(key) or {}
        if "nll" not in refs and isinstance(scores.get("nll"), int | float):
            se = scores.get("nll_se")
            refs["nll"] = _Reference(
                float(scores["nll"]),
                "fit",
                scores.get("n", fit_metrics.get("n")),
                float(se) if isinstance(se, int | float) else None,
            )
    prior = fit_metrics.get("label_prior") or {}
    shares = prior.get("shares") or {}
    for label in labels:
        if isinstance(shares.get(label), int | float):
            refs[f"label_prior:{label}"] = _Reference(float(shares[label]), "fit", prior.get("n"))
    for name in ("unparsed_rate", "fallback_rate"):
        rec = fit_metrics.get(name) or {}
        if isinstance(rec.get("rate"), int | float):
            se = rec.get("se")
            refs[name] = _Reference(
                float(rec["rate"]),
                "fit",
                rec.get("n"),
                float(se) if isinstance(se, int | float) else None,
            )
    return refs


class _Engine:
    """Metrics of windows of one stream against fixed references."""

    def __init__(
        self,
        s: _Stream,
        labels: Sequence[str],
        *,
        fit_metrics: Mapping[str, Any] | None,
        reference: NDArray[np.intp] | None,
        z: float,
        min_n: int,
        n_boot: int,
        seed: int,
    ) -> None:
        self.s, self.labels, self.z, self.min_n = s, list(labels), z, min_n
        self.n_boot, self.seed = n_boot, seed
        self.refs: dict[str, _Reference] = {
            "cost_gap": _Reference(0.0, "theory"),
            "nll_gap": _Reference(0.0, "theory"),
        }
        fit = _fit_references(fit_metrics, labels)
        self.refs.update(fit)
        self.first: dict[str, _Estimate] = {}
        if reference is not None:
            first = _estimates(s, reference, self.labels, n_boot, seed)
            for name, est in first.items():
                if name not in self.refs and est.value is not None and est.reference is None:
                    se = self._own_se(name, est)
                    self.refs[name] = _Reference(est.value, "window 0", est.n, se)
                    self.first[name] = est

    def _own_se(self, name: str, est: _Estimate) -> float | None:
        if name == "fallback_rate" or name.startswith("label_prior:"):
            return None  # binomial at the pooled share
        return est.se

    def window(self, idx: NDArray[np.intp], *, is_reference: bool) -> list[MetricResult]:
        ests = _estimates(self.s, idx, self.labels, self.n_boot, self.seed)
        out = []
        for name, est in ests.items():
            ref = est.reference or self.refs.get(name)
            sided = _SIDED.get(name, "both")
            if is_reference and ref is not None and ref.source == "window 0":
                out.append(
                    MetricResult(
                        name,
                        est.value,
                        None,
                        ref.value,
                        ref.source,
                        None,
                        est.n,
                        sided,
                        "reference" if est.value is not None else "no data",
                    )
                )
                continue
            binomial = name == "fallback_rate" or name.startswith("label_prior:")
            floor = 0.0
            if name == "unparsed_rate" and ref is not None and est.value is not None:
                # the binomial SE of a share of m samples per decision at the pooled rate
                m = max(1.0, float(np.mean(self.s.n_samples[idx])))
                p = (est.value * est.n + ref.value * (ref.n or 0) + 0.5) / (
                    est.n + (ref.n or 0) + 1
                )
                floor = math.sqrt(p * (1 - p) / (m * est.n))
            out.append(
                _compare(
                    name,
                    est,
                    ref,
                    sided=sided,
                    z=self.z,
                    min_n=self.min_n,
                    binomial=binomial,
                    floor=floor,
                )
            )
        return out


# --------------------------------------------------------------------------------------
# windows


def _windows(s: _Stream, window: int | float | None) -> list[NDArray[np.intp]]:
    n = s.n
    if window is None or n == 0:
        return [np.arange(n, dtype=np.intp)]
    if isinstance(window, int):
        return [np.arange(i, min(i + window, n), dtype=np.intp) for i in range(0, n, window)]
    if np.isnan(s.t).any():
        bad = int(np.flatnonzero(np.isnan(s.t))[0])
        msg = (
            f"monitor: a duration window needs each decision's time; record {bad} has time "
            f"{s.times[bad]!r}. Use a count window (e.g. 200) instead."
        )
        raise ConfigurationError(msg)
    order = np.argsort(s.t, kind="stable")
    bins = np.floor((s.t[order] - s.t[order[0]]) / window).astype(np.int64)
    cuts = np.flatnonzero(np.diff(bins)) + 1
    return [np.asarray(part, dtype=np.intp) for part in np.split(order, cuts)]


def _check(z: float, min_n: int) -> None:
    if not (isinstance(z, int | float) and z > 0 and math.isfinite(z)):
        msg = f"monitor: z must be a positive number of standard errors, got {z!r}."
        raise ConfigurationError(msg)
    if isinstance(min_n, bool) or not isinstance(min_n, int) or min_n < 1:
        msg = f"monitor: min_n must be a positive integer, got {min_n!r}."
        raise ConfigurationError(msg)


def _task_of(task: Task | CalibratorArtefact) -> tuple[Task, Mapping[str, Any] | None]:
    from taskcal_agents.decision.artefact import CalibratorArtefact

    if isinstance(task, CalibratorArtefact):
        if task.task is None:
            msg = (
                f"monitor: the artefact {str(task.path or '')!r} records no task (task_spec); "
                "pass the task file as well (--task)."
            )
            raise ConfigurationError(msg)
        return task.task, task.metadata.get("fit_metrics")
    return task, None


def _filter(
    records: Iterable[Mapping[str, Any]], artefact_id: str | None
) -> tuple[list[Mapping[str, Any]], dict[str, int], int]:
    rows = list(records)
    ids = Counter(str(r.get("artefact_id") or "none") for r in rows)
    if artefact_id is None:
        return rows, dict(ids), 0
    kept = [r for r in rows if str(r.get("artefact_id") or "none") == artefact_id]
    return kept, dict(ids), len(rows) - len(kept)


def _of_task(
    rows: list[Mapping[str, Any]], task: Task, *, artefact_id: str | None
) -> tuple[list[Mapping[str, Any]], int]:
    """The records of *task* and how many of other tasks were left out.

    Raises:
        ConfigurationError: Records remain, but none of them is of *task*.
    """
    kept = [r for r in rows if r.get("task") == task.name]
    if rows and not kept:
        names = sorted(Counter(str(r.get("task")) for r in rows).items())
        of = "" if artefact_id is None else f" of artefact id {artefact_id!r}"
        msg = (
            f"monitor: none of the {len(rows)} decisions{of} is for task {task.name!r} (the "
            f"log holds {', '.join(f'{k!r}: {v}' for k, v in names)}); pass the artefact or "
            "task file of a logged task."
        )
        raise ConfigurationError(msg)
    return kept, len(rows) - len(kept)


def monitor(
    records: Iterable[Mapping[str, Any]],
    task: Task | CalibratorArtefact,
    *,
    fit_metrics: Mapping[str, Any] | None = None,
    window: int | str | None = None,
    z: float = DEFAULT_Z,
    min_n: int = DEFAULT_MIN_N,
    artefact_id: str | None = None,
    n_boot: int = 100,
    seed: int = 0,
    source: str | None = None,
) -> MonitorReport:
    """Monitor decision-log records window by window (see the module docstring).

    Records of other tasks (a middleware under ``decide_on="every_call"`` logs tool-result
    turns as task ``after_tool_result`` into the same log) are left out and counted
    (``n_other_task``), as decisions of other artefact ids are with *artefact_id*. The
    label prior and the labelled metrics are computed on the **labelled** decisions
    only: when outcomes arrive for some decisions only (a review queue that sees the
    uncertain ones, a tool that reports failures), they are not a random sample and
    their label prior is biased. Without labelled decisions the report says so
    (``warnings``) and only the rates are tested.

    Args:
        records: Decision-log records in log order (``DecisionLog.read()``), with outcomes.
        task: The task (its cost matrix and labels), or a calibrator artefact that records
            it; an artefact also supplies ``fit_metrics``.
        fit_metrics: Fit-time references (an artefact's ``fit_metrics``); overrides the
            artefact's. Without them the first window is the reference.
        window: ``None`` (the whole log), a count of decisions, or a duration (``"24h"``).
        z: The alarm threshold in standard errors.
        min_n: The fewest labelled decisions (decisions, for the rates) a window needs to
            alarm.
        artefact_id: Only decisions of this artefact id (``"none"``: decisions without).
        n_boot: Bootstrap resamples for the SE of the classwise ECE.
        seed: Seed of the bootstrap (the report is deterministic given it).
        source: Where the records came from (the log's path), named in errors.

    Returns:
        The report; ``report.alarm`` says whether any metric of any window alarms.

    Raises:
        ConfigurationError: No record of the task among records of other tasks, a bad
            window, *z* or *min_n*.
        DataFileError: A bad record of the task: its ``calibrated`` belief missing, not
            finite, negative or not summing to 1 (:func:`record_belief`), an action or
            outcome outside the task, bad sample counts.
        LabelMismatchError: A record of the task with other labels than the task's.
    """
    _check(z, min_n)
    spec = parse_window(window)
    task_obj, art_metrics = _task_of(task)
    rows, ids, excluded = _filter(records, artefact_id)
    rows, other_task = _of_task(rows, task_obj, artefact_id=artefact_id)
    s = _stream(rows, task_obj, source)
    parts = _windows(s, spec)
    metrics = fit_metrics if fit_metrics is not None else art_metrics
    engine = _Engine(
        s,
        task_obj.labels,
        fit_metrics=metrics,
        reference=parts[0],
        z=z,
        min_n=min_n,
        n_boot=n_boot,
        seed=seed,
    )
    results = []
    for i, idx in enumerate(parts):
        ms = engine.window(idx, is_reference=i == 0)
        first, last = (int(idx.min()), int(idx.max())) if idx.size else (0, -1)
        times = [s.times[j] for j in idx] if idx.size else []
        known = sorted(t for t in times if t is not None)
        results.append(
            WindowResult(
                index=i,
                start=first,
                stop=last + 1,
                time_from=known[0] if known else None,
                time_to=known[-1] if known else None,
                n_decisions=int(idx.size),
                n_labelled=int((s.y[idx] >= 0).sum()),
                metrics=tuple(ms),
            )
        )
    warnings: list[str] = []
    if not (s.y >= 0).any():
        warnings.append(
            f"no labelled decisions among the {s.n} of task {task_obj.name!r}: the "
            "calibration metrics, cost and label prior were not tested (record outcomes "
            "with `taskcal outcomes import`)."
        )
    return MonitorReport(
        task=task_obj.name,
        labels=tuple(task_obj.labels),
        window=spec,
        z=float(z),
        min_n=min_n,
        n_records=s.n,
        artefact_ids=ids,
        n_excluded=excluded,
        windows=tuple(results),
        n_other_task=other_task,
        warnings=tuple(warnings),
    )


def monitor_log(
    log: str | os.PathLike[str] | Any,
    *,
    artefact: CalibratorArtefact | str | os.PathLike[str] | None = None,
    task: Task | str | os.PathLike[str] | None = None,
    **kwargs: Any,
) -> MonitorReport:
    """:func:`monitor` on a decision log (a path or a ``DecisionLog``).

    Args:
        log: The log.
        artefact: The calibrator artefact (or its path): the task and fit-time references.
        task: The task (or a task file path) when no artefact is given, or to supply the
            task an artefact does not record.
        **kwargs: Passed to :func:`monitor`.

    Raises:
        ConfigurationError: Neither *artefact* nor *task*, or the artefact's task differs
            from *task*; and as :func:`monitor` (whose errors name the log).
        DataFileError: The artefact cannot be read.
    """
    from taskcal_agents.decision.artefact import CalibratorArtefact
    from taskcal_agents.decision.task import Task
    from taskcal_agents.production.decision_log import open_decision_log

    if isinstance(task, str | os.PathLike):
        task = Task.from_file(Path(task))
    art = CalibratorArtefact.load(artefact) if isinstance(artefact, str | os.PathLike) else artefact
    if art is None and task is None:
        msg = (
            "monitor needs the task: pass the calibrator artefact (--artefact) or a task "
            "file (--task)."
        )
        raise ConfigurationError(msg)
    target: Task | CalibratorArtefact
    if art is not None:
        if task is not None:
            art.check_for(task_name=task.name, labels=list(task.labels))
            kwargs.setdefault("fit_metrics", art.metadata.get("fit_metrics"))
            target = task
        else:
            target = art
    else:
        assert task is not None
        target = task
    opened = open_decision_log(log)
    kwargs.setdefault("source", str(opened.path))
    return monitor(opened.read(), target, **kwargs)


def first_alarm(
    records: Sequence[Mapping[str, Any]],
    task: Task | CalibratorArtefact,
    *,
    window: int = 200,
    step: int = 1,
    start: int | None = None,
    fit_metrics: Mapping[str, Any] | None = None,
    z: float = DEFAULT_Z,
    min_n: int = DEFAULT_MIN_N,
    n_boot: int = 50,
    seed: int = 0,
) -> int | None:
    """The index of the first decision at which a trailing window alarms, or ``None``.

    A stream monitor for the drift benchmark: after each *step* decisions (from index
    ``start - 1``, default ``window - 1``) the trailing *window* decisions ending there are
    compared with the references (fit-time *fit_metrics*, else the first *window*
    decisions, which are then never tested). The records' outcomes must already be set.

    Returns:
        The index of the last decision of the first alarming window, or ``None``.
    """
    _check(z, min_n)
    if isinstance(window, bool) or not isinstance(window, int) or window < 1 or step < 1:
        msg = f"first_alarm: window and step must be positive integers, got {window!r}, {step!r}."
        raise ConfigurationError(msg)
    task_obj, art_metrics = _task_of(task)
    s = _stream(records, task_obj)
    metrics = fit_metrics if fit_metrics is not None else art_metrics
    reference = None if metrics else np.arange(min(window, s.n), dtype=np.intp)
    engine = _Engine(
        s,
        task_obj.labels,
        fit_metrics=metrics,
        reference=reference,
        z=z,
        min_n=min_n,
        n_boot=n_boot,
        seed=seed,
    )
    end = start if start is not None else window if metrics else 2 * window
    for stop in range(max(end, 1), s.n + 1, step):
        idx = np.arange(max(0, stop - window), stop, dtype=np.intp)
        if any(m.alarm for m in engine.window(idx, is_reference=False)):
            return stop - 1
    return None
