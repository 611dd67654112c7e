"""Every validation error, with its full message."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import OptimizeResult
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import KFold

from calibrators import (
    DirichletCalibrator,
    HistogramBinning,
    IdentityCalibrator,
    IsotonicCalibrator,
    MatrixScaling,
    TemperatureScaling,
    VectorScaling,
    check_cost_matrix,
    check_probabilities,
    from_dict,
    make_calibrator,
)
from calibrators.metrics import (
    brier,
    classwise_ece,
    ece,
    expected_cost,
    mbr_actions,
    nll,
    reliability_diagram,
    tce,
)
from tests.unit_tests.calibrators.helpers import miscalibrated

P_OK = np.array([[0.5, 0.5], [0.2, 0.8], [0.9, 0.1]])
Y_OK = np.array([0, 1, 0])
COST = np.array([[0.0, 1.0, 2.0], [4.0, 0.0, 2.0], [4.0, 1.0, 0.0]])


def exact(message: str) -> str:
    """Regex matching exactly ``message``."""
    return "^" + re.escape(message) + "$"


# --- probabilities -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("P", "message"),
    [
        (
            [[0.5, np.nan], [0.5, 0.5]],
            "P must hold finite probabilities; row 0 is [0.5, nan]. Remove or repair rows "
            "with NaN or infinity.",
        ),
        (
            [[0.5, 0.5], [np.inf, 0.5]],
            "P must hold finite probabilities; row 1 is [inf, 0.5]. Remove or repair rows "
            "with NaN or infinity.",
        ),
        (
            [[0.5, 0.5], [0.5, 0.5], [1.5, -0.5]],
            "P must hold non-negative probabilities; row 2 is [1.5, -0.5]. Pass probabilities, "
            "not logits or log-probabilities (apply a softmax first).",
        ),
        (
            [[0.5, 0.5], [0.6, 0.6]],
            "Each row of P must sum to 1 (tolerance 1e-06); row 1 sums to 1.2. Normalise the "
            "rows, e.g. P / P.sum(axis=1, keepdims=True).",
        ),
        (
            [0.5, 0.5],
            "P must be a 2-D array of shape (n_samples, n_classes) with one probability row per "
            "sample; got an array of shape (2,). Reshape a single distribution with "
            "P.reshape(1, -1).",
        ),
        (
            [[1.0], [1.0]],
            "P must have at least 2 columns (one per class); got shape (2, 1). Pass "
            "probabilities over all classes, not only the positive class.",
        ),
        (np.zeros((0, 3)), "P must hold at least one row; got shape (0, 3)."),
        (
            [["a", "b"]],
            "P must be an array of shape (n_samples, n_classes) holding probabilities; could "
            "not convert it to floats: could not convert string to float: 'a'",
        ),
        (
            np.array([[0.5 + 1j, 0.5]]),
            "Complex data not supported: P must hold real probabilities; got dtype complex128.",
        ),
    ],
)
def test_bad_probabilities(P, message):
    with pytest.raises(ValueError, match=exact(message)):
        check_probabilities(P)
    with pytest.raises(ValueError, match=exact(message)):
        TemperatureScaling().fit(P, np.zeros(np.shape(P)[0] if np.ndim(P) else 0, dtype=int))


def test_rows_within_tolerance_are_accepted():
    P = np.array([[0.5 + 5e-7, 0.5]])
    np.testing.assert_array_equal(check_probabilities(P), P)


def test_name_appears_in_message():
    with pytest.raises(ValueError, match=r"^Each row of y_prob must sum to 1"):
        check_probabilities([[0.2, 0.2]], name="y_prob")


def test_sparse_input_is_rejected():
    message = (
        "P must be a dense array of probabilities; sparse input is not supported. Convert it "
        "with P.toarray()."
    )
    with pytest.raises(TypeError, match=exact(message)):
        TemperatureScaling().fit(sp.csr_matrix(P_OK), Y_OK)
    cal = TemperatureScaling().fit(P_OK, Y_OK)
    with pytest.raises(TypeError, match=exact(message)):
        cal.predict_proba(sp.csr_matrix(P_OK))


# --- labels and weights -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("y", "message"),
    [
        (
            [0, 2, 1],
            "y must hold class indices in [0, 2) because P has 2 columns; y[1] is 2. Pass P "
            "with one column per class.",
        ),
        (
            [0, 1, -1],
            "y must hold class indices in [0, 2) because P has 2 columns; y[2] is -1. Pass P "
            "with one column per class.",
        ),
        (
            [0.0, 0.5, 1.0],
            "y must hold integer class indices in [0, 2); y[1] is 0.5. Map each label to the "
            "column of P that holds its probability.",
        ),
        (
            ["a", "b", "a"],
            "y must hold integer class indices in [0, 2); got dtype <U1 (first value 'a'). Map "
            "each label to the column of P that holds its probability.",
        ),
        (
            [[0], [1], [0]],
            "y must be a 1-D array of class indices; got an array of shape (3, 1).",
        ),
        (
            [0, 1],
            "P and y must have the same number of rows; got 3 rows in P and 2 labels in y.",
        ),
    ],
)
def test_bad_labels(y, message):
    with pytest.raises(ValueError, match=exact(message)):
        TemperatureScaling().fit(P_OK, y)


def test_float_labels_that_are_integers_are_accepted():
    cal = TemperatureScaling().fit(P_OK, [0.0, 1.0, 0.0])
    assert cal.n_classes_ == 2


def test_y_none():
    message = (
        "TemperatureScaling requires y to be passed, but the target y is None. Pass the true "
        "class index of every row of P."
    )
    with pytest.raises(ValueError, match=exact(message)):
        TemperatureScaling().fit(P_OK, None)


@pytest.mark.parametrize(
    ("w", "message"),
    [
        (
            [1.0, -1.0, 1.0],
            "sample_weight must hold finite non-negative numbers; sample_weight[1] is -1.0.",
        ),
        (
            [1.0, 1.0, np.nan],
            "sample_weight must hold finite non-negative numbers; sample_weight[2] is nan.",
        ),
        (
            [1.0, 1.0],
            "sample_weight must have shape (3,), one weight per row of P; got shape (2,).",
        ),
        (
            [0.0, 0.0, 0.0],
            "sample_weight must not be all zero; give at least one row a positive weight.",
        ),
        (
            ["x", 1, 1],
            "sample_weight must be numbers; could not convert it to floats: could not convert "
            "string to float: 'x'",
        ),
    ],
)
def test_bad_sample_weight(w, message):
    with pytest.raises(ValueError, match=exact(message)):
        TemperatureScaling().fit(P_OK, Y_OK, sample_weight=w)


def test_scalar_sample_weight_is_accepted():
    a = TemperatureScaling().fit(P_OK, Y_OK, sample_weight=3.0).temperature_
    b = TemperatureScaling().fit(P_OK, Y_OK).temperature_
    assert a == pytest.approx(b)


# --- prediction ---------------------------------------------------------------------------


def test_predict_with_wrong_number_of_columns():
    cal = MatrixScaling().fit(P_OK, Y_OK)
    message = (
        "P has 3 columns but MatrixScaling was fitted on 2 classes (n_classes_=2). Pass "
        "probabilities over the same 2 classes, in the same order, as in fit."
    )
    with pytest.raises(ValueError, match=exact(message)):
        cal.predict_proba(np.full((2, 3), 1 / 3))
    with pytest.raises(ValueError, match=exact(message)):
        cal.predict(np.full((2, 3), 1 / 3))


X_EXTRA = np.array([[0.5, 0.3, 0.2], [0.2, 0.7, 0.1], [0.6, 0.1, 0.3], [0.3, 0.3, 0.4]])
Y_EXTRA = np.array([0, 1, 0, 1])


@pytest.mark.parametrize("cal", [MatrixScaling(n_classes=2), DirichletCalibrator(n_classes=2)])
def test_predict_with_wrong_number_of_columns_after_an_extra_column_fit(cal):
    cal.fit(X_EXTRA, Y_EXTRA)
    assert (cal.n_features_in_, cal.n_classes_) == (3, 2)
    message = (
        f"P has 2 columns but {type(cal).__name__} was fitted on 3 input columns "
        "(n_features_in_=3) for 2 classes (n_classes_=2). Pass the same 3 input columns, in "
        "the same order, as in fit."
    )
    with pytest.raises(ValueError, match=exact(message)):
        cal.predict_proba(P_OK)
    with pytest.raises(ValueError, match=exact(message)):
        cal.predict(P_OK)
    assert cal.predict_proba(X_EXTRA).shape == (4, 2)


@pytest.mark.parametrize(
    "cal",
    [
        IdentityCalibrator(n_classes=2),
        TemperatureScaling(n_classes=2),
        VectorScaling(n_classes=2),
        DirichletCalibrator(kind="diagonal", n_classes=2),
        DirichletCalibrator(kind="fixed_diagonal", n_classes=2),
        IsotonicCalibrator(n_classes=2),
        HistogramBinning(n_classes=2),
    ],
)
def test_maps_that_need_one_column_per_class_refuse_extra_columns(cal):
    message = (
        f"{cal!r} cannot map 3 input columns of P to n_classes=2 classes: it needs one input "
        "column per class. Only MatrixScaling and DirichletCalibrator(kind='full') read extra "
        "input columns (such as an unparsed share); use one of those, or leave n_classes=None."
    )
    assert not cal.reads_extra_columns
    with pytest.raises(ValueError, match=exact(message)):
        cal.fit(X_EXTRA, Y_EXTRA)
    # n_classes equal to the number of columns is accepted by every map.
    assert cal.set_params(n_classes=3).fit(X_EXTRA, Y_EXTRA).n_classes_ == 3


def test_which_maps_read_extra_columns():
    assert MatrixScaling().reads_extra_columns
    assert DirichletCalibrator().reads_extra_columns
    assert not DirichletCalibrator(kind="diagonal").reads_extra_columns


def test_n_classes_above_the_number_of_columns():
    message = (
        "MatrixScaling(n_classes=4) got n_classes=4, more classes than the 3 input columns of "
        "P; n_classes must be at most 3 (one column per class plus extra input columns), or "
        "None for one class per column."
    )
    with pytest.raises(ValueError, match=exact(message)):
        MatrixScaling(n_classes=4).fit(X_EXTRA, Y_EXTRA)


def test_labels_beyond_n_classes():
    message = (
        "y must hold class indices in [0, 2) because n_classes=2; y[1] is 2. Pass the class "
        "index of every row, or raise n_classes."
    )
    with pytest.raises(ValueError, match=exact(message)):
        MatrixScaling(n_classes=2).fit(X_EXTRA, [0, 2, 1, 0])


def test_bad_n_classes_parameter():
    message = (
        "The 'n_classes' parameter of MatrixScaling must be an int in the range [2, inf) or "
        "None. Got 1 instead."
    )
    with pytest.raises(ValueError, match=exact(message)):
        MatrixScaling(n_classes=1).fit(X_EXTRA, Y_EXTRA)


def test_predict_validates_probabilities():
    cal = MatrixScaling().fit(P_OK, Y_OK)
    message = (
        "Each row of P must sum to 1 (tolerance 1e-06); row 0 sums to 0.6. Normalise the rows, "
        "e.g. P / P.sum(axis=1, keepdims=True)."
    )
    with pytest.raises(ValueError, match=exact(message)):
        cal.predict_proba([[0.3, 0.3]])


# --- parameters ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cal", "message"),
    [
        (
            DirichletCalibrator(reg_lambda=-1.0),
            "The 'reg_lambda' parameter of DirichletCalibrator must be a float in the range "
            "[0.0, inf) or a str among {'auto'}. Got -1.0 instead.",
        ),
        (
            DirichletCalibrator(reg_mu="x"),
            "The 'reg_mu' parameter of DirichletCalibrator must be a float in the range "
            "[0.0, inf), a str among {'auto'} or None. Got 'x' instead.",
        ),
        (
            TemperatureScaling(eps=0.0),
            "The 'eps' parameter of TemperatureScaling must be a float in the range (0.0, 1.0). "
            "Got 0.0 instead.",
        ),
        (
            HistogramBinning(n_bins=0),
            "The 'n_bins' parameter of HistogramBinning must be an int in the range [1, inf). "
            "Got 0 instead.",
        ),
        (
            VectorScaling(max_iter=0),
            "The 'max_iter' parameter of VectorScaling must be an int in the range [1, inf). "
            "Got 0 instead.",
        ),
    ],
)
def test_invalid_parameters(cal, message):
    with pytest.raises(ValueError, match=exact(message)):
        cal.fit(P_OK, Y_OK)


def test_invalid_kind():
    with pytest.raises(
        ValueError,
        match=r"^The 'kind' parameter of DirichletCalibrator must be a str among "
        r"\{'[a-z_]+', '[a-z_]+', '[a-z_]+'\}\. Got 'bogus' instead\.$",
    ):
        DirichletCalibrator(kind="bogus").fit(P_OK, Y_OK)


def test_init_does_not_validate():
    cal = DirichletCalibrator(reg_lambda=-1.0)
    assert cal.reg_lambda == -1.0


@pytest.mark.parametrize("grid", [(), (-1.0, 1.0), (np.nan,)])
def test_bad_reg_grid(grid):
    message = (
        "The 'reg_grid' parameter of DirichletCalibrator must be a non-empty sequence of finite "
        f"non-negative floats; got {grid!r}."
    )
    with pytest.raises(ValueError, match=exact(message)):
        DirichletCalibrator(reg_lambda="auto", reg_grid=grid).fit(P_OK, Y_OK)


def test_auto_needs_two_rows():
    message = (
        "DirichletCalibrator with reg_lambda='auto' needs at least 2 samples for "
        "cross-validation; got 1. Pass a number for reg_lambda."
    )
    with pytest.raises(ValueError, match=exact(message)):
        DirichletCalibrator(reg_lambda="auto").fit(P_OK[:1], Y_OK[:1])


# --- optimiser failures -------------------------------------------------------------------


def _fake_minimize(status: int, message: str, jac: float):
    def minimize(fun, x0, **kwargs):
        return OptimizeResult(
            x=np.asarray(x0),
            fun=1.0,
            jac=np.full_like(x0, jac),
            nit=3,
            status=status,
            success=status == 0,
            message=message,
        )

    return minimize


def _lbfgs_only(monkeypatch):
    """Fit every linear map with L-BFGS-B (the solver of maps above NEWTON_MAX_PARAMS)."""
    import calibrators._linear_objective
    import calibrators._linear_solver

    monkeypatch.setattr(calibrators._linear_objective, "NEWTON_MAX_PARAMS", 0)
    return calibrators._linear_solver


def test_linear_optimiser_failure_raises_runtime_error(monkeypatch):
    linear = _lbfgs_only(monkeypatch)
    monkeypatch.setattr(linear, "minimize", _fake_minimize(2, "ABNORMAL: LINE SEARCH FAILED", 0.5))
    message = (
        "MatrixScaling failed to fit. Reason from scipy.optimize.minimize (L-BFGS-B): "
        "ABNORMAL: LINE SEARCH FAILED"
    )
    with pytest.raises(RuntimeError, match=exact(message)):
        MatrixScaling().fit(P_OK, Y_OK)


def test_line_search_failure_at_a_stationary_point_is_accepted(monkeypatch):
    linear = _lbfgs_only(monkeypatch)
    monkeypatch.setattr(linear, "minimize", _fake_minimize(2, "ABNORMAL: LINE SEARCH FAILED", 1e-9))
    cal = MatrixScaling().fit(P_OK, Y_OK)
    np.testing.assert_allclose(cal.coef_, np.eye(2))


def test_lbfgs_iteration_limit_warns(monkeypatch):
    _lbfgs_only(monkeypatch)
    P, y, _ = miscalibrated(500, 4, seed=0)
    message = (
        "MatrixScaling did not converge in max_iter=1 iterations (scipy: STOP: TOTAL NO. OF "
        "ITERATIONS REACHED LIMIT). Increase max_iter, or add regularisation."
    )
    with pytest.warns(ConvergenceWarning, match=exact(message)):
        MatrixScaling(max_iter=1).fit(P, y)


def test_newton_iteration_limit_warns():
    P, y, _ = miscalibrated(500, 4, seed=0)
    pattern = (
        r"^MatrixScaling did not converge in max_iter=1 iterations \(largest gradient "
        r"component \S+ > tol=1e-07\)\. Increase max_iter, or add regularisation\.$"
    )
    with pytest.warns(ConvergenceWarning, match=pattern):
        cal = MatrixScaling(max_iter=1).fit(P, y)
    assert cal.n_iter_ == 1


def _uphill(hess, scale, grad):
    return grad  # an ascent direction: no step length decreases the objective


def test_newton_stall_hands_over_to_lbfgs(monkeypatch):
    """No Newton step decreases the objective: L-BFGS-B continues from there, same map."""
    import calibrators._linear_objective
    import calibrators._linear_solver

    P, y, _ = miscalibrated(300, 3, seed=1)
    with monkeypatch.context() as m:
        m.setattr(calibrators._linear_objective, "NEWTON_MAX_PARAMS", 0)
        reference = MatrixScaling().fit(P, y)
    monkeypatch.setattr(calibrators._linear_solver, "_newton_step", _uphill)
    cal = MatrixScaling().fit(P, y)
    np.testing.assert_allclose(cal.coef_, reference.coef_, atol=1e-4)
    np.testing.assert_allclose(cal.intercept_, reference.intercept_, atol=1e-4)


def test_newton_stall_then_lbfgs_failure_raises_runtime_error(monkeypatch):
    import calibrators._linear_solver

    monkeypatch.setattr(calibrators._linear_solver, "_newton_step", _uphill)
    monkeypatch.setattr(
        calibrators._linear_solver,
        "minimize",
        _fake_minimize(2, "ABNORMAL: LINE SEARCH FAILED", 1.0),
    )
    message = (
        "MatrixScaling failed to fit. Reason from scipy.optimize.minimize (L-BFGS-B): "
        "ABNORMAL: LINE SEARCH FAILED"
    )
    with pytest.raises(RuntimeError, match=exact(message)):
        MatrixScaling().fit(P_OK, Y_OK)


def test_newton_stall_near_a_stationary_point_is_accepted(monkeypatch):
    """A stall with a gradient below 1e-4 is float64's limit, not a failure."""
    import calibrators._linear_solver
    from calibrators._linear_objective import Regularizer
    from calibrators._linear_solver import fit_linear

    P, y, _ = miscalibrated(300, 3, seed=0)
    L, w = np.log(P), np.ones(len(y))
    options = {"kind": "full", "reg": Regularizer(), "max_iter": 100, "owner": "MatrixScaling"}
    loose = fit_linear(L, y, w, tol=1e-5, **options)
    monkeypatch.setattr(calibrators._linear_solver, "_newton_step", _uphill)
    stalled = fit_linear(L, y, w, tol=0.0, init=(loose.coef, loose.intercept), **options)
    assert stalled.n_iter == 0
    np.testing.assert_array_equal(stalled.coef, loose.coef)


