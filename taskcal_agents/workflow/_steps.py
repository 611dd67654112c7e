"""``taskcal fit`` and ``taskcal evaluate`` as functions: a samples file in, JSON out.

:func:`fit_artefact` reads a samples file, fits a calibration map (and, when asked,
certifies a risk limit) and returns the artefact that ``taskcal fit`` writes;
:func:`evaluate_samples` reads one and returns the evaluation that ``taskcal evaluate``
writes. Neither writes a file: the caller writes the result where it wants
(``taskcal_agents._files.write_json`` does it atomically).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from taskcal_agents.decision import DEFAULT_ALPHA, CalibratorArtefact, RiskControl, RiskGuard, Task
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.workflow._calibrator_specs import (
    DEFAULT_CALIBRATORS,
    CalibratorFactory,
    default_factory,
)
from taskcal_agents.workflow._cost_sweep import cost_sweep
from taskcal_agents.workflow._crossfit import calibrator_inputs
from taskcal_agents.workflow._data import load_eval_arrays, task_summary
from taskcal_agents.workflow._eval_arrays import EvalArrays
from taskcal_agents.workflow._evaluate import evaluate_arrays
from taskcal_agents.workflow._evaluation_json import evaluation_to_dict
from taskcal_agents.workflow._fit import (
    fit_calibrator,
    fit_prior,
    fit_risk_control,
    make_artefact,
    unparsed_reference,
)
from taskcal_agents.workflow._fixed_map import ARTEFACT_DECODER, artefact_factory

__all__ = ["evaluate_samples", "fit_artefact"]

_Path = str | os.PathLike[str]


def fit_artefact(
    samples: _Path,
    *,
    calibrator: str = "dirichlet",
    params: dict[str, Any] | None = None,
    task: Task | _Path | None = None,
    alpha: float = DEFAULT_ALPHA,
    cv_folds: int = 5,
    seed: int = 0,
    data: _Path | None = None,
    reparse: bool = False,
    risk_control: str | None = None,
    delta: float = 0.05,
) -> tuple[dict[str, Any], RiskControl | None]:
    """Fit a calibration map on a samples file: the artefact ``taskcal fit`` writes.

    Args:
        samples: The samples file (``taskcal sample``, :func:`run_sampling`).
        calibrator: The calibrator spec (``"dirichlet"``, ``"temperature"``,
            ``"dirichlet:reg_lambda=0.01"``, ...), as for :func:`fit_calibrator`.
        params: Its keyword parameters.
        task: The task (default: the one stored in the samples file; its name and labels
            must match, its costs may differ).
        alpha: The belief's smoothing prior α (use the deployed value).
        cv_folds: Folds of the cross-validated fit metrics (0: none).
        seed: Seed of the folds.
        data: The dataset the samples were drawn from (default: the one their header
            names), read for a task that grounds its tool calls.
        reparse: Re-parse the stored completions with the task's parser.
        risk_control: Also certify this risk limit (``"tool_call_when_not:0.05"``, see
            :class:`~taskcal_agents.decision.RiskSpec`) on cross-fitted
            beliefs; the artefact then carries it.
        delta: With *risk_control*: the allowed probability δ that the limit fails.

    Returns:
        ``(artefact, risk)``: the JSON-able artefact (a
        :class:`~taskcal_agents.decision.CalibratorArtefact` as a dict, its
        ``fit_metrics`` with the unparsed-rate reference of the monitor unless
        *reparse*), and the certified risk limit (``None`` without *risk_control*). A
        limit that could not be certified warns
        (:class:`~taskcal_agents.decision.RiskNotCertifiedWarning`), and so does a
        stopping prior fitted on fewer than
        :data:`~taskcal_agents.decision._stopping_prior.FEW_ITEMS` items
        (:class:`~taskcal_agents.decision.StoppingPriorWarning`).

    Raises:
        ConfigurationError: A bad calibrator, parameter or risk spec (a bad risk spec
            before anything is fitted), or nothing to fit on.
        DataFileError: The samples file cannot be read.
        LabelMismatchError: *task* has another name or other labels than the samples.
    """
    task_obj, samples_file, arrays = load_eval_arrays(
        samples, task, alpha=alpha, reparse=reparse, data=data
    )
    if risk_control is not None:
        RiskGuard(task_obj, risk_control)  # a bad spec fails before any fit
    fitted, metrics = fit_calibrator(
        arrays, calibrator, params=params, cv_folds=cv_folds, seed=seed
    )
    if not reparse and (unparsed := unparsed_reference(samples_file.records.values())):
        metrics["unparsed_rate"] = unparsed
    risk = None
    if risk_control is not None:
        risk = fit_risk_control(
            task_obj, arrays, calibrator, risk_control, params=params, delta=delta,
            folds=cv_folds if cv_folds >= 2 else 5, seed=seed,
        )  # fmt: skip
    settings = samples_file.settings
    artefact = make_artefact(
        task_name=task_obj.name,
        labels=list(task_obj.labels),
        actions=list(task_obj.action_list),
        alpha=alpha,
        calibrator_name=calibrator,
        calibrator=fitted,
        fit_metrics=metrics,
        task_spec=task_obj.model_dump(mode="json"),
        samples={
            "path": str(samples),
            "n_items": arrays.n,
            **{k: settings.get(k) for k in ("n", "temperature", "model")},
            "belief": _fitted_belief(samples_file),
        },
        risk_control=risk,
        stopping_prior=fit_prior(task_obj, arrays),
    )
    return artefact, risk


def _fitted_belief(samples_file: Any) -> str:
    """The belief a fit on ``samples_file`` serves, as an artefact records it.

    ``"one_pass"`` for a tool decision's one-pass records (they say so), ``"logprob"`` for
    a one-pass belief over the task's labels, else ``"samples"``.
    """
    if any(r.get("belief") == "one_pass" for r in samples_file.records.values()):
        return "one_pass"
    named = samples_file.settings.get("belief")
    return "logprob" if named in ("one_pass", "logprob") else "samples"


def evaluate_samples(
    samples: _Path,
    *,
    calibrators: Sequence[str] = DEFAULT_CALIBRATORS,
    folds: int = 5,
    seed: int = 0,
    permutations: int = 200,
    test_calibrator: str | None = "dirichlet",
    jobs: int | None = None,
    task: Task | _Path | None = None,
    alpha: float = DEFAULT_ALPHA,
    data: _Path | None = None,
    reparse: bool = False,
    items: bool = True,
    target_risk: float | None = None,
    progress: Callable[[int], None] | None = None,
    artefact: _Path | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Compare the decoders on a samples file: the evaluation ``taskcal evaluate`` writes.

    Args:
        samples: The samples file (``taskcal sample``, :func:`run_sampling`).
        calibrators: Calibrator specs to cross-fit, one ``mbr_<spec>`` row each.
        folds: Stratified cross-fitting folds.
        seed: Seed of the folds and of the label shuffles.
        permutations: Label shuffles of the permutation test (0 skips it).
        test_calibrator: The calibrator of the MBR decoder in the test (``None`` skips it).
        jobs: Processes for the label shuffles (-1: all cores); the result does not
            depend on it.
        task: The task (default: the one stored in the samples file; costs may differ).
        alpha: The belief's smoothing prior α.
        data: The dataset the samples were drawn from, as for :func:`fit_artefact`.
        reparse: Re-parse the stored completions with the task's parser.
        items: Store per-item beliefs and actions (what ``taskcal report`` draws).
        target_risk: Report the coverage each decoder reaches at this risk.
        progress: Called with a step count as work completes (``1 + len(calibrators) +
            permutations`` steps in all; one more with *artefact*).
        artefact: A calibrator artefact fitted elsewhere, evaluated held out as the
            decoder ``mbr_artefact``: its map
            fixed on every fold, its α and, without *task*, its task; the label-shuffle
            test then tests it. ``meta.artefact`` names it by its file's hash.

    Returns:
        ``(evaluation, settings)``: the JSON-able evaluation (the format
        :func:`write_report` reads; ``meta`` names the samples and their model, N and
        temperature, and the answer clusters for a task that clusters answers), and the
        sampling settings stored in the samples file.

    Raises:
        ConfigurationError: A bad calibrator or fold count.
        DataFileError: The samples file cannot be read.
        LabelMismatchError: *task* has another name or other labels than the samples.
    """
    factory: Callable[[str], CalibratorFactory] = default_factory
    fixed: dict[str, Any] | None = None
    if artefact is not None:
        loaded = CalibratorArtefact.load(artefact)
        task = task if task is not None else loaded.task
        alpha = alpha if loaded.alpha is None else loaded.alpha
    task_obj, samples_file, arrays = load_eval_arrays(
        samples, task, alpha=alpha, reparse=reparse, data=data
    )
    if artefact is not None:
        make_fixed, resolved, digest = artefact_factory(artefact, task_obj)
        expected = make_fixed().inputs
        got = calibrator_inputs(arrays, make_fixed)[2]
        if got != expected:
            msg = (
                f"artefact {os.fspath(artefact)!r} reads {expected}, but the samples give its "
                f"task {got} only; evaluate with the artefact's task on samples it can read."
            )
            raise ConfigurationError(msg)
        calibrators = [*calibrators, ARTEFACT_DECODER]
        test_calibrator = ARTEFACT_DECODER if test_calibrator is not None else None

        def with_artefact(name: str) -> CalibratorFactory:
            return make_fixed if name == ARTEFACT_DECODER else default_factory(name)

        factory = with_artefact
        fixed = {"path": str(artefact), "sha256": digest, "alpha": resolved.alpha}
    result = evaluate_arrays(
        arrays,
        calibrators=calibrators,
        n_folds=folds,
        seed=seed,
        n_permutations=permutations,
        test_calibrator=test_calibrator,
        progress=progress,
        target_risk=target_risk,
        n_jobs=jobs,
        factory=factory,
    )
    settings = samples_file.settings
    evaluation = evaluation_to_dict(
        result,
        arrays,
        task=task_summary(task_obj),
        meta={
            "samples": str(samples),
            "alpha": alpha,
            "reparse": reparse,
            **{k: settings.get(k) for k in ("model", "n", "temperature")},
            "n_without_usable_sample": int(arrays.no_sample.sum()),
            "target_risk": target_risk,
            **_cluster_meta(task_obj, arrays),
            **({"artefact": fixed} if fixed is not None else {}),
        },
        include_items=items,
    )
    sweep = cost_sweep(result, arrays)
    if sweep is not None:
        evaluation["cost_sweep"] = sweep
    return evaluation, settings


def _cluster_meta(task: Task, data: EvalArrays) -> dict[str, Any]:
    """The evaluation's ``answer_clusters`` summary (empty for a task that does not cluster)."""
    if task.answer_clusters is None or data.n_clusters is None:
        return {}
    answer, _ = task.answer_abstain_labels()
    n_clusters = data.n_clusters
    return {
        "answer_clusters": {
            **task.answer_clusters.model_dump(mode="json"),
            "mean_n_clusters": float(n_clusters.mean()) if n_clusters.size else 0.0,
            "n_one_cluster": int((n_clusters == 1).sum()),
            "n_no_answer": int((n_clusters == 0).sum()),
            "n_modal_right": int((data.y == task.label_index(answer)).sum()),
        }
    }
