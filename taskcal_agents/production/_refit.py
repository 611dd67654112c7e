"""Refit a calibrator artefact on logged, labelled decisions; promote it only if shown better.

:func:`refit_from_records` is the pure core of ``taskcal refit`` (and of the drift
benchmark): it reads decision-log records (:meth:`DecisionLog.read
<taskcal_agents.production.DecisionLog.read>`, outcomes joined), refits the old
artefact's map on them and compares the two maps on the most recent records.

Data. The records of the artefact's task (``task`` and ``labels`` must match; records of
other tasks are counted and left out) that carry an outcome and were *served*: at least
one sample counted towards a label (``counts`` sum > 0). Decisions without a usable
sample took the fallback action and never reached the calibrator, so they are left out
("fit only on what is served"); decisions whose MBR action could not be carried out
reached it and stay. Records of other artefacts are used too (p̂ does not depend on the
calibrator) and counted. The calibrator input is the logged p̂ (``probs``), or, for a
map that reads the belief features (``unparsed: other``, ``fit_metrics["inputs"] ==
"features"``), the features rebuilt from the logged counts, unparsed count, ungrounded
calls (``n_ungrounded``, under grounded belief features) and the artefact's α
(:class:`~taskcal_agents.decision.Belief`). Which actions each decision could
carry out is read back from the log: an action no sample names is not executable (a
sampled action needs a sample labelled with it; a tool call, under ``execute: grounded``,
a grounded one), and for a decision whose MBR action was
replaced (``fallback`` on a served decision) that action is not executable either.

Split. Records are ordered by ``time``; the most recent ``holdout`` fraction is the
holdout (what will be served next looks like the recent past), the rest trains the new
map, with recency weights ``0.5 ** (age_days / half_life_days)`` (age from ``now``,
default the newest record's time) when a half-life is given. The new map has the old
one's calibrator name and parameters (``calibrator`` overrides) and is fitted by
:func:`~taskcal_agents.workflow.fit_calibrator`. The new artefact embeds the task
the comparison used (``task``, default the old artefact's).

Monitor references. The fit sees only served training records and no cross-fit, so the
new artefact's ``fit_metrics`` take the drift monitor's references from the log itself:
``fallback_rate`` (fallback records / all records of the task), ``unparsed_rate`` (mean
``n_unparsed / n_samples`` with its SE) and the NLL as the new map's ``holdout`` NLL with
its SE (what :mod:`taskcal_agents.production._monitor` reads before ``crossval``).

Comparison. On the holdout both maps decide through the runtime's path
(:class:`~taskcal_agents.decision.Decider`: calibrate, executable MBR), and per item
``delta_i = C[y_i, a_new_i] − C[y_i, a_old_i]``; its mean and paired standard error,
and the paired NLL difference ``-log q_new[y] + log q_old[y]``, are reported.
**Promotion rule** (two one-sided tests at ``z``):

* *evidence*: the new map's NLL is lower, ``mean(nll_delta) + z · SE(nll_delta) < 0``;
* *guard*: its cost is not shown higher, ``mean(delta) − z · SE(delta) <= margin``.

Why NLL for the evidence: both maps are fitted by NLL, a proper score whose per-item
differences are continuous and small, so a few hundred holdout decisions show a real
calibration change; the realised-cost difference is nonzero only where the two maps
take different actions and is too noisy to *show* an improvement at that size
(``benchmarks/bench_drift.py``: the rule "cost upper bound <= 0" promoted after 0–25 %
of drifts that the refit fixed). The cost guard keeps a map out when the holdout shows
it costs more. Default ``z = 1.645`` (:data:`DEFAULT_Z`, one-sided 95 %); ``margin``
(cost units per decision, default 0) tolerates a cost increase. It is one decision per
refit (unlike the monitor's many metrics × windows, which need z = 3). On an unchanged
stream a refit on new data is rarely shown better, so the artefact in force stays.
Too few training or holdout records (:data:`MIN_TRAIN`, :data:`MIN_HOLDOUT`) or a fit
that fails keep the old artefact, with the reason.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from taskcal_agents._stats import mean_reference, paired_difference
from taskcal_agents.decision import (
    DEFAULT_ALPHA,
    Belief,
    CalibratorArtefact,
    Decider,
    Task,
    artefact_belief,
    one_pass_belief,
    raw_inputs,
)
from taskcal_agents.errors import ConfigurationError, DataFileError
from taskcal_agents.parsing import RELEVANCE_FEATURES
from taskcal_agents.production._decision_log import artefact_id, record_belief
from taskcal_agents.workflow import EvalArrays, fit_calibrator

__all__ = [
    "DEFAULT_Z",
    "MIN_HOLDOUT",
    "MIN_TRAIN",
    "RefitResult",
    "refit_from_records",
]

DEFAULT_Z = 1.645
"""The promotion rule's z, of both its one-sided tests (95 %): the upper bound on the mean
NLL difference and the lower bound on the mean cost increase."""
MIN_TRAIN = 20
"""Fewest served, labelled training records a refit needs."""
MIN_HOLDOUT = 10
"""Fewest served, labelled holdout records the comparison needs."""
_EPS = 1e-12  # the clip of calibrators.metrics.nll
_DAY_S = 86400.0


@dataclass
class RefitResult:
    """What :func:`refit_from_records` found and decided.

    Attributes:
        promoted: Whether the new artefact should replace the old one.
        reason: Why, in one human-readable sentence.
        artefact: The new artefact (refit provenance under ``metadata["refit"]``), or
            ``None`` when no map was fitted (too few records, a failed fit).
        n_records: Records read.
        n_other_task: Records of another task (left out).
        n_unlabelled: Records of the task without an outcome.
        n_unserved: Labelled records without a usable sample (fallback; left out).
        n_other_artefact: Used records logged under another artefact id than the old one.
        n_train: Training records.
        n_holdout: Holdout records.
        half_life_days: The recency half-life, or ``None`` (equal weights).
        z: The promotion rule's z.
        margin: The cost guard's margin (cost units per decision).
        old_cost: Mean realised cost of the old map's actions on the holdout.
        new_cost: The same for the new map.
        cost_diff: Mean of ``new − old`` per holdout item (negative: the new map is cheaper).
        cost_diff_se: Its paired standard error.
        old_nll: Mean NLL of the old map on the holdout.
        new_nll: The same for the new map.
        nll_diff: Mean of ``new − old`` NLL per holdout item.
        nll_diff_se: Its paired standard error.
        n_changed: Holdout items on which the two maps take different actions.
    """

    promoted: bool
    reason: str
    artefact: CalibratorArtefact | None = None
    n_records: int = 0
    n_other_task: int = 0
    n_unlabelled: int = 0
    n_unserved: int = 0
    n_other_artefact: int = 0
    n_train: int = 0
    n_holdout: int = 0
    half_life_days: float | None = None
    z: float = DEFAULT_Z
    margin: float = 0.0
    old_cost: float | None = None
    new_cost: float | None = None
    cost_diff: float | None = None
    cost_diff_se: float | None = None
    old_nll: float | None = None
    new_nll: float | None = None
    nll_diff: float | None = None
    nll_diff_se: float | None = None
    n_changed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def comparison(self) -> dict[str, Any]:
        """The counts and comparison figures as a JSON-able dict (no artefact)."""
        return {
            k: v
            for k, v in self.__dict__.items()
            if k not in {"artefact", "extra", "promoted", "reason"}
        }


@dataclass(frozen=True)
class _Rows:
    """The used records as arrays, in time order."""

    P: NDArray[np.float64]
    X: NDArray[np.float64] | None
    y: NDArray[np.intp]
    executable: NDArray[np.bool_]
    age_days: NDArray[np.float64]
    n_samples: NDArray[np.intp]
    inputs: NDArray[np.float64] | None = None
    costs: NDArray[np.float64] | None = None
    """Under the task's ``effects``, each record's cost matrix: that of the effect it logged
    (``None`` without effects)."""


def _relevance(record: Mapping[str, Any], source: str) -> tuple[float, ...]:
    """The logged relevance features of a decision, in :data:`RELEVANCE_FEATURES` order."""
    logged = record.get("relevance")
    try:
        values = tuple(float(logged[name]) for name in RELEVANCE_FEATURES)  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        values = ()
    if len(values) != len(RELEVANCE_FEATURES) or not all(map(math.isfinite, values)):
        missing = [
            n for n in RELEVANCE_FEATURES if not isinstance(logged, Mapping) or n not in logged
        ]
        msg = (
            f"decision record {record.get('id')!r} has relevance {logged!r}; the task reads "
            f"the relevance features, so each decision must log {list(RELEVANCE_FEATURES)!r} "
            "as finite numbers"
            + (f" (missing: {missing!r})" if missing else "")
            + "; decisions logged before the task read them, or before a feature was added, "
            "cannot refit it."
        )
        raise DataFileError(msg, path=source)
    return values


def _time(record: Mapping[str, Any], source: str) -> datetime:
    raw = record.get("time")
    try:
        t = datetime.fromisoformat(str(raw))
    except ValueError as exc:
        msg = f"decision record {record.get('id')!r} has no valid 'time' (ISO 8601), got {raw!r}."
        raise DataFileError(msg, path=source) from exc
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def _sample_counts(record: Mapping[str, Any], source: str) -> tuple[dict[str, float], int, int]:
    """A record's label counts, ``n_samples`` and ``n_unparsed``, checked.

    Raises:
        DataFileError: A count that is not a finite number >= 0, or more unparsed samples
            than samples.
    """
    try:
        counts = {str(k): float(v) for k, v in (record.get("counts") or {}).items()}
        n = float(record.get("n_samples") or 0)
        u = float(record.get("n_unparsed") or 0)
    except (AttributeError, TypeError, ValueError) as exc:
        msg = (
            f"decision record {record.get('id')!r} has bad 'counts', 'n_samples' or "
            f"'n_unparsed' ({exc})."
        )
        raise DataFileError(msg, path=source) from exc
    values = [*counts.values(), n, u]
    if not all(math.isfinite(v) and v >= 0 for v in values) or u > n:
        msg = (
            f"decision record {record.get('id')!r} has counts {counts!r}, n_samples {n:g}, "
            f"n_unparsed {u:g}: counts must be finite and >= 0, n_unparsed <= n_samples."
        )
        raise DataFileError(msg, path=source)
    return counts, int(n), int(u)


def _ungrounded(record: Mapping[str, Any], calls: float, source: str) -> int:
    """A record's ``n_ungrounded`` (0 when not logged), checked against its ``calls`` count.

    Raises:
        DataFileError: It is not an integer in [0, the call action's count].
    """
    value = record.get("n_ungrounded") or 0
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= calls
        or value != int(value)
    ):
        msg = (
            f"decision record {record.get('id')!r} has n_ungrounded {value!r}: it must be an "
            f"integer between 0 and its tool call count {calls:g}."
        )
        raise DataFileError(msg, path=source)
    return int(value)


def _rows(
    records: Sequence[Mapping[str, Any]],
    task: Task,
    alpha: float,
    now: datetime | None,
    source: str,
) -> _Rows:
    labels = list(task.labels)
    actions = task.action_list
    sampled = set(task.sampled_actions)
    k, m = len(labels), len(actions)
    times = [_time(r, source) for r in records]
    order = sorted(range(len(records)), key=lambda i: times[i])  # stable: write order on ties
    ref = now if now is not None else (max(times) if times else datetime.now(UTC))
    if ref.tzinfo is None:
        ref = ref.replace(tzinfo=UTC)
    n = len(records)
    P = np.empty((n, k))
    X = np.empty((n, task.n_features)) if task.n_features > k else None
    inputs = np.empty((n, task.n_inputs)) if task.reads_relevance else None
    grounding = task.grounding
    # Under grounded features or "off", the logged tool_call count includes the ungrounded
    # calls (logged apart in n_ungrounded); under "relabel" they were counted as asks.
    split = grounding is not None and grounding.belief != "relabel"
    unsent = split and grounding is not None and grounding.execute == "grounded"
    y = np.empty(n, dtype=np.intp)
    executable = np.ones((n, m), dtype=bool)
    age = np.empty(n)
    n_samples = np.empty(n, dtype=np.intp)
    for row, i in enumerate(order):
        r = records[i]
        P[row] = record_belief(r, "probs", labels, source=source)
        counts, n_drawn, n_unparsed = _sample_counts(r, source)
        one_pass = r.get("belief") == "one_pass"
        if one_pass:  # n_ungrounded says whether the greedy completion's call is ungrounded
            n_ungrounded = int(bool(r.get("n_ungrounded")))
        else:
            n_ungrounded = (
                _ungrounded(r, counts.get(str(task.call_action), 0.0), source) if split else 0
            )
        y[row] = labels.index(str(r["outcome"]))
        for j, action in enumerate(actions):
            if one_pass:  # only the greedy completion can carry an action out
                carried = r.get("greedy_label") == action
                if action == task.call_action and grounding is not None:
                    carried = carried and not (n_ungrounded and grounding.execute == "grounded")
                if action in sampled and not carried:
                    executable[row, j] = False
                continue
            sendable = counts.get(action, 0.0) - (n_ungrounded if action == task.call_action else 0)
            if action in sampled and (sendable if unsent else counts.get(action, 0.0)) <= 0:
                executable[row, j] = False
        if task.confirm_action is not None and task.call_action is not None:
            # the confirm action names the call: it could be taken exactly when the call could
            call_column = actions.index(task.call_action)
            executable[row, actions.index(task.confirm_action)] = executable[row, call_column]
        if r.get("fallback"):  # served + fallback: the MBR action could not be carried out
            ec = r.get("expected_cost") or {}
            try:
                mbr = int(np.argmin([float(ec[a]) for a in actions]))
            except (KeyError, TypeError, ValueError):
                mbr = None  # no usable expected costs logged: nothing to rule out
            if mbr is not None:
                executable[row, mbr] = False
        if X is not None or inputs is not None:
            try:
                if one_pass:  # the logged pseudo-counts, read as the runtime read them
                    belief = one_pass_belief(
                        task, [counts.get(label, 0.0) for label in labels],
                        ungrounded=bool(n_ungrounded), alpha=alpha,
                    )  # fmt: skip
                else:
                    belief = Belief(
                        [counts.get(label, 0.0) for label in labels], labels, n=n_drawn,
                        n_unparsed=n_unparsed, alpha=alpha,
                        unparsed_evidence=task.unparsed_evidence,
                        split_label=task.call_action if task.splits_ungrounded else None,
                        n_ungrounded=n_ungrounded if task.splits_ungrounded else 0,
                    )  # fmt: skip
            except ValueError as exc:
                msg = f"decision record {r.get('id')!r}: its counts make no belief ({exc})."
                raise DataFileError(msg, path=source) from exc
            if X is not None:
                X[row] = belief.features
            if inputs is not None:
                inputs[row] = raw_inputs(task, belief, _relevance(r, source))
        age[row] = max((ref - times[i]).total_seconds() / _DAY_S, 0.0)
        n_samples[row] = n_drawn
    costs = None
    if task.effects is not None:  # each decision priced by the effect of its call, as served
        costs = np.stack([task.cost_matrix(records[i].get("effect")) for i in order])
    return _Rows(P, X, y, executable, age, n_samples, inputs, costs)


def _eval_arrays(rows: _Rows, sel: NDArray[np.intp], task: Task) -> EvalArrays:
    n = sel.size
    return EvalArrays(
        P=rows.P[sel],
        y=rows.y[sel],
        cost=task.cost_matrix(),
        labels=tuple(task.labels),
        actions=tuple(task.action_list),
        greedy=np.full(n, -1, dtype=np.intp),
        no_sample=np.zeros(n, dtype=bool),
        fallback=task.action_list.index(task.default_action),
        executable=rows.executable[sel],
        X=None if rows.X is None else rows.X[sel],
        has_greedy=False,
        inputs=None if rows.inputs is None else rows.inputs[sel],
        call_action=task.call_action,
    )


def _runtime(
    decider: Decider, data: EvalArrays, costs: NDArray[np.float64] | None = None
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Per item: realised cost of the runtime's action, NLL; and the calibrated beliefs.

    ``costs``: each item's cost matrix (under the task's effects), else ``data.cost``.
    """
    if decider.reads_inputs and data.inputs is not None:
        X = data.inputs
    else:
        X = data.X if decider.reads_features and data.X is not None else data.P
    Q = np.atleast_2d(decider.calibrate(X))
    assert data.executable is not None
    actions = decider.choose_actions(Q, data.executable, cost=costs).actions
    if costs is None:
        cost = data.cost[data.y, actions]
    else:
        cost = costs[np.arange(data.n), data.y, actions]
    nll = -np.log(np.maximum(Q[np.arange(data.n), data.y], _EPS))
    return cost, nll, Q


def _calibrator_spec(old: CalibratorArtefact, override: str | None) -> tuple[str, dict[str, Any]]:
    """The calibrator spec and parameters of the new map: the old one's, or the override."""
    if override is not None:
        return override, {}
    from calibrators import CALIBRATOR_NAMES

    cal = old.calibrator
    name = next((n for n, cls in CALIBRATOR_NAMES.items() if type(cal) is cls), None)
    get_params = getattr(cal, "get_params", None)
    if name is None or not callable(get_params):
        msg = (
            f"cannot refit calibrator {type(cal).__name__}: it is not a calibrators estimator "
            f"({sorted(CALIBRATOR_NAMES)}); pass calibrator= (--calibrator) to choose one."
        )
        raise ConfigurationError(msg)
    return name, dict(get_params(deep=False))


def refit_from_records(
    records: Iterable[Mapping[str, Any]],
    old: CalibratorArtefact,
    *,
    task: Task | None = None,
    half_life_days: float | None = None,
    holdout: float = 0.3,
    z: float = DEFAULT_Z,
    margin: float = 0.0,
    calibrator: str | None = None,
    now: datetime | None = None,
    seed: int = 0,
    source: str | None = None,
) -> RefitResult:
    """Refit *old*'s map on logged labelled decisions; promote it iff the holdout shows it better.

    See the module docstring for the data, the split and the promotion rule: on the
    holdout, per decision, ``nll_delta`` = new − old NLL of the outcome and ``delta`` =
    new − old realised cost; the new map is promoted iff its NLL is shown lower,
    ``mean(nll_delta) + z · SE(nll_delta) < 0``, and its cost is not shown higher,
    ``mean(delta) − z · SE(delta) <= margin`` (paired SEs). The map is fitted on the
    training records only, never on the holdout. Deterministic given the records, *now*
    and *seed*.

    Args:
        records: Decision-log records with ``outcome`` joined (:meth:`DecisionLog.read`).
        old: The artefact in force.
        task: The task (its costs and actions); default ``old.task``.
        half_life_days: Recency half-life of the training weights, in days; ``None``:
            equal weights.
        holdout: The most recent fraction of the records held out for the comparison,
            in (0, 1).
        z: The promotion rule's z (default :data:`DEFAULT_Z`), >= 0.
        margin: The cost increase per decision tolerated by the cost guard, in cost units.
        calibrator: A calibrator spec (``"temperature"``, ``"dirichlet:reg_lambda=1"``) to
            fit instead of the old map's name and parameters.
        now: The time the ages are measured from; default the newest record's time.
        seed: The seed of the fit (its folds).
        source: Where the records came from (a log path), recorded in the provenance.

    Returns:
        The :class:`RefitResult`; ``promoted`` says whether to write its artefact.

    Raises:
        ConfigurationError: A bad parameter, no task, an artefact with a risk limit (it
            was certified for the old map and does not carry over), or an old map that
            is not a calibrators estimator.
        DataFileError: A bad record of the task, named with the log (*source*) and its id:
            other labels, an outcome outside the labels, no valid ``time``, ``probs``
            missing or not a distribution
            (:func:`~taskcal_agents.production._decision_log.record_belief`), bad sample counts.
    """
    task = task if task is not None else old.task
    if task is None:
        msg = (
            "refit needs the task (its costs and actions): the artefact records no task_spec; "
            "pass task= (--task FILE)."
        )
        raise ConfigurationError(msg)
    old.check_for(task_name=task.name, labels=list(task.labels))
    if not 0 < holdout < 1:
        msg = f"refit parameter 'holdout' must be in (0, 1), got {holdout!r}."
        raise ConfigurationError(msg)
    if half_life_days is not None and not half_life_days > 0:
        msg = f"refit parameter 'half_life_days' must be > 0 or None, got {half_life_days!r}."
        raise ConfigurationError(msg)
    if not (math.isfinite(z) and z >= 0) or not math.isfinite(margin):
        msg = f"refit parameters 'z' (>= 0) and 'margin' must be finite, got {z!r}, {margin!r}."
        raise ConfigurationError(msg)
    if old.risk_control is not None:
        msg = (
            f"refit of an artefact with the risk limit {str(old.risk_control.spec)!r}: the limit "
            "was certified for the old map and does not carry over to a refitted one; refit "
            "with `taskcal fit --risk-control` on labelled samples instead."
        )
        raise ConfigurationError(msg)
    alpha = DEFAULT_ALPHA if old.alpha is None else float(old.alpha)
    old_id = artefact_id(old)
    result = RefitResult(promoted=False, reason="", half_life_days=half_life_days, z=z,
                         margin=margin)  # fmt: skip
    used: list[Mapping[str, Any]] = []
    labels = list(task.labels)
    path = source or "<decision log>"
    belief = artefact_belief(old)
    n_fallback = 0  # of all records of the task: the monitor's fallback rate
    unparsed: list[float] = []  # n_unparsed / n_samples per record of the task with samples
    for r in records:
        result.n_records += 1
        if r.get("task") != task.name:
            result.n_other_task += 1
            continue
        if list(r.get("labels") or []) != labels:
            msg = (
                f"decision record {r.get('id')!r} of task {task.name!r} has labels "
                f"{r.get('labels')!r}, but the task has {labels!r}; refit from a log of this task."
            )
            raise DataFileError(msg, path=path)
        decided_on = r.get("belief") or "samples"
        if decided_on != belief:
            msg = (
                f"decision record {r.get('id')!r} was decided on a {decided_on!r} belief, but "
                f"the artefact was fitted on {belief!r} beliefs; refit from the "
                "decisions of the belief it serves (a door's SamplingOptions.belief)."
            )
            raise DataFileError(msg, path=path)
        counts, n_drawn, n_unparsed = _sample_counts(r, path)
        n_fallback += bool(r.get("fallback"))
        if n_drawn > 0:
            unparsed.append(n_unparsed / n_drawn)
        if r.get("outcome") is None:
            result.n_unlabelled += 1
            continue
        if r["outcome"] not in labels:
            msg = (
                f"decision record {r.get('id')!r} has outcome {r['outcome']!r}, not one of the "
                f"task's labels {labels!r}."
            )
            raise DataFileError(msg, path=path)
        if sum(counts.values()) <= 0:
            result.n_unserved += 1
            continue
        if r.get("artefact_id") != old_id:
            result.n_other_artefact += 1
        used.append(r)
    n = len(used)
    n_hold = min(n, math.ceil(holdout * n))
    result.n_train, result.n_holdout = n - n_hold, n_hold
    if result.n_train < MIN_TRAIN or n_hold < MIN_HOLDOUT:
        result.reason = (
            f"kept the old artefact: too few labelled, served decisions of task {task.name!r} "
            f"({result.n_train} to train, {n_hold} to compare; at least {MIN_TRAIN} and "
            f"{MIN_HOLDOUT} needed)."
        )
        return result
    rows = _rows(used, task, alpha, now, path)
    train = np.arange(result.n_train)
    hold = np.arange(result.n_train, n)
    weights = None if half_life_days is None else 0.5 ** (rows.age_days[train] / half_life_days)
    spec, params = _calibrator_spec(old, calibrator)
    try:
        new_cal, fit_metrics = fit_calibrator(
            _eval_arrays(rows, train, task), spec, params=params, cv_folds=0, seed=seed,
            sample_weight=weights,
        )  # fmt: skip
    except ConfigurationError as exc:
        result.reason = f"kept the old artefact: the refit failed: {exc}"
        return result
    data = _eval_arrays(rows, hold, task)
    held_costs = None if rows.costs is None else rows.costs[hold]
    old_cost, old_nll, _ = _runtime(Decider(task, old.calibrator, alpha=alpha), data, held_costs)
    new_cost, new_nll, _ = _runtime(Decider(task, new_cal, alpha=alpha), data, held_costs)
    result.old_cost, result.new_cost = float(old_cost.mean()), float(new_cost.mean())
    result.cost_diff, result.cost_diff_se = paired_difference(new_cost, old_cost)
    result.old_nll, result.new_nll = float(old_nll.mean()), float(new_nll.mean())
    result.nll_diff, result.nll_diff_se = paired_difference(new_nll, old_nll)
    result.n_changed = int(np.count_nonzero(new_cost != old_cost))
    se = result.cost_diff_se or 0.0
    nll_se = result.nll_diff_se or 0.0
    nll_bound = result.nll_diff + z * nll_se
    cost_bound = result.cost_diff - z * se
    margin = result.margin
    better = nll_bound < 0
    not_costlier = cost_bound <= margin
    result.promoted = better and not_costlier
    figures = (
        f"holdout NLL new − old = {result.nll_diff:+.4f} ± {nll_se:.4f}, cost new − old = "
        f"{result.cost_diff:+.4f} ± {se:.4f} (paired SEs, {n_hold} decisions)"
    )
    if result.promoted:
        result.reason = (
            f"promoted: {figures}; the NLL is lower (bound {nll_bound:+.4f} < 0) and the cost "
            f"not shown higher (lower bound {cost_bound:+.4f} <= margin {margin:g})."
        )
    elif not not_costlier:
        result.reason = (
            f"kept the old artefact: {figures}; the new map costs more on the holdout "
            f"(lower bound {cost_bound:+.4f} > margin {margin:g})."
        )
    else:
        result.reason = (
            f"kept the old artefact: {figures}; the NLL is not shown lower (bound "
            f"{nll_bound:+.4f} >= 0): no evidence the new map is better."
        )
    common_n = Counter(rows.n_samples.tolist()).most_common(1)[0][0]
    # The monitor's fit-time references, from the log: the fit saw only the served
    # training records (fallback rate 0, no unparsed rate) and no cross-fit (cv_folds=0).
    n_task = result.n_records - result.n_other_task
    fit_metrics["fallback_rate"] = {"n": n_task, "rate": n_fallback / n_task}
    if unparsed:
        fit_metrics["unparsed_rate"] = mean_reference(unparsed)
    fit_metrics["holdout"] = {
        "n": n_hold,
        "expected_cost": result.new_cost,
        "nll": result.new_nll,
        "nll_se": mean_reference(new_nll)["se"],
    }
    metadata = {
        "actions": list(task.action_list),
        "calibrator_name": old.metadata.get("calibrator_name", spec)
        if calibrator is None
        else calibrator,
        "fit_metrics": fit_metrics,
        "samples": {
            "source": "decision_log",
            "path": source,
            "n": int(common_n),
            "belief": belief,
        },
        "refit": {
            "source": source,
            "parent_artefact_id": old_id,
            "n_train": result.n_train,
            "n_holdout": n_hold,
            "half_life_days": half_life_days,
            "seed": seed,
            "now": None if now is None else now.isoformat(),
            "comparison": result.comparison(),
        },
    }
    result.artefact = CalibratorArtefact(
        calibrator=new_cal, labels=labels, alpha=old.alpha, task_name=task.name,
        task=task, metadata=metadata,
        # Refit fits the map only: the parent's stopping prior carries over, when it was
        # fitted for this task's outcomes (else none: adaptive N draws all N).
        stopping_prior=(
            old.stopping_prior
            if old.stopping_prior is not None and old.stopping_prior.outcomes == task.outcomes
            else None
        ),
    )  # fmt: skip
    return result
