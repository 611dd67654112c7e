"""Adaptive N: stop sampling once more samples would hardly change the action.

After m of N samples, with outcome counts c (one per task outcome, then the unparsed
samples: the labels g_T reads, an ungrounded call apart under grounded belief features,
see :attr:`Task.outcomes <taskcal_agents.decision.Task.outcomes>`), the stopping rule asks:
if the remaining N − m samples were drawn, how likely is the decision to change? An item's
outcome probabilities p are modelled as drawn from the **stopping prior** Dirichlet(a), so
given c they follow Dirichlet(a + c), and the N − m missing samples' counts f follow the
Dirichlet-multinomial predictive. Then

    P(change) = Σ_f P(f | c) · [action(c + f) ≠ action(c)],

where action(·) is what :class:`~taskcal_agents.decision.Decider` does with those samples:
the belief built by the task's own rule (:meth:`Task.belief_from_outcomes
<taskcal_agents.decision.Task.belief_from_outcomes>`), the Decider's calibration, then MBR among
the executable actions and the Decider's risk guard, if any, through the one map the
Decider itself uses (:meth:`Decider.choose_actions
<taskcal_agents.decision.Decider.choose_actions>`), so the rule watches the action the
runtime returns; the task's fallback action when no sample is parsed. A sampled action (a
tool call) that no sample carries out yet becomes executable when a future sample takes its
label. The sum runs over every possible f when there are at most ``draws`` of them (the
tool decision: 455 futures after 4 of 16 samples), so the estimate is exact under
the prior; otherwise it is a Monte-Carlo mean over ``draws`` draws, seeded by the counts,
so the rule is a pure function either way. Sampling stops when P(change) < ε, and always at
N (:func:`stop_check`). The rounds and ε are :class:`~taskcal_agents.decision.AdaptiveSampling`.

The stopping prior is not the belief's smoothing α: α = 0.1 on every outcome says that an
item whose first four samples agree almost surely always agrees, which the recorded runs
contradict. :func:`fit_stopping_prior` fits a by maximum likelihood on the calibration
samples' counts (the Dirichlet-multinomial marginal likelihood of each item's N samples),
so the prior says how much items of this task and model really vary; ``taskcal fit`` stores
it in the artefact (:class:`StoppingPrior`) and the front doors use it. Without one
(a bare calibrator, or an artefact written before it was stored) the rule draws all N
samples and warns once (:class:`UnfittedPriorWarning`): the uniform prior a = 1 does not
hold ε (:func:`change_probability` still takes it, to measure that).

What ε promises: averaged over items like those the prior was fitted on, the decisions
that stop early differ from the N-sample decision with probability below ε. It is not a
per-item guarantee, and it holds only as far as the fitted prior describes the items
served; the results page measures the realised rate on simulated and recorded runs.

The rule needs counts that are multinomial: a task that clusters open answers
(``answer_clusters``) is refused (:func:`check_adaptive`).

A risk limit (:class:`~taskcal_agents.decision._risk_control.RiskControl`) is certified on beliefs
from N samples; with adaptive N the decisions are made on fewer, so its guarantee covers
them only approximately.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
from langchain_core.messages import AIMessage
from numpy.typing import ArrayLike, NDArray
from scipy.special import gammaln

from taskcal_agents.decision._decider import Decider, Decision
from taskcal_agents.decision._executability import ungrounded_flags
from taskcal_agents.decision._options import AdaptiveSampling
from taskcal_agents.decision._stopping_prior import StoppingPrior, fit_stopping_prior
from taskcal_agents.decision._task import UNGROUNDED_CALL, Task
from taskcal_agents.decision._terms import decision_terms
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.parsing import GroundingContext

__all__ = [
    "AdaptiveSampling",
    "StopCheck",
    "StoppingPrior",
    "UnfittedPriorWarning",
    "change_probability",
    "check_adaptive",
    "fit_stopping_prior",
    "message_counts",
    "outcome_counts",
    "stop_check",
    "stop_check_messages",
    "with_stop",
]


@dataclass(frozen=True)
class StopCheck:
    """The stopping rule's verdict after ``n_drawn`` of ``n_max`` samples.

    Attributes:
        stop: Whether to stop sampling (P(change) < ε, or ``n_drawn >= n_max``).
        change_probability: The estimated probability that drawing up to ``n_max`` would
            change the action (0 at ``n_max``).
        n_drawn: The samples drawn so far.
        n_max: The most samples the rule would draw (N).
    """

    stop: bool
    change_probability: float
    n_drawn: int
    n_max: int


def check_adaptive(task: Task, owner: str, adaptive: AdaptiveSampling | None = None) -> None:
    """Refuse adaptive N for a task whose counts are not multinomial, or a prior not for it.

    Raises:
        ConfigurationError: If ``task`` clusters open answers (``answer_clusters``): the
            modal cluster's share is not a count the posterior predictive can extend;
            if it reads the relevance features (which unseen samples would change); or
            ``adaptive.prior`` was fitted for other outcomes than ``task``'s.
    """
    prior = None if adaptive is None else adaptive.prior
    if prior is not None and prior.outcomes != task.outcomes:
        msg = (
            f"{owner} parameter 'adaptive.prior' was fitted for outcomes "
            f"{list(prior.outcomes)!r} but task {task.name!r} has outcomes "
            f"{list(task.outcomes)!r}; fit it on samples of this task (fit_stopping_prior) "
            "or leave it None to take the calibrator artefact's."
        )
        raise ConfigurationError(msg)
    if task.answer_clusters is not None:
        msg = (
            f"{owner} parameter 'adaptive' cannot be used with task {task.name!r}: it clusters "
            "open answers (answer_clusters), and the modal cluster's share is not a label "
            "count the stopping rule can extend; pass adaptive=None to draw all N samples."
        )
        raise ConfigurationError(msg)
    if task.reads_relevance:
        msg = (
            f"{owner} parameter 'adaptive' cannot be used with task {task.name!r}: it reads "
            "the relevance features (grounding.relevance), which the samples not yet drawn "
            "would change and the stopping rule cannot predict; pass adaptive=None to draw "
            "all N samples, or a task without them (tool_decision(grounding=GroundingSpec())), "
            "which the shipped calibrators do not serve."
        )
        raise ConfigurationError(msg)


def outcome_counts(task: Task, labels: Sequence[str | None]) -> NDArray[np.int64]:
    """Count samples into the rule's outcomes: one per task outcome, then unparsed.

    Args:
        task: The task.
        labels: One outcome per sample (:meth:`Task.sample_outcomes
            <taskcal_agents.decision.Task.sample_outcomes>`; for a task without grounding the
            labels g_T reads; ``None``: unparsed, before the task's ``unparsed`` policy,
            which the belief applies).

    Returns:
        The counts, shape ``(len(task.outcomes) + 1,)``.

    Raises:
        ConfigurationError: If a label is not one of the task's outcomes.
    """
    outcomes = task.outcomes
    index = {o: i for i, o in enumerate(outcomes)}
    counts = np.zeros(len(outcomes) + 1, dtype=np.int64)
    for label in labels:
        if label is None:
            counts[-1] += 1
        elif label in index:
            counts[index[label]] += 1
        else:
            msg = (
                f"outcome_counts got label {label!r}, which is not one of task {task.name!r}'s "
                f"outcomes {list(outcomes)!r}; pass None for an unparsed sample."
            )
            raise ConfigurationError(msg)
    return counts


def _futures(
    a: NDArray[np.float64], remaining: int, draws: int, rng_seed: Sequence[int]
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """The future counts and their weights under Dirichlet-multinomial(remaining, a).

    Every composition of ``remaining`` over the outcomes with a > 0, weighted by its
    predictive probability, when there are at most ``draws`` of them; else ``draws``
    Monte-Carlo draws of equal weight.
    """
    live = np.flatnonzero(a > 0)
    j = live.size
    n_futures = math.comb(remaining + j - 1, j - 1)
    future = np.zeros((0, a.size), dtype=np.int64)
    if n_futures <= draws:
        # Stars and bars: j - 1 bars among remaining + j - 1 places.
        bars = np.array(
            list(itertools.combinations(range(remaining + j - 1), j - 1)), dtype=np.int64
        ).reshape(n_futures, j - 1)
        edges = np.concatenate(
            [np.full((n_futures, 1), -1), bars, np.full((n_futures, 1), remaining + j - 1)],
            axis=1,
        )
        future = np.zeros((n_futures, a.size), dtype=np.int64)
        future[:, live] = np.diff(edges, axis=1) - 1
        al = a[live]
        f = future[:, live]
        log_w = (
            gammaln(remaining + 1)
            - gammaln(f + 1).sum(axis=1)
            + gammaln(al.sum())
            - gammaln(al.sum() + remaining)
            + (gammaln(al + f) - gammaln(al)).sum(axis=1)
        )
        weight = np.exp(log_w)
        return future, weight / weight.sum()
    rng = np.random.default_rng(np.random.SeedSequence(list(rng_seed)))
    p = np.zeros((draws, a.size))
    p[:, live] = rng.dirichlet(a[live], size=draws)
    future = rng.multinomial(remaining, p)
    return future.astype(np.int64), np.full(draws, 1.0 / draws)


def _actions(
    decider: Decider,
    counts: NDArray[np.int64],
    executable: NDArray[np.bool_],
    cost: NDArray[np.float64] | None = None,
) -> NDArray[np.intp]:
    """The Decider's action for each row of outcome counts and executable actions.

    The beliefs are built by the task's rule from the counts (as label lists), calibrated
    in one call and decided by :meth:`Decider.choose_actions` (executable MBR, then the
    risk guard), as :meth:`Decider.decide_belief` decides; rows without a parsed sample
    take the task's fallback action, as it does.
    """
    task = decider.task
    outcomes = [*task.outcomes, None]
    beliefs = [
        task.belief_from_outcomes(
            [o for o, c in zip(outcomes, row.tolist(), strict=True) for _ in range(c)],
            alpha=decider.alpha,
        )
        for row in counts
    ]
    q = decider.calibrate(np.stack([decider.calibrator_input(b) for b in beliefs]))
    chosen = decider.choose_actions(q, executable, cost=cost).actions.copy()
    no_parsed = np.array([b.n_parsed == 0 for b in beliefs])
    chosen[no_parsed] = task.action_index(task.default_action)
    return chosen


def change_probability(
    decider: Decider,
    counts: ArrayLike,
    n_max: int,
    *,
    executable: ArrayLike | None = None,
    draws: int = 4096,
    prior: StoppingPrior | None = None,
    cost: NDArray[np.float64] | None = None,
) -> float:
    """The posterior-predictive probability that drawing up to ``n_max`` changes the action.

    Args:
        decider: The task, calibrator and α that decide.
        counts: Outcome counts so far, shape ``(len(task.outcomes) + 1,)``: per task
            outcome, then unparsed (:func:`outcome_counts`).
        n_max: The number of samples N the draw would reach.
        executable: Which actions the samples so far can carry out, shape ``(m,)``
            (:func:`~taskcal_agents.decision.carried_actions`); ``None``: all.
        draws: The most futures summed exactly; past that, the Monte-Carlo draws.
        prior: The stopping prior (``None``, or one fitted for other outcomes, as an
            explicit prior is for a middleware's after-tool-result task: the Decider's,
            from its calibrator artefact, else :meth:`StoppingPrior.uniform`).
        cost: The decision's cost matrix (under the task's ``effects``, that of the call
            the samples so far would send; :func:`~taskcal_agents.decision._terms.decision_terms`);
            ``None``: the task's.

    Returns:
        The probability, in [0, 1]; 0 when ``counts`` already hold ``n_max`` samples or
        more.

    Raises:
        ConfigurationError: If the counts, ``n_max``, ``executable``, ``draws`` or the
            prior are invalid.
    """
    task = decider.task
    k, m = len(task.outcomes), len(task.action_list)
    c = np.asarray(counts)
    if c.shape != (k + 1,) or not np.all(c >= 0) or not np.all(c == np.round(c)):
        msg = (
            f"change_probability parameter 'counts' must hold {k + 1} integer counts >= 0 (one "
            f"per outcome of {list(task.outcomes)!r}, then the unparsed count), got "
            f"{c.tolist()!r}."
        )
        raise ConfigurationError(msg)
    c = c.astype(np.int64)
    if isinstance(n_max, bool) or not isinstance(n_max, int | np.integer) or n_max < 1:
        msg = f"change_probability parameter 'n_max' must be an integer >= 1, got {n_max!r}."
        raise ConfigurationError(msg)
    if isinstance(draws, bool) or not isinstance(draws, int) or draws < 1:
        msg = f"change_probability parameter 'draws' must be an integer >= 1, got {draws!r}."
        raise ConfigurationError(msg)
    ok = np.ones(m, dtype=bool) if executable is None else np.asarray(executable)
    if ok.shape != (m,) or ok.dtype != np.bool_:
        msg = (
            f"change_probability parameter 'executable' must be {m} booleans (one per action "
            f"of {task.action_list!r}) or None, got {np.asarray(executable).tolist()!r}."
        )
        raise ConfigurationError(msg)
    if prior is not None and not isinstance(prior, StoppingPrior):
        msg = f"change_probability parameter 'prior' must be a StoppingPrior, got {prior!r}."
        raise ConfigurationError(msg)
    if prior is None or prior.outcomes != task.outcomes:
        prior = decider.stopping_prior or StoppingPrior.uniform(task)
    remaining = int(n_max) - int(c.sum())
    if remaining <= 0:
        return 0.0
    future, weight = _futures(
        prior.for_task(task) + c, remaining, draws, [*c.tolist(), n_max, draws]
    )
    # A sampled action becomes executable when a future sample takes its label (an
    # ungrounded call only where the task sends any call).
    grows = np.zeros((future.shape[0], m), dtype=bool)
    index = {o: i for i, o in enumerate(task.outcomes)}
    send_any = task.grounding is None or task.grounding.execute == "any"
    for a in task.sampled_actions:
        if a in index:
            grows[:, task.action_index(a)] = future[:, index[a]] > 0
            if a == task.call_action and send_any and UNGROUNDED_CALL in index:
                grows[:, task.action_index(a)] |= future[:, index[UNGROUNDED_CALL]] > 0
            relabels = task.grounding is not None and task.grounding.belief == "relabel"
            if a == task.call_action and send_any and relabels and task.ask_action in index:
                # A relabelled ungrounded call counts as an ask but may still be sent: the
                # rule cannot tell it from a question, so it assumes it can (more sampling).
                grows[:, task.action_index(a)] |= future[:, index[str(task.ask_action)]] > 0
    if task.confirm_action is not None and task.call_action is not None:  # it confirms the call
        grows[:, task.action_index(task.confirm_action)] = grows[
            :, task.action_index(task.call_action)
        ]
    rows = np.concatenate([(c + future), ok | grows], axis=1).astype(np.int64)
    rows = np.concatenate([np.append(c, ok)[None, :].astype(np.int64), rows])
    distinct, inverse = np.unique(rows, axis=0, return_inverse=True)
    actions = _actions(decider, distinct[:, : k + 1], distinct[:, k + 1 :].astype(bool), cost)
    per_row = actions[np.ravel(inverse)]
    changed = per_row[1:] != per_row[0]
    return float(min(1.0, max(0.0, np.sum(weight[changed]))))


class UnfittedPriorWarning(UserWarning):
    """Adaptive N has no fitted stopping prior, so it draws all N samples."""


_WARNED_UNFITTED: set[str] = set()


def _fitted_prior(decider: Decider, adaptive: AdaptiveSampling) -> StoppingPrior | None:
    """The stopping prior the rule may stop by, or ``None``.

    ``adaptive.prior`` when it is for the task, else the Decider's (its calibrator
    artefact's); ``None`` unless it was fitted (``n_items > 0``). The uniform prior does
    not hold ε: with a non-identity calibration map the realised change rate reached
    15-65 % at ε = 0.05 (docs: Adaptive N).
    """
    prior = adaptive.prior
    if prior is None or prior.outcomes != decider.task.outcomes:
        prior = decider.stopping_prior
    return prior if prior is not None and prior.n_items > 0 else None


def _warn_unfitted(task: Task) -> None:
    """Warn once per task name that adaptive N draws all N samples for want of a prior."""
    if task.name in _WARNED_UNFITTED:
        return
    _WARNED_UNFITTED.add(task.name)
    msg = (
        f"adaptive N for task {task.name!r} has no fitted stopping prior, so it draws all N "
        "samples (a uniform prior does not hold epsilon); fit one with `taskcal fit` (the "
        "artefact stores it) or pass AdaptiveSampling(prior=fit_stopping_prior(...))."
    )
    warnings.warn(msg, UnfittedPriorWarning, stacklevel=2)


def stop_check(
    decider: Decider,
    counts: ArrayLike,
    n_max: int,
    adaptive: AdaptiveSampling,
    *,
    executable: ArrayLike | None = None,
    cost: NDArray[np.float64] | None = None,
) -> StopCheck:
    """Apply the stopping rule: stop when P(change) < ε or N is reached.

    Without a fitted stopping prior (:func:`_fitted_prior`) the rule never stops early: it
    warns once (:class:`UnfittedPriorWarning`) and reports a change probability of 1 until N.

    Args:
        decider: The task, calibrator and α that decide.
        counts: Outcome counts so far (:func:`outcome_counts`).
        n_max: N.
        adaptive: ε and the futures summed exactly (or drawn).
        executable: Which actions the samples so far can carry out (``None``: all).
        cost: The cost matrix of the decision (under the task's ``effects``, that of the
            call the samples so far would send); ``None``: the task's.

    Returns:
        The verdict.
    """
    n_drawn = int(np.asarray(counts).sum())
    if _fitted_prior(decider, adaptive) is None:
        _warn_unfitted(decider.task)
        return StopCheck(
            stop=n_drawn >= n_max,
            change_probability=0.0 if n_drawn >= n_max else 1.0,
            n_drawn=n_drawn,
            n_max=int(n_max),
        )
    p = change_probability(
        decider, counts, n_max, executable=executable, draws=adaptive.draws,
        prior=adaptive.prior, cost=cost,
    )  # fmt: skip
    return StopCheck(
        stop=n_drawn >= n_max or p < adaptive.epsilon,
        change_probability=p,
        n_drawn=n_drawn,
        n_max=int(n_max),
    )


def stop_check_messages(
    decider: Decider,
    messages: Sequence[AIMessage],
    n_max: int,
    adaptive: AdaptiveSampling,
    *,
    tool_names: Sequence[str] | None = None,
    answered_calls: Collection[str] = (),
    context: GroundingContext | None = None,
) -> StopCheck:
    """:func:`stop_check` on sampled messages, parsed as :meth:`Decider.decide` parses them.

    Args:
        decider: The task, calibrator and α that decide.
        messages: The samples drawn so far.
        n_max: N.
        adaptive: ε and the futures summed exactly (or drawn).
        tool_names: The offered tools (see :meth:`Decider.decide`).
        answered_calls: The calls already answered (see :meth:`Decider.decide`).
        context: The request's tools and conversation, for a task that grounds its calls
            (see :meth:`Decider.decide`).

    Returns:
        The verdict.
    """
    task = decider.task
    labels, _, groundings = decider.read_samples(
        messages, tool_names=tool_names, answered_calls=answered_calls, context=context
    )
    terms = decision_terms(
        task, messages, labels, tool_names=tool_names, groundings=groundings, context=context
    )
    counts = outcome_counts(task, task.sample_outcomes(labels, ungrounded_flags(groundings)))
    return stop_check(
        decider, counts, n_max, adaptive, executable=terms.executable, cost=terms.cost
    )


def message_counts(
    decider: Decider,
    messages: Sequence[AIMessage],
    *,
    tool_names: Sequence[str] | None = None,
    answered_calls: Collection[str] = (),
    context: GroundingContext | None = None,
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """The outcome counts and executable actions of sampled messages.

    The messages are parsed as :meth:`Decider.decide` parses them; the result is what
    :func:`change_probability` takes.
    """
    task = decider.task
    labels, _, groundings = decider.read_samples(
        messages, tool_names=tool_names, answered_calls=answered_calls, context=context
    )
    terms = decision_terms(
        task, messages, labels, tool_names=tool_names, groundings=groundings, context=context
    )
    outcomes = task.sample_outcomes(labels, ungrounded_flags(groundings))
    return outcome_counts(task, outcomes), np.asarray(terms.executable, dtype=bool)


def with_stop(decision: Decision, check: StopCheck | None) -> Decision:
    """Record in ``decision`` where adaptive N stopped.

    Args:
        decision: The decision on the samples drawn.
        check: The stopping rule's last verdict (``None``: no check was made).

    Returns:
        A copy with ``stopped_early`` (the rule's verdict said stop before N samples were
        requested) and
        ``change_probability`` (the last estimate when it stopped early, else 0: at N
        nothing can change).
    """
    stopped = check is not None and check.stop and check.n_drawn < check.n_max
    p = check.change_probability if check is not None and stopped else 0.0
    return decision.model_copy(update={"stopped_early": stopped, "change_probability": p})
