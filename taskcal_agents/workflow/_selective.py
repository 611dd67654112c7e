"""Selective prediction: risk–coverage curves and AURC of a decoder (numpy only).

A decoder that may hand its least confident items to someone else (a human, a stronger
model) trades *coverage* (the fraction of items it still decides) for *risk* (the mean
realised cost of the items it decides). Ranking the items by the decoder's confidence in
its own action and sweeping a threshold gives the risk–coverage curve; the area under it
(AURC, Geifman, Uziel and El-Yaniv 2018, "Bias-reduced uncertainty estimation for deep
neural classifiers") summarises the curve in one number, lower is better.

Confidence is the expected-cost margin of :func:`action_confidence`: how much more the
best alternative action would be expected to cost than the chosen one, under the belief
the decoder decided on (the calibrated belief for ``mbr_<calibrator>``, the raw belief for
``majority``, ``greedy`` and ``mbr_raw``, the label prior for ``constant``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from calibrators import expected_costs
from taskcal_agents._validation import check_int
from taskcal_agents.errors import ConfigurationError

CURVE_POINTS = 101
"""The most points of a curve stored in the JSON (both endpoints always kept)."""


# --------------------------------------------------------------------------------------
# validation


def _finite_array(value: ArrayLike, name: str, ndim: int, owner: str) -> NDArray[np.float64]:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        msg = f"{owner}: {name} must be a numeric array, got {value!r}."
        raise ConfigurationError(msg) from exc
    if arr.ndim != ndim:
        msg = f"{owner}: {name} must be a {ndim}-d array, got shape {arr.shape!r}."
        raise ConfigurationError(msg)
    if not np.all(np.isfinite(arr)):
        msg = (
            f"{owner}: {name} must hold finite numbers, got "
            f"{arr[~np.isfinite(arr)][:5].tolist()!r}; remove NaN and inf values."
        )
        raise ConfigurationError(msg)
    return arr


def _check_target_risk(target_risk: float | None, owner: str) -> float | None:
    if target_risk is None:
        return None
    if isinstance(target_risk, bool) or not isinstance(target_risk, (int, float, np.number)):
        msg = f"{owner}: target_risk must be a number or None, got {target_risk!r}."
        raise ConfigurationError(msg)
    if not math.isfinite(float(target_risk)):
        msg = f"{owner}: target_risk must be finite, got {target_risk!r}."
        raise ConfigurationError(msg)
    return float(target_risk)


# --------------------------------------------------------------------------------------
# confidence


def action_confidence(
    Q: ArrayLike,
    cost: ArrayLike,
    actions: ArrayLike,
    executable: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """The decoder's confidence in its own action: the expected-cost margin.

    With ``R = Q @ cost`` the expected cost of each action under the belief ``Q``, item
    *i* gets ``min_{b != a_i, b executable} R[i, b] − R[i, a_i]``: how much more the best
    *other* executable action is expected to cost than the chosen action ``a_i``. It is
    ≥ 0 for an MBR decoder on ``Q`` and may be negative for a decoder that does not
    minimise the expected cost under ``Q`` (majority vote, greedy). Whether the chosen
    action itself is executable is not checked.

    An item with no other executable action (one action, or every other action masked
    out) has nothing to be unsure about: it gets the finite margin
    ``1 + max(cost) − min(cost)``, larger than any attainable margin, so such items are
    covered first and tie with each other.

    Args:
        Q: The belief the decoder acted on, shape (n, k) (the label prior for the
            constant decoder).
        cost: Cost matrix, shape (k, m), row = true label, column = action.
        actions: The chosen action index per item, shape (n,), in [0, m).
        executable: Which actions are executable per item, boolean (n, m); ``None``: all.

    Returns:
        The margin per item, shape (n,), finite.

    Raises:
        ConfigurationError: Non-finite or mis-shaped inputs, rows of ``Q`` that are not
            probability distributions, a negative cost, or action indices out of range.
    """
    owner = "action_confidence"
    Q_ = _finite_array(Q, "Q", 2, owner)
    C = _finite_array(cost, "cost", 2, owner)
    n, k = Q_.shape
    if C.shape[0] != k:
        msg = (
            f"{owner}: cost must have one row per column of Q ({k}), got shape "
            f"{C.shape!r}; pass the (labels × actions) cost matrix."
        )
        raise ConfigurationError(msg)
    m = C.shape[1]
    acts = np.asarray(actions)
    if acts.shape != (n,) or not np.issubdtype(acts.dtype, np.integer):
        msg = (
            f"{owner}: actions must be integer action indices of shape ({n},), got "
            f"dtype {acts.dtype} and shape {acts.shape!r}."
        )
        raise ConfigurationError(msg)
    if n and (acts.min() < 0 or acts.max() >= m):
        msg = (
            f"{owner}: actions must lie in [0, {m}) for a cost matrix with {m} actions, "
            f"got {sorted({int(a) for a in acts if not 0 <= a < m})!r}."
        )
        raise ConfigurationError(msg)
    if executable is None:
        mask = np.ones((n, m), dtype=bool)
    else:
        mask = np.asarray(executable)
        if mask.shape != (n, m) or mask.dtype != np.bool_:
            msg = (
                f"{owner}: executable must be a boolean array of shape ({n}, {m}), got "
                f"dtype {mask.dtype} and shape {mask.shape!r}."
            )
            raise ConfigurationError(msg)
    try:
        R = expected_costs(Q_, C)
    except ValueError as exc:
        msg = f"{owner}: {exc}"
        raise ConfigurationError(msg) from exc
    rows = np.arange(n)
    chosen = R[rows, acts]
    others = mask.copy()
    others[rows, acts] = False
    best_other = np.where(others, R, np.inf).min(axis=1, initial=np.inf)
    no_alternative = 1.0 + float(C.max() - C.min()) if C.size else 1.0
    return np.where(np.isfinite(best_other), best_other - chosen, no_alternative)


# --------------------------------------------------------------------------------------
# risk–coverage


@dataclass(frozen=True)
class RiskCoverage:
    """The risk–coverage curve of one decoder.

    Items are ranked by confidence, most confident first; items of equal confidence enter
    together, so the curve has one point per distinct confidence and does not depend on
    the order of the items.

    Attributes:
        coverage: Fraction of items covered at each distinct confidence threshold,
            increasing, the last one 1.
        risk: Mean realised cost of the covered items at each threshold.
        thresholds: The distinct confidences, decreasing (item covered iff its
            confidence ≥ threshold).
        aurc: Area under the curve, ``(1/n) Σ_{i=1..n} r_i`` with ``r_i`` the mean cost
            of the *i* most confident items (Geifman et al. 2018); when ties make the
            *i* most confident items ambiguous, ``r_i`` is its expectation over uniformly
            random orderings of the tied items.
        oracle_aurc: The AURC of the best possible ranking (cheapest items first): what
            a perfect confidence would reach at the same costs. ``aurc − oracle_aurc`` is
            the excess AURC.
        n: The number of items.
    """

    coverage: NDArray[np.float64]
    risk: NDArray[np.float64]
    thresholds: NDArray[np.float64]
    aurc: float
    oracle_aurc: float
    n: int

    @property
    def full_risk(self) -> float:
        """The risk at coverage 1: the decoder's mean realised cost."""
        return float(self.risk[-1])

    def coverage_at(self, target_risk: float) -> float:
        """The largest coverage whose risk is at most *target_risk* (0.0 if none).

        Only the curve's points are candidates: a confidence threshold cannot split a
        group of tied items.

        Raises:
            ConfigurationError: *target_risk* is not a finite number.
        """
        target = _check_target_risk(target_risk, "RiskCoverage.coverage_at")
        if target is None:
            msg = "RiskCoverage.coverage_at: target_risk must be a number, got None."
            raise ConfigurationError(msg)
        ok = self.risk <= target
        return float(self.coverage[ok].max()) if ok.any() else 0.0

    def curve_points(self, max_points: int = CURVE_POINTS) -> NDArray[np.intp]:
        """Indices of at most *max_points* curve points, evenly spread in coverage.

        For each coverage in ``linspace(0, 1, max_points)[1:]`` the last point at or below
        it, plus the first point; both endpoints are always kept.

        Raises:
            ConfigurationError: *max_points* is below 2.
        """
        check_int(max_points, "RiskCoverage.curve_points: max_points", minimum=2)
        grid = np.linspace(0.0, 1.0, max_points)[1:]
        # tolerate rounding of the grid (e.g. 0.07 vs 7/100 items) so exact hits count
        idx = np.searchsorted(self.coverage, grid + 1e-12, side="right") - 1
        idx = np.concatenate([[0], idx[idx >= 0], [self.coverage.size - 1]])
        return np.unique(idx).astype(np.intp)

    def to_dict(self, target_risk: float | None = None) -> dict[str, Any]:
        """The JSON block of one decoder (the curve downsampled to ≤ 101 points).

        Args:
            target_risk: The user's acceptable risk; ``None``: not set.

        Returns:
            ``{"aurc", "oracle_aurc", "full_risk", "target_risk", "coverage_at_target",
            "curve": {"coverage": [...], "risk": [...]}}``; ``coverage_at_target`` is
            ``None`` without a target.

        Raises:
            ConfigurationError: *target_risk* is not a finite number or None.
        """
        target = _check_target_risk(target_risk, "RiskCoverage.to_dict")
        idx = self.curve_points()
        return {
            "aurc": self.aurc,
            "oracle_aurc": self.oracle_aurc,
            "full_risk": self.full_risk,
            "target_risk": target,
            "coverage_at_target": None if target is None else self.coverage_at(target),
            "curve": {
                "coverage": self.coverage[idx].tolist(),
                "risk": self.risk[idx].tolist(),
            },
        }