def test_temperature_optimiser_failure_raises_runtime_error(monkeypatch):
    import calibrators._temperature

    def minimize_scalar(fun, **kwargs):
        return OptimizeResult(x=0.0, fun=1.0, success=False, message="Maximum number reached")

    monkeypatch.setattr(calibrators._temperature, "minimize_scalar", minimize_scalar)
    message = (
        "TemperatureScaling failed to fit. Reason from scipy.optimize.minimize_scalar: "
        "Maximum number reached"
    )
    with pytest.raises(RuntimeError, match=exact(message)):
        TemperatureScaling().fit(P_OK, Y_OK)


# --- cost matrices and metrics -------------------------------------------------------------


@pytest.mark.parametrize(
    ("cost", "kwargs", "message"),
    [
        (
            [[0, np.nan], [1, 0]],
            {},
            "cost must hold finite numbers; cost[0, 1] is nan.",
        ),
        (
            [[0, 1], [np.inf, 0]],
            {},
            "cost must hold finite numbers; cost[1, 0] is inf.",
        ),
        (
            [[0, 1], [-1, 0]],
            {},
            "cost must hold non-negative numbers; cost[1, 0] is -1.0. Shift the matrix so that "
            "the best outcome costs 0.",
        ),
        (
            [0, 1],
            {},
            "cost must be a non-empty 2-D matrix of shape (n_labels, n_actions) (row = true "
            "label, column = action); got an array of shape (2,).",
        ),
        (
            np.zeros((2, 3)),
            {"n_labels": 3},
            "cost must have one row per label (3 rows, row = true label); got shape (2, 3). "
            "Transpose it if rows are actions.",
        ),
        (
            np.zeros((3, 3)),
            {"n_actions": 2},
            "cost must have one column per action (2 columns); got shape (3, 3).",
        ),
        (
            [["a"]],
            {},
            "cost must be a matrix of shape (n_labels, n_actions) holding numbers; could not "
            "convert it to floats: could not convert string to float: 'a'",
        ),
    ],
)
def test_bad_cost_matrix(cost, kwargs, message):
    with pytest.raises(ValueError, match=exact(message)):
        check_cost_matrix(cost, **kwargs)


