"""Properties every calibrator shares, and scikit-learn's estimator checks."""

from __future__ import annotations

import json
import pickle
import unittest
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.utils.estimator_checks import parametrize_with_checks

import calibrators
from calibrators import (
    DirichletCalibrator,
    IdentityCalibrator,
    LogisticCalibrator,
    MatrixScaling,
    TemperatureScaling,
    VectorScaling,
    from_dict,
)
from tests.conftest import require_module
from tests.unit_tests.calibrators.helpers import (
    FAST,
    all_calibrators,
    calibrator_id,
    miscalibrated,
)

CALIBRATORS = all_calibrators()
PARAMETRIC = [
    TemperatureScaling(),
    VectorScaling(),
    MatrixScaling(),
    DirichletCalibrator(),
    DirichletCalibrator(kind="diagonal"),
    DirichletCalibrator(kind="fixed_diagonal"),
    LogisticCalibrator(),
]


def chooses_by_cross_validation(cal) -> bool:
    """Whether ``cal`` picks a penalty by cross-validation (its folds depend on the rows)."""
    if isinstance(cal, DirichletCalibrator):
        return cal.reg_lambda == "auto"
    return isinstance(cal, LogisticCalibrator) and cal.C is None


# --- scikit-learn's estimator checks ------------------------------------------------------

_RANDOM_X = (
    "the check fits on a random feature matrix whose rows are not probability distributions; "
    "calibrators reject such input by design (rows must be non-negative and sum to 1)"
)
_COVERED = " ({} is tested on valid probabilities in {})"

EXPECTED_FAILED_CHECKS = {
    "check_fit_score_takes_y": _RANDOM_X,
    "check_estimators_overwrite_params": _RANDOM_X + _COVERED.format("clone", "test_common"),
    "check_dont_overwrite_parameters": _RANDOM_X,
    "check_estimators_fit_returns_self": _RANDOM_X + _COVERED.format("fit -> self", "test_common"),
    "check_readonly_memmap_input": _RANDOM_X,
    "check_n_features_in_after_fitting": _RANDOM_X
    + _COVERED.format("the column-count error", "test_validation"),
    "check_positive_only_tag_during_fit": (
        "our error for negative entries names the row and the fix ('P must hold non-negative "
        "probabilities; row 0 is ...') instead of sklearn's 'Negative values in data' wording"
    ),
    "check_estimators_dtypes": _RANDOM_X,
    "check_sample_weights_not_an_array": _RANDOM_X,
    "check_sample_weights_list": _RANDOM_X,
    "check_all_zero_sample_weights_error": _RANDOM_X
    + _COVERED.format("the all-zero sample_weight error", "test_validation"),
    "check_sample_weights_shape": _RANDOM_X
    + _COVERED.format("the sample_weight shape error", "test_validation"),
    "check_sample_weights_not_overwritten": _RANDOM_X,
    "check_sample_weight_equivalence_on_dense_data": _RANDOM_X
    + _COVERED.format("weight 2 == duplicated rows", "test_common"),
    "check_dtype_object": _RANDOM_X,
    "check_pipeline_consistency": _RANDOM_X,
    "check_estimators_nan_inf": _RANDOM_X + _COVERED.format("the NaN/inf error", "test_validation"),
    "check_estimators_pickle": _RANDOM_X + _COVERED.format("pickling", "test_common"),
    "check_f_contiguous_array_estimator": _RANDOM_X,
    "check_classifier_data_not_an_array": _RANDOM_X,
    "check_classifiers_one_label": _RANDOM_X,
    "check_classifiers_one_label_sample_weights": _RANDOM_X,
    "check_classifiers_classes": (
        "labels must be integer column indices of P; the check uses string class labels and "
        "random feature rows"
    ),
    "check_classifiers_train": _RANDOM_X,
    "check_classifiers_regression_target": (
        "the random feature rows are rejected before the continuous target is seen; the "
        "non-integer label error is tested in test_validation"
    ),
    "check_supervised_y_2d": _RANDOM_X,
    "check_non_transformer_estimators_n_iter": _RANDOM_X,
    "check_methods_sample_order_invariance": _RANDOM_X,
    "check_methods_subset_invariance": _RANDOM_X,
    "check_fit2d_1sample": _RANDOM_X,
    "check_estimators_empty_data_messages": (
        "our message for an empty P names the minimum of 2 columns (one per class) instead of "
        "sklearn's '0 feature(s) ... minimum of 1 is required' wording"
    ),
    "check_fit2d_1feature": (
        "a single column is rejected: calibrators need probabilities over at least 2 classes"
    ),
    "check_dict_unchanged": _RANDOM_X,
    "check_fit_idempotent": _RANDOM_X + _COVERED.format("determinism", "test_common"),
    "check_fit_check_is_fitted": _RANDOM_X,
    "check_n_features_in": _RANDOM_X,
    "check_fit2d_predict1d": _RANDOM_X,
    "check_sample_weights_pandas_series": _RANDOM_X
    + "; a pandas Series of weights is accepted (test_sample_weight_as_pandas_series)",
}

