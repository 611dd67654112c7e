"""Fitting a calibration map on a samples file, and its JSON artefact.

The artefact is a :class:`~taskcal_agents.decision.CalibratorArtefact`, written and read
by that class (``format_version`` 1)::

    {"format": "taskcal.calibrator", "format_version": 1,
     "task": "when2call", "labels": [...], "actions": [...], "alpha": 0.1,
     "task_spec": {...Task.model_dump()...},
     "calibrator_name": "dirichlet", "calibrator": {...calibrator.to_dict()...},
     "fit_metrics": {"n": 300, "n_fit": 280, "n_excluded_no_sample": 20,
                     "chosen": {"reg_lambda": 0.1, "reg_mu": 0.01},
                     "before": {...}, "after": {...}, "crossval": {...}},
     "samples": {"path": "...", "n": 16, "temperature": 1.0, "model": "..."},
     "created": "2026-01-01T00:00:00+00:00"}

The map is fitted on the served rows only: items whose samples were all unparsed (or
that have none) get the fallback action at run time and never reach the calibrator, so
their uniform beliefs are left out (``n_excluded_no_sample``; ``n_fit`` rows remain).
``dirichlet`` means the workflow's regularised default (ODIR with ``reg_lambda`` and
``reg_mu`` chosen by inner cross-validation, see
:data:`~taskcal_agents.workflow._calibrator_specs.WORKFLOW_CALIBRATOR_PARAMS`); ``chosen``
records the strengths it chose (``reg_lambda_``/``reg_mu_`` of the fitted map, when it
has them).

``before``/``after`` are in-sample scores of the raw and the calibrated beliefs (NLL,
Brier, ECE, classwise-ECE over all items, and the expected cost of the actions the
runtime takes on them: MBR among executable actions, fallback on unserved items);
``crossval`` holds the same scores of the calibrated beliefs cross-fitted over stratified
folds (fitted on served training rows), which is the honest estimate of what the map does
on new data.

With ``taskcal fit --risk-control SPEC --delta δ`` the artefact also carries a risk limit
(:func:`fit_risk_control`, format version 2): its threshold is chosen by Learn-then-Test
on **cross-fitted** calibrated beliefs of the same items (each fold decided by a map fitted
on the other folds, as ``taskcal evaluate`` does), with the runtime's actions (MBR among
executable actions; fallback decisions, on items without a usable sample, are not
guarded but count in the risk). The guarantee P(R(λ̂) > α) ≤ δ is then approximate:
the pooled losses come from K different maps (dependent through their shared training
items), none of them the deployed map fitted on all items. It is exact when
:func:`~taskcal_agents.decision.calibrate_risk` runs on beliefs of held-out items
that the deployed map never saw (fit the map on one part of the data, calibrate the limit
on another).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numpy.typing import NDArray

from taskcal_agents._files import write_json as write_json
from taskcal_agents._stats import mean_reference
from taskcal_agents.decision import ARTEFACT_FORMAT as ARTEFACT_FORMAT
from taskcal_agents.decision import (
    ARTEFACT_FORMAT_VERSION as ARTEFACT_FORMAT_VERSION,
)
from taskcal_agents.decision import (
    FEW_ITEMS,
    CalibratorArtefact,
    RiskControl,
    RiskGuard,
    RiskSpec,
    StoppingPrior,
    StoppingPriorWarning,
    Task,
    calibrate_risk,
    few_items_message,
    fit_stopping_prior,
)
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.parsing import RELEVANCE_FEATURES
from taskcal_agents.workflow._calibrator_specs import (
    default_factory,
)
from taskcal_agents.workflow._crossfit import (
    calibrator_inputs,
    crossfit_calibrated,
    stratified_folds,
)
from taskcal_agents.workflow._decoders import runtime_actions
from taskcal_agents.workflow._eval_arrays import EvalArrays


def _scores(Q: NDArray[np.float64], data: EvalArrays) -> dict[str, float]:
    from calibrators import metrics

    actions = runtime_actions(Q, data)
    item_nll = -np.log(np.clip(Q[np.arange(data.n), data.y], 1e-12, 1.0))
    return {
        "nll": float(metrics.nll(data.y, Q)),
        "nll_se": float(item_nll.std(ddof=1) / np.sqrt(data.n)) if data.n > 1 else float("inf"),
        "brier": float(metrics.brier(data.y, Q)),
        "ece": float(metrics.ece(data.y, Q)),
        "classwise_ece": float(metrics.classwise_ece(data.y, Q)),
        "expected_cost": float(data.cost[data.y, actions].mean()),
    }


def fit_calibrator(
    data: EvalArrays,
    name: str,
    *,
    params: dict[str, Any] | None = None,
    cv_folds: int = 5,
    seed: int = 0,
    sample_weight: NDArray[np.float64] | None = None,
) -> tuple[Any, dict[str, Any]]:
    """Fit the calibrator *name* on the served items and score it on all items.

    Args:
        data: The evaluation arrays of the samples file.
        name: A :func:`calibrators.make_calibrator` name, optionally with parameters
            (``"dirichlet:reg_lambda=auto"``).
        params: Its keyword parameters.
        cv_folds: Folds of the cross-validated scores (0 skips them).
        seed: Seed of the folds.
        sample_weight: A weight per item (e.g. recency weights, ``taskcal refit``) for
            the fit of the map, shape (n,); ``None`` weighs all equally. The scores and
            the cross-validated fits are unweighted.

    Returns:
        The fitted calibrator and its fit metrics (``n``, ``n_fit``,
        ``n_excluded_no_sample``, ``chosen``, ``inputs``, ``before``, ``after``,
        ``crossval``). Under the ``unparsed: other`` policy a map that reads extra input
        columns is fitted on the belief features (``inputs: "features"``, k + 1 columns,
        ``n_classes=k``); otherwise on p̂ (``inputs: "probs"``).

    Raises:
        ConfigurationError: Unknown calibrator name or parameter, bad *cv_folds*, or no
            item with a usable sample to fit on.
    """
    X, make, inputs = calibrator_inputs(data, default_factory(name, **(params or {})))
    served = data.served
    if not served.any():
        msg = (
            f"cannot fit calibrator {name!r}: none of the {data.n} items has a usable "
            "sample (all unparsed or none drawn); check the parser with `--reparse` or "
            "sample again."
        )
        raise ConfigurationError(msg)
    try:
        weights = None if sample_weight is None else np.asarray(sample_weight)[served]
        calibrator = make().fit(X[served], data.y[served], sample_weight=weights)
    except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
        msg = f"cannot fit calibrator {name!r} with parameters {params or {}!r}: {exc}"
        raise ConfigurationError(msg) from exc
    chosen = {
        key: getattr(calibrator, f"{key}_")
        for key in ("reg_lambda", "reg_mu")
        if hasattr(calibrator, f"{key}_")
    }
    metrics: dict[str, Any] = {
        "n": data.n,
        "n_fit": int(served.sum()),
        "n_excluded_no_sample": int(data.no_sample.sum()),
        "chosen": chosen or None,
        "inputs": inputs,
        "before": _scores(data.P, data),
        "after": _scores(np.asarray(calibrator.predict_proba(X)), data),
        "crossval": None,
        **stream_reference(data),
    }
    if cv_folds:
        folds = stratified_folds(data.y, cv_folds, seed)
        try:
            Q = crossfit_calibrated(X, data.y, folds, make, fit_mask=served)
        except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:  # e.g. few served
            metrics["crossval"] = {"folds": cv_folds, "seed": seed, "error": str(exc)}
        else:
            metrics["crossval"] = {"folds": cv_folds, "seed": seed, **_scores(Q, data)}
    return calibrator, metrics


def stream_reference(data: EvalArrays) -> dict[str, Any]:
    """Fit-time references of the drift monitor (:mod:`taskcal_agents.production._monitor`).

    ``label_prior`` (``n`` and the share of each label), ``fallback_rate`` (``n`` and the
    share of items without a usable sample, which get the fallback action). The unparsed
    rate needs the samples (:func:`unparsed_reference`).
    """
    counts = np.bincount(data.y, minlength=len(data.labels))
    n = max(data.n, 1)
    return {
        "label_prior": {
            "n": data.n,
            "shares": {label: float(c / n) for label, c in zip(data.labels, counts, strict=True)},
        },
        "fallback_rate": {"n": data.n, "rate": float(data.no_sample.mean()) if data.n else 0.0},
    }


def unparsed_reference(records: Any) -> dict[str, Any] | None:
    """The mean per item of ``n_unparsed / n_samples``, its SE and ``n`` (the monitor's rule).

    *records* are samples-file records whose ``labels`` hold ``None`` for an unparsed
    sample; records without labels (one-pass beliefs) are skipped. ``None`` when no record
    has labels.
    """
    shares = [
        sum(x is None for x in labels) / len(labels)
        for labels in (r.get("labels") for r in records)
        if labels
    ]
    return mean_reference(shares) if shares else None


def crossfit_beliefs(
    data: EvalArrays,
    name: str,
    *,
    params: dict[str, Any] | None = None,
    folds: int = 5,
    seed: int = 0,
) -> NDArray[np.float64]:
    """Cross-fitted calibrated beliefs of every item, as the evaluation computes them.

    Each of *folds* stratified, seeded folds is calibrated by the map *name* fitted on
    the served rows of the other folds (:func:`crossfit_calibrated`, reading p̂ or the
    belief features as :func:`calibrator_inputs` says).

    Raises:
        ConfigurationError: Unknown calibrator, bad *folds*, or a fit that fails.
    """
    X, make, _ = calibrator_inputs(data, default_factory(name, **(params or {})))
    try:
        return crossfit_calibrated(
            X, data.y, stratified_folds(data.y, folds, seed), make, fit_mask=data.served
        )
    except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
        if isinstance(exc, ConfigurationError):
            raise
        msg = f"cannot cross-fit calibrator {name!r}: {exc}"
        raise ConfigurationError(msg) from exc


def fit_risk_control(
    task: Task,
    data: EvalArrays,
    name: str,
    spec: RiskSpec | str,
    *,
    params: dict[str, Any] | None = None,
    delta: float = 0.05,
    folds: int = 5,
    seed: int = 0,
) -> RiskControl:
    """Calibrate a risk limit for the calibrator *name* on cross-fitted beliefs.

    The calibrated beliefs of each of *folds* stratified folds come from a map fitted on
    the served rows of the other folds (:func:`crossfit_calibrated`, as in the
    evaluation); the unguarded actions are the runtime's (:func:`runtime_actions`); the
    guard applies to the served rows. See the module docstring for what the guarantee
    covers.

    Args:
        task: The task (the guard's safe actions and losses).
        data: The evaluation arrays of the samples file.
        name: The calibrator spec, as for :func:`fit_calibrator`.
        spec: The risk and α (e.g. ``"tool_call_when_not:0.05"``).
        params: The calibrator's keyword parameters.
        delta: The allowed probability δ that the limit does not hold.
        folds: Folds of the cross-fitting (2 <= folds <= n).
        seed: Seed of the folds.

    Returns:
        The :class:`~taskcal_agents.decision._risk_control.RiskControl` (a
        :class:`~taskcal_agents.decision.RiskNotCertifiedWarning` when nothing could
        be certified: the guard then always downgrades).

    Raises:
        ConfigurationError: Invalid spec, δ, folds, or a fit that fails.
    """
    RiskGuard(task, spec)  # check the spec against the task before fitting anything
    Q = crossfit_beliefs(data, name, params=params, folds=folds, seed=seed)
    return calibrate_risk(
        task, spec, Q, data.y, delta=delta, actions=runtime_actions(Q, data),
        guardable=data.served, executable=data.executable,
    )  # fmt: skip


def fit_prior(task: Task, arrays: EvalArrays) -> StoppingPrior | None:
    """Adaptive N's stopping prior, fitted on every item's sample counts.

    Every item, those whose samples are all unparsed included: the rule runs on each
    request before anything is parsed. ``None`` when the counts are not multinomial
    (answer clusters) or fewer than 2 items have 2 samples or more (e.g. one-pass logprob
    beliefs, which draw no samples). Fitted on fewer than
    :data:`~taskcal_agents.decision._stopping_prior.FEW_ITEMS` items it warns
    (:class:`~taskcal_agents.decision.StoppingPriorWarning`).
    """
    if arrays.counts is None:
        return None
    counts = arrays.counts
    if int(np.sum(counts.sum(axis=1) >= 2)) < 2:
        return None
    prior = fit_stopping_prior(task, counts)
    if prior.n_items < FEW_ITEMS:  # stacklevel: fit_artefact's caller
        warnings.warn(few_items_message(prior.n_items), StoppingPriorWarning, stacklevel=3)
    return prior


def make_artefact(
    *,
    task_name: str,
    labels: list[str],
    actions: list[str],
    alpha: float,
    calibrator_name: str,
    calibrator: Any,
    fit_metrics: dict[str, Any],
    samples: dict[str, Any] | None = None,
    task_spec: dict[str, Any] | None = None,
    risk_control: RiskControl | None = None,
    stopping_prior: StoppingPrior | None = None,
) -> dict[str, Any]:
    """The JSON-able calibrator artefact (see :mod:`taskcal_agents.decision._artefact`).

    ``task`` holds the task's name (what loaders compare); ``task_spec`` the full task
    (labels, costs, parser) the calibrator was fitted for, for reproducibility;
    ``risk_control`` a calibrated risk limit the front doors apply (format version 2);
    ``stopping_prior`` adaptive N's prior, fitted on the same samples.
    """
    task = None
    if task_spec is not None:
        task = Task.model_validate({k: v for k, v in task_spec.items() if k != "format_version"})
    features = {}
    if task is not None and task.reads_relevance:  # which columns, by name, in which order
        features["relevance_features"] = list(RELEVANCE_FEATURES)
    artefact = CalibratorArtefact(
        calibrator=calibrator,
        labels=list(labels),
        alpha=float(alpha),
        task_name=task_name,
        task=task,
        metadata={
            "actions": list(actions),
            "calibrator_name": calibrator_name,
            "fit_metrics": fit_metrics,
            "samples": samples or {},
            **features,
        },
        risk_control=risk_control,
        stopping_prior=stopping_prior,
    )
    return artefact.to_dict()
