"""The stopping rule's prior: how much an item's samples vary, fitted on calibration samples.

Adaptive N (:mod:`taskcal_agents.decision._adaptive`) models an item's outcome probabilities
p (one per task outcome, then unparsed) as drawn from Dirichlet(a). :func:`fit_stopping_prior`
fits a by maximum likelihood on the calibration items' outcome counts: each item's counts
c_i out of n_i samples have the Dirichlet-multinomial likelihood

    P(c_i | a) = n_i! / ∏_j c_ij! · Γ(A) / Γ(A + n_i) · ∏_j Γ(a_j + c_ij) / Γ(a_j),  A = Σ_j a_j,

maximised by Minka's fixed-point iteration (Minka, "Estimating a Dirichlet distribution",
2000), each step followed by a one-dimensional search of the total A at the step's shares
(the fixed point alone creeps towards a large A). The total A says how much items vary: a
small A, items whose samples mostly agree; a large one, items whose samples look like
draws from the pooled shares. An outcome never seen keeps a concentration of
:data:`MIN_CONCENTRATION`, so the rule still considers it; the total is capped at
:data:`MAX_TOTAL`.

The fitted prior is stored in the calibrator artefact (field ``stopping_prior``,
:meth:`StoppingPrior.to_dict`); a reader that ignores it has no fitted prior, and its adaptive
N draws all N samples.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import minimize_scalar
from scipy.special import digamma, gammaln

from taskcal_agents.decision._task import Task
from taskcal_agents.errors import ConfigurationError

__all__ = [
    "FEW_ITEMS",
    "MAX_TOTAL",
    "MIN_CONCENTRATION",
    "StoppingPrior",
    "StoppingPriorWarning",
    "few_items_message",
    "fit_stopping_prior",
]

FEW_ITEMS = 100
"""Below this many items ``taskcal fit`` warns that the prior is weakly fitted: ε's rate was
measured with priors fitted on 120–600 items (docs: Adaptive N)."""

MIN_CONCENTRATION = 1e-3
"""The smallest concentration :func:`fit_stopping_prior` gives an outcome (one never seen)."""

MAX_TOTAL = 1e3
"""The largest total A :func:`fit_stopping_prior` returns. Items whose samples vary no more
than draws from one shared distribution push the maximum-likelihood A to infinity; at
A = 1,000 the predictive variance of 16 samples is within 2 % of the multinomial's."""

UNPARSED = "<unparsed>"
"""The name of the unparsed outcome in a stored prior (after the task's outcomes)."""


class StoppingPriorWarning(UserWarning):
    """The stopping prior was fitted on fewer than :data:`FEW_ITEMS` items."""


def few_items_message(n_items: int) -> str:
    """What a :class:`StoppingPriorWarning` says of a prior fitted on ``n_items`` items."""
    return (
        f"adaptive N's stopping prior is fitted on {n_items} items (fewer than {FEW_ITEMS}): "
        "how much this model's samples vary is barely measured, so a rule stopping by it may "
        "change more decisions than its epsilon says (the bound was measured with priors "
        "fitted on 120-600 items); sample more items before relying on adaptive N."
    )