_NO_N_ITER = {"check_non_transformer_estimators_n_iter"}


def expected_failed_checks(estimator) -> dict[str, str]:
    failed = dict(EXPECTED_FAILED_CHECKS)
    if not hasattr(estimator, "max_iter"):
        for name in _NO_N_ITER:
            failed.pop(name)
    return failed


@parametrize_with_checks(
    [cls() for cls in calibrators.CALIBRATOR_NAMES.values()],
    expected_failed_checks=expected_failed_checks,
    xfail_strict=True,
)
def test_sklearn_compatible(estimator, check):
    try:
        check(estimator)
    except unittest.SkipTest as exc:
        if "pandas is not installed" in str(exc):
            # skips naming the extra; under CI=true fails (an expected-failure check then
            # reads as xfailed, and test_sample_weight_as_pandas_series fails)
            require_module("pandas")
        raise
    except Exception as exc:
        # Re-raise without sklearn's frames: pytest re-parses the 5,000-line
        # estimator_checks.py for every frame of every expected failure otherwise (~1 s each).
        raise AssertionError(f"{type(exc).__name__}: {exc}") from None


# --- API properties ---------------------------------------------------------------------


KEPT_FOR_0_1 = {
    "FORMAT_VERSION",
    "BaseCalibrator",
    "IdentityCalibrator",
    "check_cost_matrix",
    "check_probabilities",
    "least_cost_actions",
    "metrics",
    "minimax_action",
}
"""Names importable from ``calibrators`` outside its ``__all__`` (0.1 exported them)."""

METRICS_KEPT_FOR_0_1 = {"ReliabilityDiagram", "expected_cost", "mbr_actions", "reliability_diagram"}
"""Names importable from ``calibrators.metrics`` outside its ``__all__``."""


def test_all_is_in_sync():
    public = {
        name
        for name, value in vars(calibrators).items()
        if not name.startswith("_") and name != "annotations"
    }
    modules = {"metrics"}
    public -= {name for name in public if name not in modules and _is_module(name)}
    assert set(calibrators.__all__) | KEPT_FOR_0_1 == public
    assert not set(calibrators.__all__) & KEPT_FOR_0_1
    assert len(set(calibrators.__all__)) == len(calibrators.__all__)
    for name in calibrators.__all__:
        assert hasattr(calibrators, name)


def _is_module(name: str) -> bool:
    return type(getattr(calibrators, name)).__name__ == "module"


def test_metrics_all_is_in_sync():
    from calibrators import metrics

    public = {
        name
        for name, value in vars(metrics).items()
        if not name.startswith("_")
        and str(getattr(value, "__module__", "")).startswith("calibrators")
    }
    assert set(metrics.__all__) | METRICS_KEPT_FOR_0_1 == public
    assert not set(metrics.__all__) & METRICS_KEPT_FOR_0_1
    assert len(set(metrics.__all__)) == len(metrics.__all__)


