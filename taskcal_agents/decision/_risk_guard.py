"""The risk a guard bounds and the guard itself, on one task.

A :class:`RiskSpec` names the risk and its limit α (``<action>_when_not:α``,
``<action>_wrong:α``, ``cost:α``); a :class:`RiskGuard` binds it to a task: the guarded and
safe actions, the risk's loss matrix, each action's score and the downgrade to the cheapest
safe action. The kinds and the rule are described under
:func:`~taskcal_agents.decision.calibrate_risk`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from calibrators import expected_costs, least_cost_actions
from taskcal_agents.decision._task import Task
from taskcal_agents.errors import ConfigurationError

__all__ = ["ANY_ACTION", "RiskGuard", "RiskKind", "RiskSpec", "check_level"]

RiskKind = Literal["when_not", "wrong", "cost"]
"""What a :class:`RiskSpec` bounds (see :func:`~taskcal_agents.decision.calibrate_risk`)."""

ANY_ACTION = "any"
"""The action of a spec that stands for every action that is not safe."""

_SUFFIXES: tuple[tuple[str, RiskKind], ...] = (("_when_not", "when_not"), ("_wrong", "wrong"))


def check_level(value: Any, what: str) -> float:
    """``value`` as a level in (0, 1) (a limit α or the level δ); ``what`` names it."""
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
    """The risk to bound and its limit α (the kinds: see ``calibrate_risk``).

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
        object.__setattr__(self, "alpha", check_level(self.alpha, "risk limit α"))
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