def test_cost_matrix_must_match_probabilities():
    message = (
        "cost must have one row per label (2 rows, row = true label); got shape (3, 3). "
        "Transpose it if rows are actions."
    )
    with pytest.raises(ValueError, match=exact(message)):
        mbr_actions(P_OK, COST)


@pytest.mark.parametrize("metric", [nll, brier, ece, classwise_ece])
def test_swapped_arguments_of_scoring_rules(metric):
    message = (
        f"{metric.__name__} expects its arguments in the order (y_true, y_prob); the first "
        "argument looks like probabilities (shape (3, 2)). Swap the arguments."
    )
    with pytest.raises(ValueError, match=exact(message)):
        metric(P_OK, Y_OK)


def test_swapped_arguments_of_decision_metrics():
    message = (
        "tce expects its arguments in the order (P, y, cost); the second argument looks like "
        "probabilities (shape (3, 2)). Swap the arguments."
    )
    with pytest.raises(ValueError, match=exact(message)):
        tce(Y_OK, P_OK, [[0, 1], [1, 0]])


def test_metric_label_and_length_errors():
    with pytest.raises(
        ValueError,
        match=exact(
            "y_true must hold class indices in [0, 2) because P has 2 columns; y_true[0] is 5. "
            "Pass P with one column per class."
        ),
    ):
        nll([5, 0, 0], P_OK)
    with pytest.raises(
        ValueError,
        match=exact("Found input variables with inconsistent numbers of samples: [2, 3]"),
    ):
        nll([0, 1], P_OK)