def test_imports_only_numpy_scipy_sklearn():
    import subprocess
    import sys

    code = (
        "import sys; import calibrators, calibrators.metrics; "
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    forbidden = {"taskcal_agents", "langchain_core", "langchain", "torch", "vllm", "matplotlib"}
    assert forbidden.isdisjoint(out)


@pytest.mark.parametrize("cal", CALIBRATORS, ids=calibrator_id)
def test_clone_and_get_params(cal):
    copy = clone(cal)
    assert copy.get_params() == cal.get_params()
    assert type(copy) is type(cal)
    params = cal.get_params()
    assert cal.set_params(**params) is cal


@pytest.mark.parametrize("cal", CALIBRATORS, ids=calibrator_id)
def test_fit_returns_self_and_sets_classes(cal):
    P, y, _ = miscalibrated(200, 4, seed=1)
    cal = clone(cal)
    assert cal.fit(P, y) is cal
    assert cal.n_classes_ == 4
    np.testing.assert_array_equal(cal.classes_, np.arange(4))
    assert cal.n_features_in_ == 4


@pytest.mark.parametrize("cal", CALIBRATORS, ids=calibrator_id)
def test_unfitted_raises_not_fitted(cal):
    P, _, _ = miscalibrated(5, 3)
    for method in (cal.predict_proba, cal.predict):
        with pytest.raises(NotFittedError, match=f"This {type(cal).__name__} instance is not"):
            method(P)


@pytest.mark.parametrize("cal", CALIBRATORS, ids=calibrator_id)
def test_predict_is_argmax_and_score_is_negative_nll(cal):
    from calibrators.metrics import nll

    P, y, _ = miscalibrated(300, 3, seed=2)
    cal = clone(cal).fit(P, y)
    Q = cal.predict_proba(P)
    np.testing.assert_array_equal(cal.predict(P), np.argmax(Q, axis=1))
    assert cal.score(P, y) == pytest.approx(-nll(y, Q))


@pytest.mark.parametrize("cal", CALIBRATORS, ids=calibrator_id)
def test_pickle_round_trip(cal):
    P, y, _ = miscalibrated(200, 3, seed=3)
    cal = clone(cal).fit(P, y)
    copy = pickle.loads(pickle.dumps(cal))
    np.testing.assert_array_equal(copy.predict_proba(P), cal.predict_proba(P))


@pytest.mark.parametrize("cal", CALIBRATORS, ids=calibrator_id)
def test_json_round_trip_gives_identical_predictions(cal):
    P, y, _ = miscalibrated(200, 3, seed=4)
    cal = clone(cal).fit(P, y)
    d = cal.to_dict()
    assert d["format_version"] == 1
    assert d["type"] == type(cal).__name__
    copy = from_dict(json.loads(json.dumps(d)))
    assert type(copy) is type(cal)
    np.testing.assert_array_equal(copy.predict_proba(P), cal.predict_proba(P))
    assert copy.to_dict() == d


@pytest.mark.parametrize(
    "cal",
    [MatrixScaling(n_classes=3), DirichletCalibrator(n_classes=3, reg_lambda=1e-2, reg_mu=1e-2)],
    ids=calibrator_id,
)
def test_extra_column_round_trips(cal):
    """A map fitted on 4 input columns for 3 classes survives JSON and pickle."""
    P, y, _ = miscalibrated(300, 4, seed=4)
    y = np.minimum(y, 2)
    cal = clone(cal).fit(P, y)
    d = cal.to_dict()
    assert (d["state"]["n_classes_"], d["state"]["n_features_in_"]) == (3, 4)
    assert d["params"]["n_classes"] == 3
    for copy in (from_dict(json.loads(json.dumps(d))), pickle.loads(pickle.dumps(cal))):
        assert (copy.n_classes_, copy.n_features_in_) == (3, 4)
        np.testing.assert_array_equal(copy.predict_proba(P), cal.predict_proba(P))
    assert from_dict(d).to_dict() == d
    # A square fit writes no n_features_in_, so dictionaries written before it still read.
    assert (
        "n_features_in_" not in clone(cal).set_params(n_classes=None).fit(P, y).to_dict()["state"]
    )


@pytest.mark.parametrize("cal", CALIBRATORS, ids=calibrator_id)
def test_unfitted_json_round_trip(cal):
    d = json.loads(json.dumps(cal.to_dict()))
    assert d["state"] is None
    copy = from_dict(d)
    assert repr(copy) == repr(cal)
    with pytest.raises(NotFittedError):
        copy.predict_proba(np.eye(3))


@pytest.mark.parametrize("cal", CALIBRATORS, ids=calibrator_id)
def test_deterministic(cal):
    P, y, _ = miscalibrated(300, 3, seed=5)
    a = clone(cal).fit(P, y).predict_proba(P)
    b = clone(cal).fit(P, y).predict_proba(P)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("cal", CALIBRATORS, ids=calibrator_id)
def test_weight_two_equals_duplicated_rows(cal):
    P, y, _ = miscalibrated(120, 3, seed=6)
    w = np.ones(len(y))
    w[:40] = 2.0
    P_dup = np.vstack([P, P[:40]])
    y_dup = np.concatenate([y, y[:40]])
    if chooses_by_cross_validation(cal):
        pytest.skip("cross-validation folds differ between weighted and duplicated rows")
    a = clone(cal).fit(P, y, sample_weight=w).predict_proba(P)
    b = clone(cal).fit(P_dup, y_dup).predict_proba(P)
    np.testing.assert_allclose(a, b, atol=2e-6)


@pytest.mark.parametrize("cal", CALIBRATORS, ids=calibrator_id)
def test_zero_weight_equals_dropped_rows(cal):
    P, y, _ = miscalibrated(120, 3, seed=7)
    w = np.ones(len(y))
    w[:30] = 0.0
    if chooses_by_cross_validation(cal):
        pytest.skip("cross-validation folds differ between zero-weighted and dropped rows")
    a = clone(cal).fit(P, y, sample_weight=w).predict_proba(P)
    b = clone(cal).fit(P[30:], y[30:]).predict_proba(P)
    np.testing.assert_allclose(a, b, atol=2e-6)


@pytest.mark.parametrize("cal", CALIBRATORS, ids=calibrator_id)
def test_absent_class_is_handled(cal):
    """A class that never occurs in y (a rare 'abstain') still gets a column."""
    P, y, _ = miscalibrated(300, 4, seed=8)
    keep = y != 3
    P, y = P[keep], y[keep]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        cal = clone(cal).fit(P, y)
    Q = cal.predict_proba(P)
    assert Q.shape == P.shape
    assert np.all(np.isfinite(Q))
    np.testing.assert_allclose(Q.sum(axis=1), 1.0)
    assert cal.n_classes_ == 4


@pytest.mark.parametrize("cal", PARAMETRIC, ids=calibrator_id)
def test_parametric_maps_start_at_identity(cal):
    """The optimiser's starting point is the identity map."""
    P, _, _ = miscalibrated(200, 4, seed=9)
    cal = clone(cal)
    cal._init_state(4)
    np.testing.assert_allclose(cal.predict_proba(P), P, atol=1e-12)


@pytest.mark.parametrize("cal", PARAMETRIC, ids=calibrator_id)
def test_parametric_maps_stay_near_identity_on_calibrated_data(cal):
    from tests.unit_tests.calibrators.helpers import calibrated

    P, y = calibrated(20_000, 3, seed=10)
    Q = clone(cal).fit(P, y).predict_proba(P)
    assert np.max(np.abs(Q - P)) < 0.05


@pytest.mark.parametrize("cal", CALIBRATORS, ids=calibrator_id)
def test_calibration_lowers_nll_on_miscalibrated_data(cal):
    from calibrators.metrics import nll

    P, y, _ = miscalibrated(3000, 3, seed=11)
    P_test, y_test, _ = miscalibrated(3000, 3, seed=12)
    Q = clone(cal).fit(P, y).predict_proba(P_test)
    if isinstance(cal, IdentityCalibrator):
        np.testing.assert_array_equal(Q, P_test)
    else:
        assert nll(y_test, Q) < nll(y_test, P_test) - 0.05


@st.composite
def probabilities_and_labels(draw):
    n = draw(st.integers(1, 25))
    k = draw(st.integers(2, 5))
    raw = draw(
        arrays(
            np.float64,
            (n, k),
            elements=st.one_of(
                st.just(0.0),
                st.floats(1e-300, 1e-8),
                st.floats(0.0, 1.0),
                st.floats(0.0, 1e6),
            ),
        )
    )
    sums = raw.sum(axis=1, keepdims=True)
    raw[sums[:, 0] == 0] = 1.0
    P = raw / raw.sum(axis=1, keepdims=True)
    y = np.asarray(draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)))
    return P, y


