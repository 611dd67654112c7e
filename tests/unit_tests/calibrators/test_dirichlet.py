"""Dirichlet calibration and the linear family (vector and matrix scaling)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from scipy.optimize import check_grad
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, KFold

from calibrators import DirichletCalibrator, MatrixScaling, VectorScaling
from calibrators._linear import Regularizer, _Objective
from calibrators.metrics import nll
from tests.unit_tests.calibrators.helpers import miscalibrated

KINDS = ["full", "diagonal", "fixed_diagonal"]
REGS = [Regularizer(), Regularizer(lam=0.3), Regularizer(lam=0.3, mu=0.7)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("reg", REGS, ids=["none", "l2", "odir"])
def test_analytic_gradient_matches_finite_differences(kind, reg):
    P, y, _ = miscalibrated(200, 4, seed=0)
    L = np.log(P)
    w = np.random.default_rng(1).uniform(0.5, 2.0, size=len(y))
    objective = _Objective(L, y, w, kind, reg)
    rng = np.random.default_rng(2)
    theta = objective.theta_from_wb(np.eye(4), np.zeros(4))
    theta = theta + rng.normal(scale=0.3, size=theta.shape)
    err = check_grad(lambda t: objective(t)[0], lambda t: objective(t)[1], theta, epsilon=1e-6)
    assert err < 1e-5 * max(1.0, np.linalg.norm(objective(theta)[1]))


@pytest.mark.parametrize("kind", KINDS)
def test_parametrisation_round_trip(kind):
    P, y, _ = miscalibrated(50, 3, seed=1)
    objective = _Objective(np.log(P), y, np.ones(len(y)), kind, Regularizer())
    rng = np.random.default_rng(0)
    W = np.eye(3) * 1.7 if kind == "fixed_diagonal" else rng.normal(size=(3, 3))
    if kind == "diagonal":
        W = np.diag(np.diag(W))
    b = np.zeros(3) if kind == "fixed_diagonal" else rng.normal(size=3)
    W2, b2 = objective.wb_from_theta(objective.theta_from_wb(W, b))
    np.testing.assert_allclose(W2, W, atol=1e-12)
    np.testing.assert_allclose(b2, b, atol=1e-12)


def test_penalty_values():
    W = np.array([[1.0, 2.0], [3.0, 4.0]])
    b = np.array([1.0, -2.0])
    k = 2
    odir, _, _ = Regularizer(lam=0.5, mu=0.25).value_and_grad(W, b)
    assert odir == pytest.approx(0.5 * (4 + 9) / (k * (k - 1)) + 0.25 * 5 / k)
    l2, _, _ = Regularizer(lam=0.5).value_and_grad(W, b)
    assert l2 == pytest.approx(0.5 * (0 + 4 + 9 + 9 + 5) / (k * (k + 1)))


def test_unregularised_full_matches_sklearn_logistic_regression():
    """Full Dirichlet without penalty is multinomial logistic regression on ln P."""
    P, y, _ = miscalibrated(4_000, 4, seed=3)
    L = np.log(P)
    ours = DirichletCalibrator().fit(P, y)
    lr = LogisticRegression(C=np.inf, tol=1e-10, max_iter=10_000).fit(L, y)
    nll_ours = nll(y, ours.predict_proba(P))
    nll_sklearn = nll(y, lr.predict_proba(L))
    assert nll_ours == pytest.approx(nll_sklearn, abs=1e-4)
    assert nll_ours <= nll_sklearn + 1e-6
    np.testing.assert_allclose(ours.predict_proba(P), lr.predict_proba(L), atol=1e-3)
    P_test, _, _ = miscalibrated(1_000, 4, seed=4)
    np.testing.assert_allclose(
        ours.predict_proba(P_test), lr.predict_proba(np.log(P_test)), atol=1e-3
    )


def test_unregularised_maps_equal_matrix_and_vector_scaling():
    P, y, _ = miscalibrated(1_000, 3, seed=5)
    np.testing.assert_array_equal(
        DirichletCalibrator().fit(P, y).predict_proba(P), MatrixScaling().fit(P, y).predict_proba(P)
    )
    np.testing.assert_array_equal(
        DirichletCalibrator(kind="diagonal").fit(P, y).predict_proba(P),
        VectorScaling().fit(P, y).predict_proba(P),
    )


@pytest.mark.parametrize("kind", ["full", "diagonal"])
def test_strong_l2_shrinks_towards_identity(kind):
    P, y, _ = miscalibrated(1_000, 3, seed=6)
    cal = DirichletCalibrator(kind=kind, reg_lambda=1e6).fit(P, y)
    np.testing.assert_allclose(cal.coef_, np.eye(3), atol=1e-3)
    np.testing.assert_allclose(cal.intercept_, 0.0, atol=1e-3)
    np.testing.assert_allclose(cal.predict_proba(P), P, atol=1e-3)


def test_strong_odir_zeroes_off_diagonal_and_intercept_but_keeps_diagonal_free():
    P, y, _ = miscalibrated(3_000, 3, seed=7, sharpen=3.0)
    cal = DirichletCalibrator(reg_lambda=1e6, reg_mu=1e6).fit(P, y)
    off = cal.coef_ - np.diag(np.diag(cal.coef_))
    assert np.abs(off).max() < 1e-3
    assert np.abs(cal.intercept_).max() < 1e-3
    assert np.all(np.diag(cal.coef_) < 0.6)  # a sharpened source is softened
    vector = DirichletCalibrator(kind="diagonal", reg_lambda=0.0, reg_mu=1e6).fit(P, y)
    np.testing.assert_allclose(np.diag(cal.coef_), np.diag(vector.coef_), atol=1e-3)


def test_odir_mu_only_penalises_the_intercept():
    P, y, _ = miscalibrated(2_000, 3, seed=8)
    free = DirichletCalibrator(reg_lambda=0.0, reg_mu=0.0).fit(P, y)
    plain = DirichletCalibrator().fit(P, y)
    np.testing.assert_allclose(free.predict_proba(P), plain.predict_proba(P), atol=1e-6)


def test_regularisation_helps_on_small_calibration_sets():
    P, y, _ = miscalibrated(60, 6, seed=9)
    P_test, y_test, _ = miscalibrated(5_000, 6, seed=10)
    plain = nll(y_test, DirichletCalibrator().fit(P, y).predict_proba(P_test))
    odir = nll(
        y_test, DirichletCalibrator(reg_lambda=1.0, reg_mu=1.0).fit(P, y).predict_proba(P_test)
    )
    assert odir < plain


def test_auto_chooses_the_cross_validated_best():
    P, y, _ = miscalibrated(400, 4, seed=11)
    grid = (0.0, 1e-2, 1.0, 100.0)
    cal = DirichletCalibrator(reg_lambda="auto", reg_grid=grid, cv=4).fit(P, y)
    results = cal.cv_results_
    np.testing.assert_array_equal(results["reg_lambda"], np.array(sorted(grid)))
    assert cal.reg_lambda_ == results["reg_lambda"][np.argmin(results["nll"])]
    manual = DirichletCalibrator(reg_lambda=cal.reg_lambda_).fit(P, y)
    np.testing.assert_allclose(cal.predict_proba(P), manual.predict_proba(P), atol=1e-8)
    # Scoring is the held-out NLL of each candidate, recomputed here with the same folds.
    folds = KFold(n_splits=4, shuffle=True, random_state=0)
    for lam, cv_nll in zip(results["reg_lambda"], results["nll"], strict=True):
        total = 0.0
        for train, test in folds.split(P):
            fitted = DirichletCalibrator(reg_lambda=lam).fit(P[train], y[train])
            total += nll(y[test], fitted.predict_proba(P[test])) * len(test)
        assert cv_nll == pytest.approx(total / len(y), abs=1e-5)


def test_auto_accepts_a_splitter():
    P, y, _ = miscalibrated(200, 3, seed=12)
    cal = DirichletCalibrator(reg_lambda="auto", reg_grid=(0.0, 1.0), cv=KFold(3)).fit(P, y)
    assert cal.reg_lambda_ in (0.0, 1.0)


def test_grid_search_uses_negative_nll():
    P, y, _ = miscalibrated(600, 3, seed=13)
    search = GridSearchCV(
        DirichletCalibrator(reg_mu=0.0), {"reg_lambda": [0.0, 1e-2, 10.0]}, cv=3
    ).fit(P, y)
    assert search.best_params_["reg_lambda"] in (0.0, 1e-2, 10.0)
    best = search.best_estimator_
    assert search.best_score_ < 0
    assert best.score(P, y) == pytest.approx(-nll(y, best.predict_proba(P)))


def test_fitted_attributes():
    P, y, _ = miscalibrated(300, 3, seed=14)
    cal = DirichletCalibrator(reg_lambda=1e-3, reg_mu=1e-3).fit(P, y)
    assert cal.coef_.shape == (3, 3)
    assert cal.intercept_.shape == (3,)
    assert cal.reg_lambda_ == 1e-3
    assert cal.reg_mu_ == 1e-3
    assert cal.cv_results_ is None
    assert cal.n_iter_ > 0
    diag = DirichletCalibrator(kind="diagonal").fit(P, y)
    assert np.count_nonzero(diag.coef_ - np.diag(np.diag(diag.coef_))) == 0
    fixed = DirichletCalibrator(kind="fixed_diagonal").fit(P, y)
    np.testing.assert_allclose(fixed.coef_, fixed.coef_[0, 0] * np.eye(3))
    np.testing.assert_array_equal(fixed.intercept_, 0.0)


def test_zero_probabilities_are_clipped():
    P = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]] * 10)
    y = np.array([0, 1, 1, 2] * 10)
    cal = DirichletCalibrator(reg_lambda=1e-2, eps=1e-6).fit(P, y)
    Q = cal.predict_proba(P)
    assert np.all(np.isfinite(Q))
    assert np.all(Q[:, 2] > 0)


def test_auto_reg_mu_chooses_the_pair_jointly():
    P, y, _ = miscalibrated(300, 3, seed=21)
    lams, mus = (1e-2, 1.0, 100.0), (1e-3, 10.0)
    cal = DirichletCalibrator(
        reg_lambda="auto", reg_mu="auto", reg_grid=lams, reg_mu_grid=mus, cv=3
    ).fit(P, y)
    results = cal.cv_results_
    np.testing.assert_array_equal(results["reg_lambda"], np.repeat(sorted(lams), 2))
    np.testing.assert_array_equal(results["reg_mu"], np.tile(sorted(mus), 3))
    best = int(np.argmin(results["nll"]))
    assert (cal.reg_lambda_, cal.reg_mu_) == (results["reg_lambda"][best], results["reg_mu"][best])
    manual = DirichletCalibrator(reg_lambda=cal.reg_lambda_, reg_mu=cal.reg_mu_).fit(P, y)
    np.testing.assert_allclose(cal.predict_proba(P), manual.predict_proba(P), atol=1e-6)
    # each candidate's score is its held-out NLL on the same folds
    folds = KFold(n_splits=3, shuffle=True, random_state=0)
    triples = zip(results["reg_lambda"], results["reg_mu"], results["nll"], strict=True)
    for lam, mu, cv_nll in triples:
        total = 0.0
        for train, test in folds.split(P):
            fitted = DirichletCalibrator(reg_lambda=lam, reg_mu=mu).fit(P[train], y[train])
            total += nll(y[test], fitted.predict_proba(P[test])) * len(test)
        assert cv_nll == pytest.approx(total / len(y), abs=1e-4)


def test_auto_reg_mu_with_fixed_reg_lambda_and_round_trip():
    from calibrators import from_dict

    P, y, _ = miscalibrated(200, 3, seed=22)
    cal = DirichletCalibrator(reg_lambda=0.1, reg_mu="auto", reg_mu_grid=(0.0, 5.0), cv=4)
    cal.fit(P, y)
    assert cal.reg_lambda_ == 0.1
    assert cal.reg_mu_ in (0.0, 5.0)
    np.testing.assert_array_equal(cal.cv_results_["reg_lambda"], [0.1, 0.1])
    np.testing.assert_array_equal(cal.cv_results_["reg_mu"], [0.0, 5.0])
    back = from_dict(cal.to_dict())
    assert back.reg_mu == "auto"
    assert back.reg_mu_ == cal.reg_mu_
    np.testing.assert_allclose(back.predict_proba(P), cal.predict_proba(P))


def test_auto_reg_mu_grid_is_validated():
    P, y, _ = miscalibrated(60, 3, seed=23)
    msg = (
        "The 'reg_mu_grid' parameter of DirichletCalibrator must be a non-empty sequence of "
        "finite non-negative floats; got (-1.0,)."
    )
    with pytest.raises(ValueError, match=re.escape(msg)):
        DirichletCalibrator(reg_mu="auto", reg_mu_grid=(-1.0,)).fit(P, y)
    msg = (
        "DirichletCalibrator with reg_mu='auto' needs at least 2 samples for "
        "cross-validation; got 1. Pass a number for reg_mu."
    )
    with pytest.raises(ValueError, match=re.escape(msg)):
        DirichletCalibrator(reg_mu="auto").fit(P[:1], y[:1])
