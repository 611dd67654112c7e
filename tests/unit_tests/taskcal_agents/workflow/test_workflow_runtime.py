"""The evaluation scores what the runtime does (served-row fits, executable MBR) and its
columns are honest (macro-F1 over labels, paired savings, cross-fitted TCE)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from calibrators import metrics
from taskcal_agents._files import write_json
from taskcal_agents._stats import paired_difference
from taskcal_agents.decision._decider import Decider
from taskcal_agents.errors import DataFileError
from taskcal_agents.parsing._grounding import GroundingContext
from taskcal_agents.workflow import EvalArrays, fit_calibrator, load_evaluation, read_samples
from taskcal_agents.workflow._calibrator_specs import (
    default_factory,
)
from taskcal_agents.workflow._crossfit import stratified_folds
from taskcal_agents.workflow._data import eval_arrays
from taskcal_agents.workflow._evaluate import evaluate_arrays
from taskcal_agents.workflow._evaluation_json import evaluation_to_dict
from taskcal_agents.workflow._runner import message_from_dict
from taskcal_agents.workflow._scores import crossfit_tce, score_actions
from tests.unit_tests.taskcal_agents.helpers.workflow_fakes import (
    WHEN2CALL_COST,
    _samples_file,
    tool_task,
)

LABELS = ("tool_call", "request_for_info", "cannot_answer")
FIXED_DIRICHLET = "dirichlet:reg_lambda=0.1:reg_mu=0.1"
"""A one-fit Dirichlet (the workflow's default selects its strengths by inner CV)."""


def test_replayed_items_match_the_decider(tmp_path: Path) -> None:
    path = _samples_file(tmp_path)
    samples = read_samples(path)
    task = tool_task()
    data = eval_arrays(task, samples, alpha=0.1)
    evaluation = evaluate_arrays(
        data, calibrators=("temperature", FIXED_DIRICHLET), n_folds=3, n_permutations=0
    )
    records = [samples.records[i] for i in data.ids]
    replaced = fallback = 0
    for decoder, name in (
        ("mbr_raw", None),
        ("mbr_temperature", "temperature"),
        (f"mbr_{FIXED_DIRICHLET}", FIXED_DIRICHLET),
    ):
        acts = evaluation.actions[decoder]
        for i, record in enumerate(records):
            messages = [message_from_dict(m) for m in record["samples"]]
            calibrator = None if name is None else evaluation.calibrators[name][evaluation.folds[i]]
            decider = Decider(task, calibrator, alpha=0.1)
            # the runtime path: parse with the offered tools, ground, then decide
            decision = decider.decide(
                messages,
                tool_names=record["tool_names"],
                return_samples=True,
                context=GroundingContext(record["tools"], record["messages"]),
            )
            assert decision.sample_labels == record["labels"]  # the fixture parses as sampled
            action = task.action_index(decision.action)
            assert acts[i] == action, (decoder, record["id"], decision.fallback_reason)
            assert data.cost[data.y[i], acts[i]] == task.cost_matrix()[data.y[i], action]
            if decision.action == "tool_call":
                assert decision.message is not None and decision.message.tool_calls
            replaced += bool(decision.fallback_reason and "MBR chose" in decision.fallback_reason)
            fallback += bool(decision.fallback_reason and "unparsed" in decision.fallback_reason)
    # the test exercises both runtime rules, and the raw argmin would differ
    assert replaced > 5
    assert fallback > 5
    raw_mbr = np.argmin(data.P @ data.cost, axis=1)
    assert np.any(raw_mbr[data.served] != evaluation.actions["mbr_raw"][data.served])
    # the stored masks say why
    assert not data.executable[:, 0].all()
    assert data.executable[:, 1:].all()


def _arrays_with_unserved(n: int = 120, seed: int = 0) -> EvalArrays:
    rng = np.random.default_rng(seed)
    y = (np.arange(n) % 3).astype(np.intp)
    P = rng.dirichlet(np.ones(3), size=n)
    P[np.arange(n), y] += 0.5
    P /= P.sum(axis=1, keepdims=True)
    no_sample = rng.random(n) < 0.3
    P[no_sample] = 1 / 3
    return EvalArrays(
        P=P,
        y=y,
        cost=np.array(WHEN2CALL_COST),
        labels=LABELS,
        actions=LABELS,
        greedy=np.full(n, -1, dtype=np.intp),
        no_sample=no_sample,
        fallback=1,
    )


def test_calibrators_are_fitted_on_served_rows_only() -> None:
    data = _arrays_with_unserved()
    served = data.served
    assert 0 < (~served).sum() < data.n
    make = default_factory(FIXED_DIRICHLET)
    calibrator, fit_metrics = fit_calibrator(data, FIXED_DIRICHLET, cv_folds=0)
    expected = make().fit(data.P[served], data.y[served])
    everything = make().fit(data.P, data.y)
    np.testing.assert_allclose(calibrator.coef_, expected.coef_)
    assert not np.allclose(calibrator.coef_, everything.coef_, atol=1e-3)
    assert fit_metrics["n"] == data.n
    assert fit_metrics["n_fit"] == int(served.sum())
    assert fit_metrics["n_excluded_no_sample"] == int((~served).sum())
    assert fit_metrics["chosen"] == {"reg_lambda": 0.1, "reg_mu": 0.1}

    evaluation = evaluate_arrays(data, calibrators=(FIXED_DIRICHLET,), n_permutations=0)
    folds = stratified_folds(data.y, 5, 0)
    np.testing.assert_array_equal(evaluation.folds, folds)
    for f, fitted in evaluation.calibrators[FIXED_DIRICHLET].items():
        train = (folds != f) & served
        np.testing.assert_allclose(fitted.coef_, make().fit(data.P[train], data.y[train]).coef_)
    # unserved items get the fallback action, whatever their calibrated belief says
    assert np.all(evaluation.actions[f"mbr_{FIXED_DIRICHLET}"][~served] == data.fallback)
    out = json.loads(json.dumps(evaluation_to_dict(evaluation, data)))
    assert out["n_excluded_no_sample"] == int((~served).sum())
    assert out["format_version"] == 2
    assert out["items"]["executable"] == np.ones((data.n, 3), dtype=bool).tolist()
    assert out["items"]["fold"] == folds.tolist()


def test_fit_chooses_and_records_the_odir_strengths() -> None:
    data = _arrays_with_unserved(n=90, seed=1)
    calibrator, fit_metrics = fit_calibrator(data, "dirichlet", cv_folds=0)
    chosen = fit_metrics["chosen"]
    assert chosen == {"reg_lambda": calibrator.reg_lambda_, "reg_mu": calibrator.reg_mu_}
    assert chosen["reg_lambda"] in (1e-2, 1e-1, 1.0, 10.0)
    assert chosen["reg_mu"] in (1e-2, 1.0)
    assert calibrator.to_dict()["params"]["reg_mu"] == "auto"


def test_permutation_test_uses_the_runtime_rule() -> None:
    data = _arrays_with_unserved(n=90, seed=2)
    executable = np.ones((data.n, 3), dtype=bool)
    executable[::2, 0] = False
    data = EvalArrays(**{**data.__dict__, "executable": executable})
    evaluation = evaluate_arrays(
        data,
        calibrators=(FIXED_DIRICHLET,),
        n_permutations=3,
        test_calibrator=FIXED_DIRICHLET,
    )
    row = evaluation.row(f"mbr_{FIXED_DIRICHLET}")
    assert evaluation.permutation is not None
    assert evaluation.permutation.statistic == pytest.approx(row["saving_vs_constant"])
    assert evaluation.permutation.gap_se == pytest.approx(row["saving_vs_constant_se"])
    assert not np.any(evaluation.actions[f"mbr_{FIXED_DIRICHLET}"][::2] == 0)


def test_macro_f1_averages_over_the_task_labels_only() -> None:
    y = np.array([0, 1, 0, 1, 1], dtype=np.intp)
    data = EvalArrays(
        P=np.full((5, 2), 0.5),
        y=y,
        cost=np.array([[0.0, 1.0, 0.5], [1.0, 0.0, 0.5]]),
        labels=("yes", "no"),
        actions=("yes", "no", "abstain"),
        greedy=y.copy(),
        no_sample=np.zeros(5, dtype=bool),
        fallback=2,
    )
    assert score_actions(y, data)["macro_f1"] == 1.0
    # an abstention is a miss of its true label, not a class of its own
    actions = np.array([0, 1, 2, 1, 1])
    assert score_actions(actions, data)["macro_f1"] == pytest.approx((2 / 3 + 1.0) / 2)


def test_paired_difference_and_savings_columns() -> None:
    base = np.array([1.0, 0.0, 2.0, 1.0])
    other = np.array([0.0, 0.0, 1.0, 2.0])
    mean, se = paired_difference(base, other)
    diff = base - other
    assert mean == pytest.approx(0.25)
    assert se == pytest.approx(np.sqrt(np.sum((diff - 0.25) ** 2) / 3) / 2)
    assert paired_difference(np.ones(1), np.zeros(1)) == (1.0, None)

    data = _arrays_with_unserved(n=60, seed=3)
    evaluation = evaluate_arrays(data, calibrators=("temperature",), n_permutations=0)
    realised = {k: data.cost[data.y, a] for k, a in evaluation.actions.items()}
    for row in evaluation.rows:
        own = realised[row["decoder"]]
        for key, baseline in (("constant", "constant"), ("raw", "mbr_raw")):
            expected = paired_difference(realised[baseline], own)
            assert (row[f"saving_vs_{key}"], row[f"saving_vs_{key}_se"]) == pytest.approx(expected)
    assert evaluation.row("constant")["saving_vs_constant"] == 0.0


def test_crossfit_tce_shows_no_spurious_error_where_the_plugin_does() -> None:
    cost = np.array(WHEN2CALL_COST)
    crossfit, plugin = [], []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        P = rng.dirichlet(np.ones(3), size=100)
        y = np.array([rng.choice(3, p=p) for p in P])  # P is calibrated: true TCE 0
        crossfit.append(crossfit_tce(P, y, cost, n_folds=5, seed=seed))
        plugin.append(metrics.tce(P, y, cost))  # the old in-sample column
    # The in-sample plug-in can only be >= 0 and reports an error that is not there.
    assert min(plugin) >= 0
    assert np.mean(plugin) > 0.02
    # The cross-fitted one is signed (recalibrating calibrated beliefs can only lose)
    # and near 0 on average, never a spurious positive error.
    assert min(crossfit) < 0
    assert -0.05 < np.mean(crossfit) < 0.005


def test_old_evaluation_files_are_refused(tmp_path: Path) -> None:
    path = write_json({"format": "taskcal.evaluation", "format_version": 1}, tmp_path / "e.json")
    msg = (
        f"{path}: evaluation format_version must be 2, got 1: it was written by an older "
        "taskcal whose scores ignored the runtime's rules; re-run `taskcal evaluate` on the "
        "samples file."
    )
    with pytest.raises(DataFileError, match=re.escape(msg)):
        load_evaluation(path)


def test_folds_without_a_served_training_item_are_reported_not_crashed() -> None:
    # 10 items, 2 served, both in fold 0 of 2: fold 0's training rows (fold 1) hold none.
    data = _arrays_with_unserved(n=10, seed=3)
    folds = stratified_folds(data.y, 2, 0)
    no_sample = np.ones(data.n, dtype=bool)
    no_sample[np.flatnonzero(folds == 0)[:2]] = False
    data = EvalArrays(**{**data.__dict__, "no_sample": no_sample})
    expected = (
        "cannot cross-fit: the folds other than fold 0 hold no item with a usable sample "
        "(2 of 10 items have one); use fewer folds or more items."
    )
    _, fit_metrics = fit_calibrator(data, FIXED_DIRICHLET, cv_folds=2)
    assert fit_metrics["n_fit"] == 2
    assert fit_metrics["crossval"] == {"folds": 2, "seed": 0, "error": expected}

    evaluation = evaluate_arrays(
        data, calibrators=("temperature",), n_folds=2, n_permutations=5,
        test_calibrator=FIXED_DIRICHLET,
    )  # fmt: skip
    assert evaluation.row("mbr_temperature")["error"] == f"ConfigurationError: {expected}"
    assert evaluation.permutation is None
    assert evaluation.permutation_error == f"ConfigurationError: {expected}"
    out = json.loads(json.dumps(evaluation_to_dict(evaluation, data)))
    assert out["permutation_error"] == f"ConfigurationError: {expected}"
    from taskcal_agents.workflow._report import verdict

    assert verdict(out) == f"No label-shuffle test was run (ConfigurationError: {expected})."


def test_items_without_a_usable_sample_are_deferred_first() -> None:
    data = _arrays_with_unserved(n=90, seed=4)
    evaluation = evaluate_arrays(data, calibrators=("temperature",), n_permutations=0)
    from taskcal_agents.workflow._selective import action_confidence, risk_coverage

    served = data.served
    for decoder in ("mbr_raw", "mbr_temperature"):
        acts = evaluation.actions[decoder]
        Q = evaluation.probs["raw" if decoder == "mbr_raw" else "temperature"]
        confidence = action_confidence(Q, data.cost, acts, data.executable)
        confidence[~served] = confidence.min() - 1.0
        curve = risk_coverage(data.cost[data.y, acts], confidence)
        assert evaluation.row(decoder)["selective"]["aurc"] == curve.aurc
        # the served items are all covered before any unserved one
        k = int(np.searchsorted(curve.coverage, served.mean() - 1e-12))
        assert curve.coverage[k] == served.mean()
        assert curve.risk[k] == data.cost[data.y, acts][served].mean()


def test_the_cost_sweep_redecides_each_decoder_under_each_wrong_call_cost(
    tmp_path: Path,
) -> None:
    from taskcal_agents.workflow._cost_sweep import WRONG_CALL_COSTS, cost_sweep

    data = eval_arrays(tool_task(), read_samples(_samples_file(tmp_path)), alpha=0.1)
    evaluation = evaluate_arrays(
        data, calibrators=("temperature", FIXED_DIRICHLET), n_folds=3, n_permutations=0
    )
    sweep = cost_sweep(evaluation, data)
    assert sweep is not None and sweep["wrong_call_cost"] == list(WRONG_CALL_COSTS)
    assert set(sweep["decoders"]) == {
        "constant", "mbr_raw", "mbr_temperature", f"mbr_{FIXED_DIRICHLET}"
    }  # fmt: skip
    at_four = WRONG_CALL_COSTS.index(4.0)  # the task's own wrong-call cost (When2Call's)
    for name, series in sweep["decoders"].items():
        assert series["expected_cost"][at_four] == pytest.approx(
            evaluation.row(name)["expected_cost"]
        )
        calls = series["call_rate"]
        assert calls == sorted(calls, reverse=True)  # a dearer wrong call never adds calls
        shares = np.add(np.add(calls, series["ask_rate"]), series["refuse_rate"])
        assert np.allclose(shares, 1.0)  # every item calls, asks or refuses
    raw = sweep["decoders"]["mbr_raw"]["call_rate"]
    assert raw[0] > raw[-1]  # the sweep moves the decisions