@pytest.mark.parametrize("cal", CALIBRATORS, ids=calibrator_id)
@FAST
@given(data=probabilities_and_labels())
def test_outputs_are_distributions_for_any_valid_input(cal, data):
    P, y = data
    if chooses_by_cross_validation(cal) and len(y) < 3:
        return  # cv=3 needs three rows
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fitted = clone(cal).fit(P, y)
    Q = fitted.predict_proba(P)
    assert Q.shape == P.shape
    assert np.all(np.isfinite(Q))
    assert np.all(Q >= 0)
    np.testing.assert_allclose(Q.sum(axis=1), 1.0, atol=1e-9)


@pytest.mark.parametrize("name", ["temperature", "vector", "dirichlet", "isotonic", "histogram"])
def test_sample_weight_as_pandas_series(name: str) -> None:
    pd = require_module("pandas")
    from calibrators import make_calibrator

    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(3), size=60)
    y = rng.integers(0, 3, size=60)
    w = rng.uniform(0.5, 2.0, size=60)
    a = make_calibrator(name).fit(P, y, sample_weight=pd.Series(w))
    b = make_calibrator(name).fit(P, y, sample_weight=w)
    np.testing.assert_allclose(a.predict_proba(P), b.predict_proba(P))


def test_every_exported_map_is_in_the_registry() -> None:
    exported = {
        obj
        for obj in map(vars(calibrators).get, calibrators.__all__)
        if isinstance(obj, type) and issubclass(obj, calibrators.BaseCalibrator)
    }
    registered = set(calibrators.CALIBRATOR_NAMES.values())
    assert exported <= registered, f"maps missing from CALIBRATOR_NAMES: {exported - registered}"
    assert {type(cal) for cal in CALIBRATORS} == registered


def test_a_map_with_fitted_state_must_check_it() -> None:
    class Unchecked(calibrators.BaseCalibrator):
        _state_attributes = (("weight_", "float"),)

    match = (
        "Unchecked lists fitted state in _state_attributes but does not define _state_problem; "
        "define it so that from_dict can check a stored state."
    )
    with pytest.raises(NotImplementedError, match=match):
        Unchecked()._state_problem()
    assert calibrators.IdentityCalibrator()._state_problem() is None
