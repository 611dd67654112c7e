"""Logistic calibration on log-probabilities and raw extra features."""

from __future__ import annotations

import json
import pickle
import re
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold

from calibrators import LogisticCalibrator, from_dict, make_calibrator
from calibrators._logistic import _stratified_folds
from calibrators.metrics import nll
from tests.unit_tests.calibrators.helpers import miscalibrated


def exact(message: str) -> str:
    """Regex matching exactly ``message``."""
    return "^" + re.escape(message) + "$"


def with_features(n: int, *, seed: int, informative: bool, n_extra: int = 5):
    """Return ``(X, y)``: 3 miscalibrated probability columns, then ``n_extra`` shares.

    Informative shares: the first three are the "agreement" with each class, high for
    the true class. Otherwise every share is uniform noise, independent of ``y``.
    """
    P, y, _ = miscalibrated(n, 3, seed=seed)
    rng = np.random.default_rng(seed + 100)
    shares = rng.uniform(size=(n, n_extra))
    if informative:
        shares[:, :3] = 0.5 * np.eye(3)[y] + 0.5 * rng.uniform(size=(n, 3))
    return np.hstack([P, shares]), y


def features(X: np.ndarray, k: int, eps: float = 1e-12) -> np.ndarray:
    return np.hstack([np.log(np.clip(X[:, :k], eps, 1.0)), X[:, k:]])


# --- the model --------------------------------------------------------------------------


@pytest.mark.parametrize("C", [0.01, 1.0, 100.0])
def test_matches_sklearn_logistic_regression_at_a_fixed_C(C):
    X, y = with_features(1000, seed=0, informative=True)
    w = np.random.default_rng(2).uniform(0.5, 2.0, size=len(y))
    cal = LogisticCalibrator(C=C, n_classes=3).fit(X, y, sample_weight=w)
    Z = features(X, 3)
    ref = LogisticRegression(C=C, tol=1e-12, max_iter=10_000).fit(Z, y, sample_weight=w)
    Q, Q_ref = cal.predict_proba(X), ref.predict_proba(Z)
    assert nll(y, Q, sample_weight=w) == pytest.approx(nll(y, Q_ref, sample_weight=w), abs=1e-6)
    np.testing.assert_allclose(Q, Q_ref, atol=1e-5)
    np.testing.assert_allclose(cal.coef_, ref.coef_, atol=1e-4)
    assert cal.C_ == C
    assert cal.cv_results_ is None


def test_without_extra_columns_it_is_logistic_regression_on_log_probabilities():
    P, y, _ = miscalibrated(600, 4, seed=1)
    cal = LogisticCalibrator(C=0.3).fit(P, y)
    ref = LogisticRegression(C=0.3, tol=1e-12, max_iter=10_000).fit(np.log(P), y)
    np.testing.assert_allclose(cal.predict_proba(P), ref.predict_proba(np.log(P)), atol=1e-5)
    assert cal.coef_.shape == (4, 4)
    assert cal.n_features_in_ == cal.n_classes_ == 4


def test_two_classes_match_sklearn_binary_model_at_twice_C():
    """As the Notes say: sklearn's binary model penalises w = W_1 - W_0, twice as much."""
    P, y, _ = miscalibrated(500, 2, seed=3)
    cal = LogisticCalibrator(C=0.05).fit(P, y)
    ref = LogisticRegression(C=0.1, tol=1e-12, max_iter=10_000).fit(np.log(P), y)
    np.testing.assert_allclose(cal.predict_proba(P), ref.predict_proba(np.log(P)), atol=1e-5)
    np.testing.assert_allclose(cal.coef_[1] - cal.coef_[0], ref.coef_[0], atol=1e-4)


def test_cv_penalises_noise_columns_more_than_informative_ones():
    X_noise, y_noise = with_features(300, seed=0, informative=False)
    X_info, y_info = with_features(300, seed=0, informative=True)
    noise = LogisticCalibrator(n_classes=3).fit(X_noise, y_noise)
    info = LogisticCalibrator(n_classes=3).fit(X_info, y_info)
    assert noise.C_ < info.C_
    assert info.C_ >= 100 * noise.C_
    np.testing.assert_array_equal(noise.cv_results_["C"], np.logspace(-4, 4, 10))
    best = int(np.argmin(noise.cv_results_["nll"]))
    assert noise.cv_results_["C"][best] == noise.C_