def test_expected_cost_action_out_of_range():
    message = (
        "actions must hold class indices in [0, 3) because P has 3 columns; actions[0] is 3. "
        "Pass P with one column per class."
    )
    with pytest.raises(ValueError, match=exact(message)):
        expected_cost([3, 0], [0, 0], COST)


@pytest.mark.parametrize("n_bins", [0, 2.5, True])
def test_bad_n_bins(n_bins):
    message = f"n_bins must be a positive integer; got {n_bins!r}."
    with pytest.raises(ValueError, match=exact(message)):
        ece(Y_OK, P_OK, n_bins=n_bins)


def test_bad_tce_method():
    message = "tce got method='bogus'; expected 'plugin' or 'crossfit'."
    with pytest.raises(ValueError, match=exact(message)):
        tce(P_OK, Y_OK, [[0, 1], [1, 0]], calibrator=TemperatureScaling(), method="bogus")


def test_bad_class_index():
    message = "class_index must lie in [0, 2) for P with 2 columns; got 2."
    with pytest.raises(ValueError, match=exact(message)):
        reliability_diagram(P_OK, Y_OK, class_index=2)


def test_plot_without_matplotlib(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    message = (
        "reliability_diagram needs matplotlib to draw; install the 'plot' extra: pip install "
        "'taskcal-agents[plot]'."
    )
    with pytest.raises(ImportError, match=exact(message)):
        reliability_diagram(P_OK, Y_OK, plot=True)
    # The bin data needs no matplotlib.
    assert reliability_diagram(P_OK, Y_OK).figure is None


# --- serialisation ------------------------------------------------------------------------


def test_make_calibrator_unknown_name():
    message = (
        "make_calibrator got an unknown calibrator name 'platt'; expected one of ['dirichlet', "
        "'histogram', 'identity', 'isotonic', 'logistic', 'matrix', 'temperature', 'vector']."
    )
    with pytest.raises(ValueError, match=exact(message)):
        make_calibrator("platt")


def test_make_calibrator_unknown_parameter():
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        make_calibrator("temperature", bogus=1)


def _dict(**changes):
    d = TemperatureScaling().fit(P_OK, Y_OK).to_dict()
    d.update(changes)
    return d


@pytest.mark.parametrize(
    ("d", "message"),
    [
        ([1, 2], "from_dict expects a dict written by to_dict; got list."),
        (
            _dict(format_version=2),
            "from_dict reads calibrators with format_version 1; got format_version 2. Write the "
            "calibrator again with this version of calibrators.",
        ),
        (
            _dict(type="PlattScaling"),
            "from_dict got an unknown calibrator type 'PlattScaling'; expected one of "
            "['DirichletCalibrator', 'HistogramBinning', 'IdentityCalibrator', "
            "'IsotonicCalibrator', 'LogisticCalibrator', 'MatrixScaling', 'TemperatureScaling', "
            "'VectorScaling'].",
        ),
        (
            _dict(params=[1]),
            "from_dict expects 'params' to be a dict for TemperatureScaling; got [1].",
        ),
        (
            _dict(params={"bogus": 1}),
            "from_dict got parameters that TemperatureScaling does not accept: "
            "TemperatureScaling.__init__() got an unexpected keyword argument 'bogus'",
        ),
        (
            _dict(state={"n_classes_": 2}),
            "from_dict expects the 'state' of TemperatureScaling to hold exactly ['n_classes_', "
            "'temperature_'] (and 'n_features_in_' when the map reads extra input columns); got "
            "['n_classes_'].",
        ),
        (
            _dict(state={"n_classes_": 2, "n_features_in_": 3, "temperature_": 1.0}),
            "from_dict got a TemperatureScaling state with n_features_in_=3 input columns for "
            "n_classes_=2 classes, but TemperatureScaling() needs one input column per class; "
            "the dictionary is inconsistent.",
        ),
    ],
)
def test_bad_dicts(d, message):
    with pytest.raises(ValueError, match=exact(message)):
        from_dict(d)


def test_to_dict_with_a_splitter_parameter():
    message = (
        "DirichletCalibrator.to_dict cannot serialise the parameter cv=KFold(n_splits=3, "
        "random_state=None, shuffle=False); only numbers, strings, None and lists are "
        "JSON-able. Set it to such a value (e.g. an int for cv)."
    )
    with pytest.raises(ValueError, match=exact(message)):
        DirichletCalibrator(cv=KFold(3)).to_dict()
