"""Dirichlet calibration and the linear family (vector and matrix scaling)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from scipy.optimize import check_grad
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, KFold

from calibrators import DirichletCalibrator, MatrixScaling, VectorScaling
from calibrators._linear_objective import LinearObjective, Regularizer
from calibrators.metrics import nll
from tests.unit_tests.calibrators.helpers import miscalibrated, sample_labels, softmax


def extra_column_data(n: int, *, seed: int = 0):
    """Return ``(X, y, W, b)``: inputs with 4 columns (3 classes + 1 extra), labels drawn
    from the planted map ``softmax(W ln X + b)``, W of shape (3, 4)."""
    rng = np.random.default_rng(seed)
    X = softmax(rng.normal(size=(n, 4)) * 1.5)
    W = np.array([[1.5, 0.2, 0.0, -1.0], [0.0, 0.8, 0.3, 0.5], [0.1, 0.0, 1.2, 2.0]])
    b = np.array([0.2, -0.1, 0.0])
    y = sample_labels(softmax(np.log(X) @ W.T + b), rng)
    return X, y.astype(np.intp), W, b


KINDS = ["full", "diagonal", "fixed_diagonal"]
REGS = [Regularizer(), Regularizer(lam=0.3), Regularizer(lam=0.3, mu=0.7)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("reg", REGS, ids=["none", "l2", "odir"])
def test_analytic_gradient_matches_finite_differences(kind, reg):
    P, y, _ = miscalibrated(200, 4, seed=0)
    L = np.log(P)
    w = np.random.default_rng(1).uniform(0.5, 2.0, size=len(y))
    objective = LinearObjective(L, y, w, kind, reg)
    rng = np.random.default_rng(2)
    theta = objective.theta_from_wb(np.eye(4), np.zeros(4))
    theta = theta + rng.normal(scale=0.3, size=theta.shape)
    err = check_grad(lambda t: objective(t)[0], lambda t: objective(t)[1], theta, epsilon=1e-6)
    assert err < 1e-5 * max(1.0, np.linalg.norm(objective(theta)[1]))


@pytest.mark.parametrize("reg", REGS, ids=["none", "l2", "odir"])
def test_analytic_gradient_with_an_extra_column(reg):
    X, y, _, _ = extra_column_data(200, seed=0)
    w = np.random.default_rng(1).uniform(0.5, 2.0, size=len(y))
    objective = LinearObjective(np.log(X), y, w, "full", reg, 3)
    rng = np.random.default_rng(2)
    theta = objective.theta_from_wb(np.eye(3, 4), np.zeros(3))
    assert theta.shape == (3 * 4 + 3,)
    theta = theta + rng.normal(scale=0.3, size=theta.shape)
    err = check_grad(lambda t: objective(t)[0], lambda t: objective(t)[1], theta, epsilon=1e-6)
    assert err < 1e-5 * max(1.0, np.linalg.norm(objective(theta)[1]))


@pytest.mark.parametrize("kind", KINDS)
def test_parametrisation_round_trip(kind):
    P, y, _ = miscalibrated(50, 3, seed=1)
    objective = LinearObjective(np.log(P), y, np.ones(len(y)), kind, Regularizer())
    rng = np.random.default_rng(0)
    W = np.eye(3) * 1.7 if kind == "fixed_diagonal" else rng.normal(size=(3, 3))
    if kind == "diagonal":
        W = np.diag(np.diag(W))
    b = np.zeros(3) if kind == "fixed_diagonal" else rng.normal(size=3)
    W2, b2 = objective.wb_from_theta(objective.theta_from_wb(W, b))
    np.testing.assert_allclose(W2, W, atol=1e-12)
    np.testing.assert_allclose(b2, b, atol=1e-12)


def test_parametrisation_round_trip_with_an_extra_column():
    X, y, _, _ = extra_column_data(50, seed=1)
    objective = LinearObjective(np.log(X), y, np.ones(len(y)), "full", Regularizer(), 3)
    rng = np.random.default_rng(0)
    W, b = rng.normal(size=(3, 4)), rng.normal(size=3)
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


def test_penalty_values_with_an_extra_column():
    """W of shape (k, d): the extra column counts as off-diagonal; identity is [I | 0]."""
    W = np.array([[1.0, 2.0, 5.0], [3.0, 4.0, 6.0]])
    b = np.array([1.0, -2.0])
    k, d = 2, 3
    odir, gW, _ = Regularizer(lam=0.5, mu=0.25).value_and_grad(W, b)
    assert odir == pytest.approx(0.5 * (4 + 25 + 9 + 36) / (k * (d - 1)) + 0.25 * 5 / k)
    np.testing.assert_allclose(np.diag(gW), 0.0)
    l2, _, _ = Regularizer(lam=0.5).value_and_grad(W, b)
    assert l2 == pytest.approx(0.5 * (0 + 4 + 25 + 9 + 9 + 36 + 5) / (k * (d + 1)))


@pytest.mark.parametrize("cal", [MatrixScaling(n_classes=3), DirichletCalibrator(n_classes=3)])
def test_extra_column_fit_recovers_a_planted_map(cal):
    """k + 1 inputs -> k classes: W is identified up to a constant per column (softmax)."""
    X, y, W, b = extra_column_data(40_000, seed=3)
    cal.fit(X, y)
    assert (cal.n_classes_, cal.n_features_in_, cal.coef_.shape) == (3, 4, (3, 4))
    np.testing.assert_array_equal(cal.classes_, np.arange(3))

    def centred(M):
        return M - M.mean(axis=0)

    np.testing.assert_allclose(centred(cal.coef_), centred(W), atol=0.08)
    np.testing.assert_allclose(centred(cal.intercept_), centred(b), atol=0.08)
    X_test, _, _, _ = extra_column_data(1_000, seed=4)
    truth = softmax(np.log(X_test) @ W.T + b)
    Q = cal.predict_proba(X_test)
    assert Q.shape == (1_000, 3)
    np.testing.assert_allclose(Q, truth, atol=0.05)


def test_extra_column_starts_at_identity_and_ignores_the_extra_column():
    X, _, _, _ = extra_column_data(50, seed=5)
    cal = MatrixScaling(n_classes=3)
    cal._init_state(3, 4)
    expected = X[:, :3] / X[:, :3].sum(axis=1, keepdims=True)
    np.testing.assert_allclose(cal.predict_proba(X), expected, atol=1e-12)


def test_extra_column_is_used_when_it_carries_the_label():
    """The label the class columns cannot tell apart is told by the extra column."""
    rng = np.random.default_rng(6)
    n = 3_000
    y = rng.integers(0, 2, size=n)
    share = np.where(y == 1, rng.uniform(0.4, 0.8, n), rng.uniform(0.0, 0.3, n))
    X = np.column_stack([(1 - share) / 2, (1 - share) / 2, share])
    square = X[:, :2] / X[:, :2].sum(axis=1, keepdims=True)
    with_share = MatrixScaling(n_classes=2).fit(X, y)
    without = MatrixScaling().fit(square, y)
    assert nll(y, with_share.predict_proba(X)) < nll(y, without.predict_proba(square)) - 0.3


@pytest.mark.parametrize("n_classes", [None, 3], ids=["square", "extra_column"])
def test_unregularised_full_matches_sklearn_logistic_regression(n_classes):
    """Full Dirichlet without penalty is multinomial logistic regression on ln P.

    With ``n_classes=3`` on 4 columns, the fourth column is a feature only.
    """
    P, y, _ = miscalibrated(4_000, 4, seed=3)
    if n_classes is not None:
        y = np.minimum(y, n_classes - 1)  # merge the last two classes
    L = np.log(P)
    ours = DirichletCalibrator(n_classes=n_classes).fit(P, y)
    lr = LogisticRegression(C=np.inf, tol=1e-10, max_iter=10_000).fit(L, y)
    assert ours.predict_proba(P).shape == lr.predict_proba(L).shape
    nll_ours = nll(y, ours.predict_proba(P))
    nll_sklearn = nll(y, lr.predict_proba(L))
    assert nll_ours == pytest.approx(nll_sklearn, abs=1e-4)
    assert nll_ours <= nll_sklearn + 1e-6
    np.testing.assert_allclose(ours.predict_proba(P), lr.predict_proba(L), atol=1e-3)
    P_test, _, _ = miscalibrated(1_000, 4, seed=4)
    np.testing.assert_allclose(
        ours.predict_proba(P_test), lr.predict_proba(np.log(P_test)), atol=1e-3
    )
    matrix = MatrixScaling(n_classes=n_classes).fit(P, y)
    np.testing.assert_array_equal(matrix.predict_proba(P_test), ours.predict_proba(P_test))


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


# Fits of the L-BFGS-B solver at commit 1db30a0 (before Newton's method), default tol,
# on miscalibrated(300, 3, seed=7): the solver changed, the maps must not.
PINNED_LBFGS_FITS = {
    "odir": (
        DirichletCalibrator(reg_lambda=1e-2, reg_mu=1e-2),
        [[0.5440399, 0.0614284, 0.0274204], [-0.0077516, 0.3814763, -0.0274194],
         [0.0077466, -0.0614334, 0.4665061]],
        [0.5286253, -0.1366379, -0.3919861],
    ),
    "odir_strong_mu": (
        DirichletCalibrator(reg_lambda=0.1, reg_mu=1.0),
        [[0.4336975, 0.0129912, -0.0091474], [-0.0186227, 0.4090317, 0.0091470],
         [0.0186244, -0.0129917, 0.5723470]],
        [0.0257298, -0.0074542, -0.0182756],
    ),
    "l2": (
        DirichletCalibrator(reg_lambda=0.1),
        [[0.6819756, 0.2498515, 0.1823618], [0.1474899, 0.5970335, 0.1459246],
         [0.1705345, 0.1531150, 0.6717136]],
        [0.4015487, -0.1106573, -0.2908914],
    ),
    "auto": (
        DirichletCalibrator(
            reg_lambda="auto", reg_mu="auto", reg_grid=(1e-2, 1e-1, 1.0, 10.0),
            reg_mu_grid=(1e-2, 1.0), cv=3,
        ),
        [[0.5216271, 0.0158028, 0.0045756], [-0.0028365, 0.3916184, -0.0045756],
         [0.0028365, -0.0158028, 0.4955275]],
        [0.3004780, -0.0568218, -0.2436560],
    ),
    "matrix": (
        MatrixScaling(),
        [[0.7179348, 0.2833053, 0.2234680], [0.1369477, 0.5831000, 0.1500649],
         [0.1451175, 0.1335947, 0.6264670]],
        [0.6645419, -0.1669494, -0.4975925],
    ),
    "vector": (
        VectorScaling(),
        np.diag([0.5258264, 0.3932878, 0.4998837]).tolist(),
        [-1.1944090, -1.4917031, -1.6646130],
    ),
    "fixed_diagonal": (
        DirichletCalibrator(kind="fixed_diagonal"),
        (0.4454183 * np.eye(3)).tolist(),
        [0.0, 0.0, 0.0],
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", list(PINNED_LBFGS_FITS))
def test_fits_match_the_pinned_lbfgs_fits(name):
    cal, coef, intercept = PINNED_LBFGS_FITS[name]
    P, y, _ = miscalibrated(300, 3, seed=7)
    fitted = clone(cal).fit(P, y)
    np.testing.assert_allclose(fitted.coef_, coef, atol=1e-4)
    np.testing.assert_allclose(fitted.intercept_, intercept, atol=1e-4)
    if name == "auto":
        assert (fitted.reg_lambda_, fitted.reg_mu_) == (10.0, 0.01)


def test_nearly_flat_beliefs_are_recalibrated():
    """Beliefs 10^4 times too flat: ODIR's free diagonal must undo the temperature.

    The standardised features are then ~1e-4 wide and the intercept penalty is huge in
    those coordinates; L-BFGS-B stopped at the identity map here (NLL ln 4) without a
    warning, Newton's method reaches the true model's NLL in a few steps.
    """
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(400, 4)) * 1.5
    y = sample_labels(softmax(Z), rng)
    P = softmax(1e-4 * Z)
    cal = DirichletCalibrator(reg_lambda=1.0, reg_mu=1.0).fit(P, y)
    assert cal.n_iter_ < 30
    assert nll(y, cal.predict_proba(P)) < nll(y, softmax(Z)) + 0.01
    np.testing.assert_allclose(np.diag(cal.coef_), 1e4, rtol=0.2)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("reg", REGS, ids=["none", "l2", "odir"])
def test_analytic_hessian_matches_finite_differences(kind, reg):
    P, y, _ = miscalibrated(200, 4, seed=0)
    w = np.random.default_rng(1).uniform(0.5, 2.0, size=len(y))
    objective = LinearObjective(np.log(P), y, w, kind, reg)
    rng = np.random.default_rng(2)
    theta = objective.theta_from_wb(np.eye(4), np.zeros(4))
    theta = theta + rng.normal(scale=0.3, size=theta.shape)
    hess, _ = objective.hessian(theta)
    eps = 1e-6
    numeric = np.array(
        [
            (objective(theta + eps * e)[1] - objective(theta - eps * e)[1]) / (2 * eps)
            for e in np.eye(theta.size)
        ]
    )
    np.testing.assert_allclose(hess, numeric, atol=1e-6 * max(1.0, np.abs(hess).max()))
    np.testing.assert_allclose(hess, hess.T, atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_penalty_through_the_jacobian_equals_the_regulariser(kind):
    """Newton-sized maps evaluate the penalty through (W, b) = J theta; same values."""
    P, y, _ = miscalibrated(50, 4, seed=3)
    reg = Regularizer(lam=0.3, mu=0.7)
    objective = LinearObjective(np.log(P), y, np.ones(len(y)), kind, reg)
    theta = np.random.default_rng(0).normal(size=objective.n_params)
    value, grad = objective._penalty(theta)
    W, b = objective.wb_from_theta(theta)
    expected, gW, gb = reg.value_and_grad(W, b)
    assert value == pytest.approx(expected, rel=1e-12)
    np.testing.assert_allclose(grad, objective._penalty_grad_to_theta(gW, gb), atol=1e-12)


def test_newton_and_lbfgs_reach_the_same_map(monkeypatch):
    import calibrators._linear_objective

    P, y, _ = miscalibrated(500, 4, seed=2)
    newton = DirichletCalibrator(reg_lambda=1e-2, reg_mu=1e-2, tol=1e-9).fit(P, y)
    monkeypatch.setattr(calibrators._linear_objective, "NEWTON_MAX_PARAMS", 0)
    lbfgs = DirichletCalibrator(reg_lambda=1e-2, reg_mu=1e-2, tol=1e-9).fit(P, y)
    np.testing.assert_allclose(newton.coef_, lbfgs.coef_, atol=1e-5)
    np.testing.assert_allclose(newton.intercept_, lbfgs.intercept_, atol=1e-5)
    assert newton.n_iter_ < lbfgs.n_iter_
