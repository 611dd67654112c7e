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
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from calibrators import expected_costs, least_cost_actions, mbr_actions
from taskcal_agents.decision.task import Task
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

RiskKind = Literal["when_not", "wrong", "cost"]
"""What a :class:`RiskSpec` bounds (see the module docstring)."""

ANY_ACTION = "any"
"""The action of a spec that stands for every action that is not safe."""

DEFAULT_GRID: NDArray[np.float64] = np.round(np.linspace(1.0, 0.0, 101), 2)
"""The thresholds tested, strict to lenient: 1.00, 0.99, …, 0.00 (0: plain MBR)."""

_SUFFIXES: tuple[tuple[str, RiskKind], ...] = (("_when_not", "when_not"), ("_wrong", "wrong"))


class RiskNotCertifiedWarning(UserWarning):
    """No threshold of the grid was certified: the guard always downgrades."""


class RiskSettingsWarning(UserWarning):
    """A risk limit is used with another sample count N than it was certified on."""


def _check_level(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        msg = f"{what} must be a number in (0, 1), got {value!r}."
        raise ConfigurationError(msg)
    level = float(value)
    if not 0.0 < level < 1.0:
        msg = f"{what} must lie strictly between 0 and 1, got {level!r}."
        raise ConfigurationError(msg)
    return level


# --------------------------------------------------------------------------------------
# the spec


@dataclass(frozen=True)
class RiskSpec:
    """The risk to bound and its limit α (see the module docstring for the kinds).

    Attributes:
        kind: ``"when_not"``, ``"wrong"`` or ``"cost"``.
        alpha: The limit α, in (0, 1).
        action: The guarded action of a mistake kind (``"any"``: every action that is
            not safe); ``None`` for ``cost``.
    """

    kind: RiskKind
    alpha: float
    action: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("when_not", "wrong", "cost"):
            msg = f"RiskSpec kind must be 'when_not', 'wrong' or 'cost', got {self.kind!r}."
            raise ConfigurationError(msg)
        object.__setattr__(self, "alpha", _check_level(self.alpha, "risk limit α"))
        if (self.kind == "cost") != (self.action is None) or self.action == "":
            msg = (
                f"RiskSpec of kind {self.kind!r} needs "
                + ("no action" if self.kind == "cost" else "an action")
                + f", got action {self.action!r}."
            )
            raise ConfigurationError(msg)

    @classmethod
    def parse(cls, text: str) -> RiskSpec:
        """Parse ``"<action>_when_not:α"``, ``"<action>_wrong:α"`` or ``"cost:α"``.

        Raises:
            ConfigurationError: If the text has another form or α is not in (0, 1).
        """
        forms = "'<action>_when_not:ALPHA', '<action>_wrong:ALPHA' or 'cost:ALPHA'"
        if not isinstance(text, str):
            msg = f"risk spec must be a string of the form {forms}, got {text!r}."
            raise ConfigurationError(msg)
        name, sep, level = text.strip().rpartition(":")
        try:
            alpha = float(level)
        except ValueError:
            alpha = math.nan
        if not sep or not math.isfinite(alpha):
            msg = f"risk spec must look like {forms} with a number ALPHA, got {text!r}."
            raise ConfigurationError(msg)
        if name == "cost":
            return cls("cost", alpha)
        for suffix, kind in _SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                return cls(kind, alpha, name[: -len(suffix)])
        msg = (
            f"unknown risk kind in {text!r}: use {forms} (e.g. 'tool_call_when_not:0.05', "
            "'answer_wrong:0.1', 'any_wrong:0.1', 'cost:0.2')."
        )
        raise ConfigurationError(msg)

    def __str__(self) -> str:
        name = "cost" if self.action is None else f"{self.action}_{self.kind}"
        return f"{name}:{self.alpha!r}"

    @property
    def marginal(self) -> bool:
        """Whether the risk is a rate over all decisions (not among those that acted)."""
        return self.kind != "wrong"


# --------------------------------------------------------------------------------------
# the guard


class RiskGuard:
    """A risk spec bound to a task: guarded and safe actions, loss matrix, scores.

    Args:
        task: The task.
        spec: The risk (a :class:`RiskSpec` or its string).

    Raises:
        ConfigurationError: If the spec names an action the task does not have, or no
            safe action is left to downgrade to (the only one a sampled action, which
            needs a sample to carry it out).
    """

    __slots__ = ("_always", "cost", "guarded", "loss", "safe", "spec", "task")

    def __init__(self, task: Task, spec: RiskSpec | str) -> None:
        spec = RiskSpec.parse(spec) if isinstance(spec, str) else spec
        if not isinstance(spec, RiskSpec):
            msg = f"RiskGuard spec must be a RiskSpec or its string, got {spec!r}."
            raise ConfigurationError(msg)
        actions = task.action_list
        if spec.action == ANY_ACTION and ANY_ACTION in actions:
            msg = (
                f"risk spec {str(spec)!r} is ambiguous: task {task.name!r} has an action named "
                f"{ANY_ACTION!r}, which also means 'every action that is not safe'."
            )
            raise ConfigurationError(msg)
        if spec.action not in (None, ANY_ACTION) and spec.action not in actions:
            msg = (
                f"risk spec {str(spec)!r} names action {spec.action!r}, but task {task.name!r} "
                f"has actions {actions!r} (or use {ANY_ACTION!r})."
            )
            raise ConfigurationError(msg)
        named = spec.action if spec.action not in (None, ANY_ACTION) else None
        safe = {a for a in (task.ask_action, task.abstain_action) if a is not None} - {named}
        if not safe:
            safe = {task.default_action} - {named}
        if not safe:
            msg = (
                f"risk spec {str(spec)!r}: task {task.name!r} has no safe action other than "
                f"{named!r} to downgrade to (its ask, abstain and fallback actions); guard "
                "another action."
            )
            raise ConfigurationError(msg)
        if safe <= set(task.sampled_actions):
            msg = (
                f"risk spec {str(spec)!r}: the only safe action of task {task.name!r}, "
                f"{sorted(safe)!r} (its fallback action), is a sampled action, which a "
                "decision can take only when a sample carries it out; the guard would have "
                "nothing to downgrade to. Give the task an ask or abstain action, or a "
                "fallback action that is not in sampled_actions."
            )
            raise ConfigurationError(msg)
        is_safe = np.array([a in safe for a in actions], dtype=bool)
        always = np.array([a not in task.sampled_actions for a in actions], dtype=bool)
        guarded = ~is_safe if named is None else np.array([a == named for a in actions])
        C = np.asarray(task.cost_matrix(), dtype=np.float64)
        if spec.kind == "cost":
            top = float(C.max())
            if top <= 0:
                msg = f"risk spec 'cost' needs a positive cost in task {task.name!r}'s matrix."
                raise ConfigurationError(msg)
            loss = C / top
        else:
            loss = ((C.min(axis=1, keepdims=True) < C) & guarded[None, :]).astype(np.float64)
        for arr in (is_safe, guarded, loss, always):
            arr.setflags(write=False)
        self._always = is_safe & always
        self.task = task
        self.spec = spec
        self.cost = C
        self.safe = is_safe
        """Which actions the guard may downgrade to, (m,)."""
        self.guarded = guarded
        """Which actions the guard may replace, (m,)."""
        self.loss = loss
        """The loss matrix L[ℓ, a] of the risk, (k, m), in [0, 1]."""

    def scores(self, Q: NDArray[np.float64], actions: NDArray[np.intp]) -> NDArray[np.float64]:
        """The score ``s = 1 − Σ_ℓ q(ℓ)·L[ℓ, a]`` of each row's action, (n,)."""
        expected = expected_costs(Q, self.loss, check_input=False)
        s: NDArray[np.float64] = 1.0 - expected[np.arange(len(actions)), actions]
        return s

    def downgrades(
        self, Q: NDArray[np.float64], executable: NDArray[np.bool_] | None = None
    ) -> NDArray[np.intp]:
        """Per row, the safe (and executable) action of least expected cost under Q.

        A safe action that is not sampled can always be carried out, and every guard has
        one (see :class:`RiskGuard`), so the result is always a safe action.
        """
        allowed = np.broadcast_to(self.safe, (Q.shape[0], self.safe.size))
        if executable is not None:
            allowed = allowed & (np.asarray(executable, dtype=bool) | self._always)
        return least_cost_actions(
            expected_costs(Q, self.cost, check_input=False), allowed=allowed, check_input=False
        )

    def apply(
        self,
        Q: ArrayLike,
        actions: ArrayLike,
        threshold: float,
        *,
        guardable: ArrayLike | None = None,
        executable: ArrayLike | None = None,
    ) -> tuple[NDArray[np.intp], NDArray[np.bool_], NDArray[np.float64]]:
        """Guard the actions at ``threshold``.

        Args:
            Q: Calibrated beliefs, (n, k).
            actions: The unguarded (MBR) action indices, (n,).
            threshold: λ; ``inf`` always guards.
            guardable: Rows the guard applies to (default all; the runtime's fallback
                decisions are not guarded).
            executable: Which actions each row's samples can carry out, (n, m).

        Returns:
            The guarded actions, whether each row was downgraded, and the scores.
        """
        Q_ = np.asarray(Q, dtype=np.float64)
        acts = np.asarray(actions, dtype=np.intp)
        s = self.scores(Q_, acts)
        down = self.guarded[acts] & (s < threshold)
        if guardable is not None:
            down &= np.asarray(guardable, dtype=bool)
        ex = None if executable is None else np.asarray(executable, dtype=bool)
        out = np.where(down, self.downgrades(Q_, ex), acts).astype(np.intp)
        return out, down, s


# --------------------------------------------------------------------------------------
# risk of each threshold


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


# --------------------------------------------------------------------------------------
# p-values


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
                delta=_check_level(data["delta"], "risk control delta"),
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


def _check_grid(grid: ArrayLike | None) -> NDArray[np.float64]:
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
    delta = _check_level(delta, "risk control delta δ")
    m = _check_grid(curve.thresholds).size
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
    delta = _check_level(delta, "risk control delta δ")
    lam = _check_grid(grid)
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