def test_informative_columns_lower_held_out_nll():
    X, y = with_features(300, seed=1, informative=True)
    X_test, y_test = with_features(5000, seed=51, informative=True)
    with_shares = LogisticCalibrator(n_classes=3).fit(X, y)
    without = LogisticCalibrator().fit(X[:, :3], y)
    assert nll(y_test, with_shares.predict_proba(X_test)) < (
        nll(y_test, without.predict_proba(X_test[:, :3])) - 0.1
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_noise_columns_barely_change_held_out_nll(seed):
    X, y = with_features(300, seed=seed, informative=False)
    X_test, y_test = with_features(5000, seed=seed + 50, informative=False)
    with_noise = LogisticCalibrator(n_classes=3).fit(X, y)
    without = LogisticCalibrator().fit(X[:, :3], y)
    gap = nll(y_test, with_noise.predict_proba(X_test)) - nll(
        y_test, without.predict_proba(X_test[:, :3])
    )
    assert gap < 0.005
    # and calibration still helps on the noisy input
    assert nll(y_test, with_noise.predict_proba(X_test)) < nll(y_test, X_test[:, :3]) - 0.05


def test_fixed_C_overrides_the_grid():
    X, y = with_features(200, seed=3, informative=True)
    a = LogisticCalibrator(C=2.5, Cs=[0.1], n_classes=3).fit(X, y)
    b = LogisticCalibrator(C=2.5, n_classes=3).fit(X, y)
    assert a.C_ == b.C_ == 2.5
    np.testing.assert_array_equal(a.coef_, b.coef_)


def test_cs_sequence_is_sorted_and_deduplicated():
    X, y = with_features(200, seed=4, informative=False)
    cal = LogisticCalibrator(Cs=[10.0, 0.1, 1.0, 1.0], n_classes=3).fit(X, y)
    np.testing.assert_array_equal(cal.cv_results_["C"], [0.1, 1.0, 10.0])
    assert cal.C_ in (0.1, 1.0, 10.0)
    # an int is a log-spaced grid from 1e-4 (one value: 1e-4 itself)
    assert LogisticCalibrator(Cs=1, n_classes=3).fit(X, y).C_ == 1e-4


def test_cv_accepts_a_splitter_and_an_iterable():
    X, y = with_features(150, seed=5, informative=True)
    splits = list(KFold(3, shuffle=True, random_state=1).split(X))
    a = LogisticCalibrator(cv=KFold(3, shuffle=True, random_state=1), n_classes=3).fit(X, y)
    b = LogisticCalibrator(cv=splits, n_classes=3).fit(X, y)
    np.testing.assert_array_equal(a.cv_results_["nll"], b.cv_results_["nll"])
    assert a.C_ == b.C_


def test_stratified_folds_spread_every_class_evenly():
    y = np.array([0] * 13 + [1] * 6 + [2] * 1)
    folds = _stratified_folds(y, 5)
    tests = np.concatenate([test for _, test in folds])
    np.testing.assert_array_equal(np.sort(tests), np.arange(y.size))
    for train, test in folds:
        np.testing.assert_array_equal(np.sort(np.concatenate([train, test])), np.arange(y.size))
        assert test.size == 4
        counts = np.bincount(y[test], minlength=3)
        assert 2 <= counts[0] <= 3
        assert 1 <= counts[1] <= 2


def test_rare_class_fits_without_warnings():
    X, y = with_features(60, seed=6, informative=True)
    y = y.copy()
    y[y == 2] = 0
    y[0] = 2  # one row of class 2: fewer than the 5 folds
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cal = LogisticCalibrator(n_classes=3).fit(X, y)
    np.testing.assert_allclose(cal.predict_proba(X).sum(axis=1), 1.0)


# --- input checks -------------------------------------------------------------------------


def test_extra_columns_outside_the_unit_interval_are_accepted():
    X, y = with_features(300, seed=7, informative=True)
    X[:, 3] = 10.0 * X[:, 3] - 4.0  # in [-4, 6]
    X[:, 4] = -(X[:, 4] ** 2)
    X[:, 5] = 1e6 * X[:, 5]
    cal = LogisticCalibrator(n_classes=3).fit(X, y)
    Q = cal.predict_proba(X)
    assert np.all(np.isfinite(Q))
    np.testing.assert_allclose(Q.sum(axis=1), 1.0)
    # an affine change of a raw feature changes nothing at a fixed, weak penalty
    Y = X.copy()
    Y[:, 6] = 3.0 * Y[:, 6] - 1.0
    a = LogisticCalibrator(C=1e6, n_classes=3).fit(X, y).predict_proba(X)
    b = LogisticCalibrator(C=1e6, n_classes=3).fit(Y, y).predict_proba(Y)
    np.testing.assert_allclose(a, b, atol=1e-4)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_extra_column_is_refused(bad):
    X, y = with_features(20, seed=8, informative=True)
    X[3, 5] = bad
    row = X[3, 3:].tolist()
    message = (
        "The extra input columns P[:, 3:] of LogisticCalibrator must hold finite numbers; "
        f"row 3 has {row!r} there. Remove or repair rows with NaN or infinity (for example, "
        "impute a missing feature)."
    )
    with pytest.raises(ValueError, match=exact(message)):
        LogisticCalibrator(n_classes=3).fit(X, y)
    cal = LogisticCalibrator(C=1.0, n_classes=3).fit(np.delete(X, 3, axis=0), np.delete(y, 3))
    with pytest.raises(ValueError, match=exact(message)):
        cal.predict_proba(X)


def test_class_columns_not_summing_to_one_are_refused():
    X, y = with_features(20, seed=9, informative=True)
    cal = LogisticCalibrator(C=1.0, n_classes=3).fit(X, y)
    X[1, :3] = [0.5, 0.3, 0.1]
    message = (
        "Each row of P[:, :3] must sum to 1 (tolerance 1e-06); row 1 sums to "
        f"{0.5 + 0.3 + 0.1!r}. Normalise the rows, e.g. P[:, :3] / P[:, :3].sum(axis=1, "
        "keepdims=True)."
    )
    with pytest.raises(ValueError, match=exact(message)):
        LogisticCalibrator(n_classes=3).fit(X, y)
    with pytest.raises(ValueError, match=exact(message)):
        cal.predict_proba(X)


def test_negative_class_probability_is_refused_but_negative_feature_is_not():
    X, y = with_features(20, seed=10, informative=True)
    X[:, 4] -= 5.0
    LogisticCalibrator(C=1.0, n_classes=3).fit(X, y)
    X[2, :3] = [1.2, -0.2, 0.0]
    message = (
        f"P[:, :3] must hold non-negative probabilities; row 2 is {X[2, :3].tolist()!r}. Pass "
        "probabilities, not logits or log-probabilities (apply a softmax first)."
    )
    with pytest.raises(ValueError, match=exact(message)):
        LogisticCalibrator(C=1.0, n_classes=3).fit(X, y)


def test_features_without_n_classes_are_read_as_class_columns():
    """With n_classes=None every column is a class, so feature columns break the sums."""
    X, y = with_features(20, seed=11, informative=True)
    message = (
        f"Each row of P must sum to 1 (tolerance 1e-06); row 0 sums to {float(X[0].sum())!r}. "
        "Normalise the rows, e.g. P / P.sum(axis=1, keepdims=True)."
    )
    with pytest.raises(ValueError, match=exact(message)):
        LogisticCalibrator().fit(X, y)


def test_wrong_number_of_columns_at_predict_time():
    X, y = with_features(30, seed=12, informative=True)
    cal = LogisticCalibrator(C=1.0, n_classes=3).fit(X, y)
    message = (
        "P has 3 columns but LogisticCalibrator was fitted on 8 input columns "
        "(n_features_in_=8) for 3 classes (n_classes_=3). Pass the same 8 input columns, in "
        "the same order, as in fit."
    )
    with pytest.raises(ValueError, match=exact(message)):
        cal.predict_proba(X[:, :3])


@pytest.mark.parametrize("Cs", [[], [0.0, 1.0], [1.0, np.inf]])
def test_bad_cs_grid(Cs):
    X, y = with_features(30, seed=13, informative=True)
    message = (
        "The 'Cs' parameter of LogisticCalibrator must be an int >= 1 or a non-empty sequence "
        f"of finite positive floats; got {Cs!r}."
    )
    with pytest.raises(ValueError, match=exact(message)):
        LogisticCalibrator(Cs=Cs, n_classes=3).fit(X, y)


def test_bad_c_parameter():
    message = (
        "The 'C' parameter of LogisticCalibrator must be a float in the range (0.0, inf) or "
        "None. Got 0.0 instead."
    )
    X, y = with_features(30, seed=13, informative=True)
    with pytest.raises(ValueError, match=exact(message)):
        LogisticCalibrator(C=0.0, n_classes=3).fit(X, y)


def test_cross_validation_needs_two_rows():
    X, y = with_features(1, seed=14, informative=True)
    message = (
        "LogisticCalibrator with C=None needs at least 2 samples to choose C by "
        "cross-validation; got 1. Pass a number for C."
    )
    with pytest.raises(ValueError, match=exact(message)):
        LogisticCalibrator(n_classes=3).fit(X, y)
    assert LogisticCalibrator(C=1.0, n_classes=3).fit(X, y).n_classes_ == 3


# --- estimator properties ---------------------------------------------------------------


def test_weight_two_equals_duplicated_rows():
    X, y = with_features(150, seed=15, informative=True)
    w = np.ones(len(y))
    w[:50] = 2.0
    X_dup, y_dup = np.vstack([X, X[:50]]), np.concatenate([y, y[:50]])
    cal = LogisticCalibrator(C=0.5, n_classes=3)
    a = clone(cal).fit(X, y, sample_weight=w).predict_proba(X)
    b = clone(cal).fit(X_dup, y_dup).predict_proba(X)
    np.testing.assert_allclose(a, b, atol=2e-6)


def test_json_and_pickle_round_trips_with_extra_columns_give_identical_predictions():
    X, y = with_features(200, seed=16, informative=True)
    cal = LogisticCalibrator(Cs=(0.01, 1.0, 100.0), n_classes=3).fit(X, y)
    d = cal.to_dict()
    assert d["type"] == "LogisticCalibrator"
    assert d["params"]["Cs"] == [0.01, 1.0, 100.0]
    assert (d["state"]["n_classes_"], d["state"]["n_features_in_"]) == (3, 8)
    assert d["state"]["C_"] == cal.C_
    copy = from_dict(json.loads(json.dumps(d)))
    np.testing.assert_array_equal(copy.predict_proba(X), cal.predict_proba(X))
    pickled = pickle.loads(pickle.dumps(cal))
    np.testing.assert_array_equal(pickled.predict_proba(X), cal.predict_proba(X))
    assert copy.cv_results_ is None
    assert copy.to_dict() == d
    assert copy.get_params() == clone(cal).get_params()


def test_from_dict_refuses_a_non_positive_c():
    X, y = with_features(50, seed=17, informative=True)
    d = LogisticCalibrator(C=1.0, n_classes=3).fit(X, y).to_dict()
    d["state"]["C_"] = -1.0
    message = "from_dict got an inconsistent LogisticCalibrator state: 'C_' must be > 0, got -1.0."
    with pytest.raises(ValueError, match=exact(message)):
        from_dict(d)


def test_deterministic():
    X, y = with_features(300, seed=18, informative=True)
    a = LogisticCalibrator(n_classes=3).fit(X, y)
    b = LogisticCalibrator(n_classes=3).fit(X, y)
    np.testing.assert_array_equal(a.cv_results_["nll"], b.cv_results_["nll"])
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))


def test_make_calibrator_name():
    cal = make_calibrator("logistic", C=1.0, n_classes=3)
    assert isinstance(cal, LogisticCalibrator)
    assert cal.reads_extra_columns
    assert cal.reads_raw_columns  # what taskcal_agents looks for to pass raw features
    assert repr(cal) == "LogisticCalibrator(C=1.0, n_classes=3)"
