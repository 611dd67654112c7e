"""Risk-controlled decisions: a guard on the MBR action, calibrated by Learn-then-Test.

MBR on a calibrated belief is optimal in expectation; a deployment may also need a
promise such as "at most 5% of decisions are tool calls that should not have been made,
with 95% confidence". A :class:`RiskSpec` names the risk and its limit α:

``<action>_when_not:α``
    The marginal rate, over all decisions, of taking ``<action>`` when it is not a
    least-cost action for the true label (C[y, a] > min_a' C[y, a']). For a tool
    decision, ``tool_call_when_not:0.05``: at most 5% of all decisions call a tool when
    the truth is ask or cannot-answer.
``<action>_wrong:α``
    The same mistake among the decisions that took ``<action>``: ``answer_wrong:0.1``,
    at most 10% of the answers given are wrong.
``cost:α``
    The expected cost divided by the largest cost of the matrix (a loss in [0, 1]).

``<action>`` may be ``any``: every action other than the safe ones (``any_wrong:0.1`` on
a multiple-choice task with an abstain action: at most 10% of the answered questions
wrong).

**The guard.** The safe actions are the task's ask and abstain actions other than the
guarded one (else its fallback action, which must then not be a sampled action: a
downgrade must always be executable). With ``a*`` the MBR action and
``s = 1 − Σ_ℓ q(ℓ)·L[ℓ, a*]`` its score (``L`` the risk's loss matrix: the mistake
indicator of a guarded action, or C / C_max; so ``s`` is the calibrated probability that
``a*`` is a least-cost action, or one minus its scaled expected cost), a guarded ``a*``
(the risk's action; for ``cost`` any action that is not safe) with ``s < λ`` is replaced
by the safe action of least expected cost under q (the decision kernel's
:func:`calibrators.least_cost_actions`). ``λ = 0`` is plain MBR, ``λ = inf`` always
guards. For the mistake kinds each item's loss is non-increasing in λ.

**Calibration** (:func:`calibrate_risk`) by Learn-then-Test (Angelopoulos, Bates, Candès,
Jordan and Lei, 2021, "Learn then Test: Calibrating predictive algorithms to achieve risk
control"): on n labelled items with calibrated beliefs that the map did not see, for each
λ of a grid from strict to lenient (1.0, 0.99, …, 0.0) a p-value of H0: R(λ) > α —
the exact binomial tail P(Bin(n, α) ≤ losses) for a 0/1 loss, the Hoeffding–Bentkus
bound for ``cost`` — and a family-wise test at level δ: fixed-sequence testing (stop at
the first λ not rejected) for ``_when_not``, whose loss is monotone in λ; Bonferroni
over the grid for ``_wrong`` (its p-value is the binomial on the n_λ items that took the
action, valid given n_λ; 1 when n_λ = 0) and for ``cost`` (the safe action has a cost
of its own, so the loss need not be monotone). The most lenient rejected λ is taken:
then P(R(λ̂) > α) ≤ δ over the draw of the calibration items. When none is rejected,
λ̂ = inf (always guard), ``certified`` is false and a :class:`RiskNotCertifiedWarning`
is issued.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from taskcal_agents.decision._ltt import (
    DEFAULT_GRID,
    binomial_pvalues,
    check_grid,
    hoeffding_bentkus_pvalues,
    ltt_select,
    naive_threshold,
)
from taskcal_agents.decision._risk_curve import RiskCurve, risk_curve
from taskcal_agents.decision._risk_guard import (
    ANY_ACTION,
    RiskGuard,
    RiskKind,
    RiskSpec,
    check_level,
)
from taskcal_agents.decision._task import Task
from taskcal_agents.errors import ConfigurationError

__all__ = [
    "ANY_ACTION",
    "DEFAULT_GRID",
    "RiskControl",
    "RiskCurve",
    "RiskGuard",
    "RiskKind",
    "RiskNotCertifiedWarning",
    "RiskSettingsWarning",
    "RiskSpec",
    "binomial_pvalues",
    "calibrate_risk",
    "hoeffding_bentkus_pvalues",
    "ltt_select",
    "naive_threshold",
    "risk_curve",
]


class RiskNotCertifiedWarning(UserWarning):
    """No threshold of the grid was certified: the guard always downgrades."""


class RiskSettingsWarning(UserWarning):
    """A risk limit is used with another sample count N than it was certified on."""


# --------------------------------------------------------------------------------------
# the result


@dataclass(frozen=True)
class RiskControl:
    """A calibrated risk limit: the guard's threshold and what it was certified on.

    Attributes:
        spec: The risk and its limit α.
        delta: The allowed probability δ that the limit does not hold.
        threshold: λ̂; ``inf``: no threshold was certified, the guard always downgrades.
        certified: Whether LTT rejected R(λ̂) > α at level δ.
        n: The calibration items.
        n_taken: The items the empirical risk is over (for ``_wrong``, those that took
            the guarded action at λ̂; else n).
        risk: The empirical risk at λ̂ on the calibration items.
        coverage: The share of calibration items not downgraded at λ̂.
        method: How λ̂ was chosen (p-value and family-wise test).
        n_grid: How many thresholds were tested.
    """

    spec: RiskSpec
    delta: float
    threshold: float
    certified: bool
    n: int
    n_taken: int
    risk: float
    coverage: float
    method: str
    n_grid: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``threshold`` is ``null`` for ``inf``: always guard)."""
        return {
            "spec": str(self.spec),
            "alpha": self.spec.alpha,
            "delta": self.delta,
            "threshold": self.threshold if math.isfinite(self.threshold) else None,
            "certified": self.certified,
            "n": self.n,
            "n_taken": self.n_taken,
            "risk": self.risk,
            "coverage": self.coverage,
            "method": self.method,
            "n_grid": self.n_grid,
        }

    @classmethod
    def from_dict(cls, data: Any) -> RiskControl:
        """Rebuild from :meth:`to_dict`'s form.

        Raises:
            ConfigurationError: If a field is missing or invalid.
        """
        if not isinstance(data, dict):
            msg = f"risk control must be a JSON object, got {data!r}."
            raise ConfigurationError(msg)
        try:
            threshold = data["threshold"]
            threshold = math.inf if threshold is None else float(threshold)
            out = cls(
                spec=RiskSpec.parse(data["spec"]),
                delta=check_level(data["delta"], "risk control delta"),
                threshold=threshold,
                certified=bool(data["certified"]),
                n=int(data["n"]),
                n_taken=int(data["n_taken"] if "n_taken" in data else data["n"]),
                risk=float(data["risk"]),
                coverage=float(data["coverage"]),
                method=str(data["method"]),
                n_grid=int(data.get("n_grid", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ConfigurationError):
                raise
            msg = f"risk control {data!r} is invalid: {exc!r}."
            raise ConfigurationError(msg) from exc
        if math.isnan(threshold):
            msg = f"risk control threshold must be a number or null, got {data['threshold']!r}."
            raise ConfigurationError(msg)
        return out

    def guard(self, task: Task) -> RiskGuard:
        """The guard of this risk on ``task`` (see :class:`RiskGuard`)."""
        return RiskGuard(task, self.spec)


def calibrate_risk(
    task: Task,
    spec: RiskSpec | str,
    Q: ArrayLike,
    y: ArrayLike,
    *,
    delta: float = 0.05,
    actions: ArrayLike | None = None,
    guardable: ArrayLike | None = None,
    executable: ArrayLike | None = None,
    grid: ArrayLike | None = None,
    warn: bool = True,
) -> RiskControl:
    """Choose the guard's threshold by Learn-then-Test (see the module docstring).

    The guarantee, P(R(λ̂) > α) ≤ δ, is exact for new items exchangeable with the
    calibration items when ``Q`` are beliefs of held-out items from the deployed map, which
    never saw them. On cross-fitted beliefs (as ``taskcal fit --risk-control`` passes) it
    is approximate: the losses come from K different maps, dependent through their shared
    training items, none of them the deployed map.

    Args:
        task: The task.
        spec: The risk and α (a :class:`RiskSpec` or its string).
        Q: Calibrated beliefs of the calibration items, (n, k).
        y: Their true label indices, (n,).
        delta: The allowed probability δ of a violated limit, in (0, 1).
        actions: The unguarded actions (see :func:`risk_curve`).
        guardable: Rows the guard applies to (see :func:`risk_curve`).
        executable: Which actions each row's samples can carry out, (n, m).
        grid: The thresholds to test, strictly decreasing (strict to lenient; default
            :data:`DEFAULT_GRID`).
        warn: Issue a :class:`RiskNotCertifiedWarning` when nothing is certified.

    Returns:
        The :class:`RiskControl`.

    Raises:
        ConfigurationError: On an invalid spec, δ, grid or array.
    """
    guard = RiskGuard(task, spec)
    spec = guard.spec
    delta = check_level(delta, "risk control delta δ")
    lam = check_grid(grid)
    if np.ndim(y) != 1:
        msg = f"calibrate_risk: y must have shape (n,), got {np.shape(y)}."
        raise ConfigurationError(msg)
    curve = risk_curve(
        guard, Q, y, np.append(lam, math.inf),
        actions=actions, guardable=guardable, executable=executable,
    )  # fmt: skip
    m = lam.size
    tested = RiskCurve(
        thresholds=lam, risk=curve.risk[:m], n_loss=curve.n_loss[:m],
        n_taken=curve.n_taken[:m], coverage=curve.coverage[:m],
        mean_cost=curve.mean_cost[:m], n=curve.n,
    )  # fmt: skip
    index, _, method = ltt_select(spec, tested, delta)
    i = int(index)
    certified = i >= 0
    if not certified:
        i = m  # the appended inf: always guard
        if warn:
            msg = (
                f"risk limit {str(spec)!r} could not be certified at δ = {delta} on {curve.n} "
                f"items (empirical risk {float(curve.risk[m - 1]):.4g} at the most lenient "
                f"threshold {float(lam[-1]):g}); the guard will always downgrade"
                + (
                    " (to the safe actions, whose own cost is not certified either)"
                    if spec.kind == "cost"
                    else ""
                )
                + ". Use more calibration items, a larger α or δ, or better beliefs."
            )
            warnings.warn(msg, RiskNotCertifiedWarning, stacklevel=2)
    return RiskControl(
        spec=spec,
        delta=delta,
        threshold=float(curve.thresholds[i]),
        certified=certified,
        n=curve.n,
        n_taken=int(curve.n_taken[i]),
        risk=float(curve.risk[i]),
        coverage=float(curve.coverage[i]),
        method=method,
        n_grid=m,
    )