@dataclass(frozen=True)
class StoppingPrior:
    """The Dirichlet prior of adaptive N's stopping rule over a task's outcomes.

    Attributes:
        outcomes: The task outcomes it is for (:attr:`Task.outcomes
            <taskcal_agents.decision.Task.outcomes>`), in order; the unparsed outcome
            follows them.
        concentration: One concentration > 0 per outcome, then the unparsed one.
        n_items: The calibration items it was fitted on (0: not fitted, e.g. uniform).
    """

    outcomes: tuple[str, ...]
    concentration: tuple[float, ...]
    n_items: int = 0

    def __post_init__(self) -> None:
        a = np.asarray(self.concentration, dtype=np.float64)
        if (
            len(self.outcomes) < 1
            or a.shape != (len(self.outcomes) + 1,)
            or not np.all(np.isfinite(a))
            or not np.all(a > 0)
        ):
            msg = (
                f"StoppingPrior needs one finite concentration > 0 per outcome of "
                f"{list(self.outcomes)!r} and one for unparsed samples "
                f"({len(self.outcomes) + 1} in all), got {list(self.concentration)!r}."
            )
            raise ConfigurationError(msg)
        if isinstance(self.n_items, bool) or not isinstance(self.n_items, int) or self.n_items < 0:
            msg = f"StoppingPrior n_items must be an integer >= 0, got {self.n_items!r}."
            raise ConfigurationError(msg)
        object.__setattr__(self, "outcomes", tuple(str(o) for o in self.outcomes))
        object.__setattr__(self, "concentration", tuple(float(x) for x in a))

    @classmethod
    def uniform(cls, task: Task, concentration: float = 1.0) -> StoppingPrior:
        """The symmetric prior, ``concentration`` on every outcome (the rule's default)."""
        return cls(task.outcomes, (float(concentration),) * (len(task.outcomes) + 1))

    @property
    def total(self) -> float:
        """A = Σ a: how strongly the prior pulls an item's counts to its mean shares."""
        return float(sum(self.concentration))

    def for_task(self, task: Task) -> NDArray[np.float64]:
        """The concentration vector, checked against ``task``'s outcomes.

        Raises:
            ConfigurationError: If the prior was fitted for other outcomes.
        """
        if self.outcomes != task.outcomes:
            msg = (
                f"stopping prior was fitted for outcomes {list(self.outcomes)!r} but task "
                f"{task.name!r} has outcomes {list(task.outcomes)!r}; refit it on samples of "
                "this task (`taskcal fit`)."
            )
            raise ConfigurationError(msg)
        return np.asarray(self.concentration, dtype=np.float64)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form stored in a calibrator artefact."""
        return {
            "outcomes": [*self.outcomes, UNPARSED],
            "concentration": list(self.concentration),
            "n_items": self.n_items,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StoppingPrior:
        """Rebuild a prior from :meth:`to_dict`'s form.

        Raises:
            ConfigurationError: If ``data`` is not such a form.
        """
        outcomes = data.get("outcomes") if isinstance(data, Mapping) else None
        concentration = data.get("concentration") if isinstance(data, Mapping) else None
        if (
            not isinstance(outcomes, list)
            or not outcomes
            or outcomes[-1] != UNPARSED
            or not all(isinstance(o, str) for o in outcomes)
            or not isinstance(concentration, list)
            or not all(
                isinstance(x, int | float) and not isinstance(x, bool) for x in concentration
            )
        ):
            msg = (
                "stopping prior must be {'outcomes': [..., '<unparsed>'], 'concentration': "
                f"[numbers], 'n_items': int}}, got {data!r}."
            )
            raise ConfigurationError(msg)
        n_items = data.get("n_items", 0)
        return cls(tuple(outcomes[:-1]), tuple(concentration), n_items)


def _log_likelihood(
    a: NDArray[np.float64], c: NDArray[np.float64], n: NDArray[np.float64]
) -> float:
    """The Dirichlet-multinomial log-likelihood of the counts, up to the multinomial terms."""
    total = a.sum()
    return float(np.sum(gammaln(total) - gammaln(n + total)) + np.sum(gammaln(c + a) - gammaln(a)))


def fit_stopping_prior(
    task: Task, counts: ArrayLike, *, max_iter: int = 1000, tol: float = 1e-8
) -> StoppingPrior:
    """Fit the stopping prior on calibration items' outcome counts, by maximum likelihood.

    Args:
        task: The task.
        counts: One row per item: its samples' counts per task outcome, then unparsed
            (:func:`~taskcal_agents.decision._adaptive.outcome_counts`), shape
            ``(n_items, len(task.outcomes) + 1)``. Items with fewer than 2 samples carry
            no information on how samples vary and are left out.
        max_iter: Fixed-point iterations at most.
        tol: Stop when no concentration changes by more than this (relative).

    Returns:
        The prior; each concentration at least :data:`MIN_CONCENTRATION`, the total at most
        :data:`MAX_TOTAL`.

    Raises:
        ConfigurationError: If ``counts`` has the wrong shape or values, or fewer than 2
            items have 2 samples or more.
    """
    k = len(task.outcomes) + 1
    c = np.asarray(counts)
    if c.ndim != 2 or c.shape[1] != k or not np.all(c >= 0) or not np.all(c == np.round(c)):
        msg = (
            f"fit_stopping_prior parameter 'counts' must be an (n_items, {k}) array of "
            f"integer counts >= 0 (per outcome of {list(task.outcomes)!r}, then unparsed), got "
            f"shape {c.shape}."
        )
        raise ConfigurationError(msg)
    c = c.astype(np.float64)
    c = c[c.sum(axis=1) >= 2]
    if c.shape[0] < 2:
        msg = (
            "fit_stopping_prior needs at least 2 items with 2 samples or more, got "
            f"{c.shape[0]}; sample more items (`taskcal sample --n 16`)."
        )
        raise ConfigurationError(msg)
    n = c.sum(axis=1)
    shares = c / n[:, None]
    mean = np.maximum(shares.mean(axis=0), MIN_CONCENTRATION)
    a = mean / mean.sum()  # start at total 1 with the pooled shares
    low = np.log(k * MIN_CONCENTRATION)
    for _ in range(max_iter):
        total = a.sum()
        denominator = np.sum(digamma(n + total) - digamma(total))
        numerator = np.sum(digamma(c + a) - digamma(a), axis=0)
        step = np.maximum(a * numerator / denominator, MIN_CONCENTRATION)
        shares = step / step.sum()
        best = minimize_scalar(
            lambda log_total, shares=shares: -_log_likelihood(np.exp(log_total) * shares, c, n),
            bounds=(low, np.log(MAX_TOTAL)),
            method="bounded",
            options={"xatol": 1e-10},
        )
        new = np.maximum(np.exp(best.x) * shares, MIN_CONCENTRATION)
        if _log_likelihood(new, c, n) < _log_likelihood(step, c, n):
            new = step  # the search never makes the fit worse than the fixed point
        new *= min(1.0, MAX_TOTAL / new.sum())
        done = np.max(np.abs(new - a) / a) < tol
        a = new
        if done:
            break
    return StoppingPrior(task.outcomes, tuple(a.tolist()), int(c.shape[0]))