def _aurc(costs: NDArray[np.float64], group: NDArray[np.intp], n_groups: int) -> float:
    """Expected Geifman AURC with ties broken uniformly at random.

    *group* is the rank of each item's confidence group (0 = most confident). The *j*-th
    item taken from a group of mean cost μ adds μ in expectation, so the expected sum of
    the *i* most confident items is the cost of the earlier groups plus ``j·μ``.
    """
    n = costs.size
    size = np.bincount(group, minlength=n_groups)
    total = np.bincount(group, weights=costs, minlength=n_groups)
    before = np.concatenate([[0.0], np.cumsum(total)[:-1]])
    start = np.concatenate([[0], np.cumsum(size)[:-1]])
    g = np.repeat(np.arange(n_groups), size)  # group of the i-th position
    i = np.arange(1, n + 1)
    j = i - start[g]
    expected_sum = before[g] + j * total[g] / size[g]
    return float(np.mean(expected_sum / i))


def risk_coverage(costs: ArrayLike, confidence: ArrayLike) -> RiskCoverage:
    """The risk–coverage curve and AURC of items ranked by *confidence*.

    Args:
        costs: The realised cost of the decoder's action on each item, shape (n,).
        confidence: The decoder's confidence in that action, shape (n,) (higher = more
            confident; e.g. :func:`action_confidence`).

    Returns:
        The curve (one point per distinct confidence), its AURC and the oracle AURC.

    Raises:
        ConfigurationError: Empty, non-finite or mis-shaped inputs.
    """
    owner = "risk_coverage"
    c = _finite_array(costs, "costs", 1, owner)
    conf = _finite_array(confidence, "confidence", 1, owner)
    if c.shape != conf.shape:
        msg = (
            f"{owner}: costs and confidence must have the same shape, got {c.shape!r} "
            f"and {conf.shape!r}."
        )
        raise ConfigurationError(msg)
    n = c.size
    if n == 0:
        msg = f"{owner}: costs must hold at least one item, got an empty array."
        raise ConfigurationError(msg)
    thresholds, inverse = np.unique(-conf, return_inverse=True)  # most confident first
    group = inverse.reshape(-1).astype(np.intp)
    size = np.bincount(group, minlength=thresholds.size)
    total = np.bincount(group, weights=c, minlength=thresholds.size)
    covered = np.cumsum(size)
    oracle_thresholds, oracle_group = np.unique(c, return_inverse=True)
    return RiskCoverage(
        coverage=covered / n,
        risk=np.cumsum(total) / covered,
        thresholds=-thresholds,
        aurc=_aurc(c, group, thresholds.size),
        oracle_aurc=_aurc(c, oracle_group.reshape(-1).astype(np.intp), oracle_thresholds.size),
        n=n,
    )


def selective_summary(
    costs: ArrayLike, confidence: ArrayLike, target_risk: float | None = None
) -> dict[str, Any]:
    """The ``selective`` block of one decoder row of the evaluation JSON.

    Args:
        costs: Realised cost per item, shape (n,).
        confidence: Confidence per item, shape (n,).
        target_risk: The user's acceptable risk (``taskcal evaluate --target-risk``).

    Returns:
        :meth:`RiskCoverage.to_dict` of :func:`risk_coverage`.

    Raises:
        ConfigurationError: See :func:`risk_coverage` and :meth:`RiskCoverage.to_dict`.
    """
    return risk_coverage(costs, confidence).to_dict(target_risk)
