"""The empirical risk, coverage and cost of a risk guard at each threshold λ.

On labelled items with calibrated beliefs, :func:`risk_curve` gives what the guard of
:mod:`taskcal_agents.decision._risk_control` would do at every threshold of a grid, vectorised
over the thresholds and over batches of calibration sets; the Learn-then-Test selection
reads its :class:`RiskCurve`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from calibrators import mbr_actions
from taskcal_agents.decision._risk_guard import RiskGuard
from taskcal_agents.errors import ConfigurationError

__all__ = ["RiskCurve", "risk_curve"]


@dataclass(frozen=True)
class RiskCurve:
    """The empirical risk of each threshold on labelled items (see :func:`risk_curve`).

    Every array has the thresholds on its last axis, after the batch axes of the input
    (none for one calibration set).

    Attributes:
        thresholds: The thresholds λ, (m,).
        risk: The empirical risk, (..., m): mean loss over all items, or for ``_wrong``
            over the items that took a guarded action (0 where none did).
        n_loss: The summed loss, (..., m) (a count for the mistake kinds).
        n_taken: The items the risk is over, (..., m): n, or for ``_wrong`` those that
            took a guarded action.
        coverage: The share of items not downgraded, (..., m).
        mean_cost: The mean realised cost C[y, a(λ)], (..., m).
        n: The number of items (per batch entry).
    """

    thresholds: NDArray[np.float64]
    risk: NDArray[np.float64]
    n_loss: NDArray[np.float64]
    n_taken: NDArray[np.intp]
    coverage: NDArray[np.float64]
    mean_cost: NDArray[np.float64]
    n: int


def _labelled(
    guard: RiskGuard,
    Q: ArrayLike,
    y: ArrayLike,
    actions: ArrayLike | None,
    owner: str,
) -> tuple[NDArray[np.float64], NDArray[np.intp], NDArray[np.intp]]:
    """Q, y and the unguarded actions, checked, with the batch axes flattened: (B, n, …)."""
    k, m = guard.cost.shape
    try:
        Q_ = np.asarray(Q, dtype=np.float64)
        y_ = np.asarray(y)
    except (TypeError, ValueError) as exc:
        msg = f"{owner}: Q and y must be numeric arrays: {exc}"
        raise ConfigurationError(msg) from exc
    if Q_.ndim < 2 or Q_.shape[-1] != k or y_.shape != Q_.shape[:-1]:
        msg = (
            f"{owner}: Q must have shape (..., n, {k}) and y shape (..., n) for task "
            f"{guard.task.name!r}, got {Q_.shape} and {y_.shape}."
        )
        raise ConfigurationError(msg)
    if not np.all(np.isfinite(Q_)) or np.any(Q_ < 0):
        msg = f"{owner}: Q must hold finite probabilities >= 0."
        raise ConfigurationError(msg)
    if y_.size and (not np.issubdtype(y_.dtype, np.integer) or y_.min() < 0 or y_.max() >= k):
        msg = f"{owner}: y must hold label indices in [0, {k}), got dtype {y_.dtype}."
        raise ConfigurationError(msg)
    if actions is None:
        acts = mbr_actions(Q_.reshape(-1, k), guard.cost).reshape(y_.shape)
    else:
        acts = np.asarray(actions)
        if acts.shape != y_.shape or not np.issubdtype(acts.dtype, np.integer):
            msg = f"{owner}: actions must be integer action indices of shape {y_.shape}."
            raise ConfigurationError(msg)
        if acts.size and (acts.min() < 0 or acts.max() >= m):
            msg = f"{owner}: actions must lie in [0, {m})."
            raise ConfigurationError(msg)
    n = y_.shape[-1]
    return Q_.reshape(-1, n, k), y_.reshape(-1, n).astype(np.intp), acts.reshape(-1, n)


def risk_curve(
    guard: RiskGuard,
    Q: ArrayLike,
    y: ArrayLike,
    thresholds: ArrayLike,
    *,
    actions: ArrayLike | None = None,
    guardable: ArrayLike | None = None,
    executable: ArrayLike | None = None,
) -> RiskCurve:
    """The empirical risk, coverage and cost of the guard at each threshold.

    Vectorised: O(n + m) per calibration set (an item is downgraded at every λ above its
    score, so each threshold's sums are cumulative sums over the items sorted into the
    thresholds). Leading batch axes (many calibration sets of the same size) are kept.

    Args:
        guard: The risk bound to its task.
        Q: Calibrated beliefs, (..., n, k), that the calibration map did not see.
        y: True label indices, (..., n).
        thresholds: The thresholds λ, (m,); ``inf`` always guards.
        actions: The unguarded actions, (..., n) (default: MBR on Q by the decision
            kernel; the workflow passes the runtime's actions: MBR among executable
            actions, fallback where no sample was usable).
        guardable: Rows the guard applies to, (..., n) (default all; the workflow passes
            the served rows, as the runtime does not guard a fallback decision).
        executable: Which actions each row's samples can carry out, (..., n, m).

    Returns:
        The :class:`RiskCurve`.
    """
    Q_, y_, acts = _labelled(guard, Q, y, actions, "risk_curve")
    B, n, k = Q_.shape
    batch = np.shape(y)[:-1]
    lam = np.atleast_1d(np.asarray(thresholds, dtype=np.float64))
    if lam.ndim != 1 or np.any(np.isnan(lam)):
        msg = "risk_curve thresholds must be a 1-d array of numbers."
        raise ConfigurationError(msg)
    m = lam.size
    flat_Q = Q_.reshape(-1, k)
    flat_a = acts.reshape(-1)
    s = guard.scores(flat_Q, flat_a)
    can = guard.guarded[flat_a]
    if guardable is not None:
        can &= np.broadcast_to(np.asarray(guardable, dtype=bool), np.shape(y)).reshape(-1)
    ex = None
    if executable is not None:
        ex = np.asarray(executable, dtype=bool).reshape(-1, guard.cost.shape[1])
    alt = guard.downgrades(flat_Q, ex)
    yy = y_.reshape(-1)
    before = np.stack([guard.loss[yy, flat_a], guard.guarded[flat_a], guard.cost[yy, flat_a]])
    after = np.stack([guard.loss[yy, alt], guard.guarded[alt], guard.cost[yy, alt]])
    # Item i is downgraded at λ iff it can be and s_i < λ: at the sorted thresholds from
    # position searchsorted(sorted λ, s_i, "right") on.
    order = np.argsort(lam, kind="stable")
    start = np.searchsorted(lam[order], s, side="right")
    bins = np.repeat(np.arange(B), n) * (m + 1) + start
    change = np.where(can, after - before, 0.0)
    sums = np.stack(
        [np.bincount(bins, weights=w, minlength=B * (m + 1)) for w in (*change, can)]
    ).reshape(4, B, m + 1)
    sums = np.cumsum(sums, axis=2)[:, :, :m]
    delta = np.empty_like(sums)
    delta[:, :, order] = sums
    base = before.reshape(3, B, n).sum(axis=2)
    n_loss = base[0][:, None] + delta[0]
    n_guarded = np.rint(base[1][:, None] + delta[1]).astype(np.intp)
    total_cost = base[2][:, None] + delta[2]
    n_down = delta[3]
    n_taken = n_guarded if guard.spec.kind == "wrong" else np.full((B, m), n, dtype=np.intp)
    risk = np.where(n_taken > 0, n_loss / np.maximum(n_taken, 1), 0.0)
    denominator = max(n, 1)
    shape = (*batch, m)
    return RiskCurve(
        thresholds=lam,
        risk=risk.reshape(shape),
        n_loss=n_loss.reshape(shape),
        n_taken=n_taken.reshape(shape),
        coverage=(1.0 - n_down / denominator).reshape(shape),
        mean_cost=(total_cost / denominator).reshape(shape),
        n=n,
    )
