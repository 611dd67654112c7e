"""Metrics: scoring rules, calibration errors, MBR decisions, TCE, reliability diagrams."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.metrics import log_loss

from calibrators import DirichletCalibrator, IdentityCalibrator, TemperatureScaling
from calibrators.metrics import (
    ReliabilityDiagram,
    brier,
    classwise_ece,
    ece,
    expected_cost,
    mbr_actions,
    nll,
    reliability_diagram,
    tce,
)
from tests.conftest import require_module
from tests.unit_tests.calibrators.helpers import FAST, calibrated, miscalibrated

COST = np.array([[0.0, 1.0, 2.0], [4.0, 0.0, 2.0], [4.0, 1.0, 0.0]])


# --- scoring rules ------------------------------------------------------------------------


def test_nll_matches_sklearn_log_loss():
    P, y, _ = miscalibrated(500, 4, seed=0)
    w = np.random.default_rng(0).uniform(0, 2, size=len(y))
    assert nll(y, P) == pytest.approx(log_loss(y, P, labels=range(4)))
    assert nll(y, P, sample_weight=w) == pytest.approx(
        log_loss(y, P, labels=range(4), sample_weight=w)
    )


def test_nll_clips_zero_probabilities():
    assert nll([1], [[1.0, 0.0]], eps=1e-12) == pytest.approx(-np.log(1e-12))


def test_brier_by_hand():
    P = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    y = np.array([0, 1])
    expected = ((0.3**2 + 0.2**2 + 0.1**2) + (0.1**2 + 0.9**2 + 0.8**2)) / 2
    assert brier(y, P) == pytest.approx(expected)
    assert brier(y, P, sample_weight=[1, 0]) == pytest.approx(0.3**2 + 0.2**2 + 0.1**2)


def test_ece_by_hand():
    P = np.array([[0.9, 0.1], [0.85, 0.15], [0.6, 0.4], [0.45, 0.55]])
    y = np.array([0, 1, 0, 1])
    # bins of width 0.5: [0.5, 1] holds confidences .9 (hit), .85 (miss), .6 (hit), .55 (hit)
    assert ece(y, P, n_bins=2) == pytest.approx(abs(3 / 4 - (0.9 + 0.85 + 0.6 + 0.55) / 4))
    # bins of width 0.1: (.8,.9] holds .9,.85 -> |.5-.875|; (.5,.6] holds .6,.55 -> |1-.575|
    assert ece(y, P, n_bins=10) == pytest.approx((2 * 0.375 + 2 * 0.425) / 4)


def test_classwise_ece_by_hand():
    P = np.array([[0.9, 0.1], [0.6, 0.4]])
    y = np.array([0, 1])
    assert classwise_ece(y, P, n_bins=10) == pytest.approx(0.35)


def test_ece_is_small_for_a_calibrated_source():
    P, y = calibrated(50_000, 3, seed=1)
    assert ece(y, P) < 0.01
    assert classwise_ece(y, P) < 0.01
    P_bad, y_bad, _ = miscalibrated(50_000, 3, seed=1)
    assert ece(y_bad, P_bad) > 0.05


def test_weights_equal_duplicates_in_metrics():
    P, y, _ = miscalibrated(100, 3, seed=2)
    w = np.ones(100)
    w[:30] = 2
    P2, y2 = np.vstack([P, P[:30]]), np.concatenate([y, y[:30]])
    for metric in (nll, brier, ece, classwise_ece):
        assert metric(y, P, sample_weight=w) == pytest.approx(metric(y2, P2))
    assert expected_cost(P, y, COST, sample_weight=w) == pytest.approx(expected_cost(P2, y2, COST))


# --- decisions ----------------------------------------------------------------------------


@st.composite
def decision_problems(draw):
    n = draw(st.integers(1, 20))
    k = draw(st.integers(2, 4))
    m = draw(st.integers(1, 4))
    # small integers make exact ties between actions frequent
    raw = draw(arrays(np.float64, (n, k), elements=st.integers(0, 4).map(float)))
    raw[raw.sum(axis=1) == 0] = 1.0
    P = raw / raw.sum(axis=1, keepdims=True)
    cost = draw(arrays(np.float64, (k, m), elements=st.integers(0, 3).map(float)))
    y = np.asarray(draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)))
    return P, y, cost


def brute_force_mbr(P, cost):
    actions = []
    for p in P:
        risks = [
            sum(p[label] * cost[label, a] for label in range(cost.shape[0]))
            for a in range(cost.shape[1])
        ]
        best = min(risks)
        actions.append(next(a for a, r in enumerate(risks) if r == best))
    return np.array(actions)


@FAST
@given(problem=decision_problems())
def test_mbr_actions_match_brute_force(problem):
    P, _, cost = problem
    np.testing.assert_array_equal(mbr_actions(P, cost), brute_force_mbr(P, cost))


def test_mbr_ties_go_to_the_lowest_index():
    np.testing.assert_array_equal(mbr_actions([[0.5, 0.5]], [[0, 1, 0], [1, 0, 0]]), [2])
    np.testing.assert_array_equal(mbr_actions([[0.5, 0.5]], [[1, 1], [1, 1]]), [0])


def test_mbr_with_the_when2call_cost():
    P = np.array([[0.9, 0.05, 0.05], [0.5, 0.3, 0.2], [0.1, 0.1, 0.8], [1 / 3, 1 / 3, 1 / 3]])
    np.testing.assert_array_equal(mbr_actions(P, COST), [0, 1, 2, 1])


@FAST
@given(problem=decision_problems())
def test_expected_cost_of_probabilities_equals_cost_of_their_actions(problem):
    P, y, cost = problem
    a = mbr_actions(P, cost)
    assert expected_cost(P, y, cost) == pytest.approx(expected_cost(a, y, cost))
    assert expected_cost(a, y, cost) == pytest.approx(np.mean(cost[y, a]))


# --- TCE ----------------------------------------------------------------------------------


@FAST
@given(problem=decision_problems(), seed=st.integers(0, 100))
def test_plugin_tce_is_non_negative(problem, seed):
    P, y, cost = problem
    rng = np.random.default_rng(seed)
    y = rng.integers(0, P.shape[1], size=len(y))
    assert tce(P, y, cost, calibrator=TemperatureScaling()) >= 0.0
    assert tce(P, y, cost, calibrator=DirichletCalibrator(reg_lambda=0.1)) >= 0.0


def test_plugin_tce_is_zero_for_the_identity_map():
    P, y, _ = miscalibrated(300, 3, seed=3)
    assert tce(P, y, COST, calibrator=IdentityCalibrator()) == 0.0


def test_plugin_tce_is_near_zero_for_a_calibrated_source():
    P, y = calibrated(20_000, 3, seed=4)
    assert tce(P, y, COST) < 0.005
    assert abs(tce(P, y, COST, method="crossfit")) < 0.01


def test_tce_is_large_for_a_miscalibrated_source():
    P, y, _ = miscalibrated(20_000, 3, seed=5, sharpen=3.0)
    plugin = tce(P, y, COST)
    crossfit = tce(P, y, COST, method="crossfit")
    assert plugin > 0.03
    # The cross-fitted gain is measured on held-out labels and agrees with the plug-in form.
    assert crossfit == pytest.approx(plugin, abs=0.02)


def test_plugin_tce_uses_a_fitted_calibrator_as_given():
    P, y, _ = miscalibrated(2_000, 3, seed=6)
    P_other, y_other, _ = miscalibrated(2_000, 3, seed=7)
    cal = TemperatureScaling().fit(P_other, y_other)
    Q = cal.predict_proba(P)
    risk = Q @ COST
    expected = np.mean(risk[np.arange(len(y)), mbr_actions(P, COST)] - risk.min(axis=1))
    assert tce(P, y, COST, calibrator=cal) == pytest.approx(expected)
    # An unfitted calibrator is cloned and fitted on (P, y); the argument stays unfitted.
    unfitted = TemperatureScaling()
    tce(P, y, COST, calibrator=unfitted)
    assert not hasattr(unfitted, "temperature_")


def test_crossfit_tce_by_hand():
    from sklearn.model_selection import KFold

    P, y, _ = miscalibrated(600, 3, seed=8)
    gains = np.empty(len(y))
    for train, test in KFold(3, shuffle=True, random_state=1).split(P):
        Q = TemperatureScaling().fit(P[train], y[train]).predict_proba(P[test])
        gains[test] = (
            COST[y[test], mbr_actions(P[test], COST)] - COST[y[test], mbr_actions(Q, COST)]
        )
    got = tce(
        P, y, COST, calibrator=TemperatureScaling(), method="crossfit", n_splits=3, random_state=1
    )
    assert got == pytest.approx(gains.mean())


# --- reliability diagrams -----------------------------------------------------------------


def test_reliability_diagram_bin_data():
    P = np.array([[0.9, 0.1], [0.85, 0.15], [0.6, 0.4], [0.45, 0.55]])
    y = np.array([0, 1, 0, 1])
    d = reliability_diagram(P, y, n_bins=10)
    assert isinstance(d, ReliabilityDiagram)
    assert d.figure is None
    assert d.label == "top-label"
    np.testing.assert_allclose(d.bin_edges, np.linspace(0, 1, 11))
    np.testing.assert_allclose(d.weight, [0, 0, 0, 0, 0, 2, 0, 0, 2, 0])
    np.testing.assert_allclose(d.frequency[[5, 8]], [1.0, 0.5])
    np.testing.assert_allclose(d.confidence[[5, 8]], [0.575, 0.875])
    assert np.isnan(d.confidence[0])
    assert d.ece == pytest.approx(ece(y, P, n_bins=10))


def test_reliability_diagram_for_one_class():
    P = np.array([[0.9, 0.1], [0.6, 0.4]])
    d = reliability_diagram(P, [0, 1], n_bins=10, class_index=1)
    assert d.label == "class 1"
    np.testing.assert_allclose(d.weight[[0, 3]], [1, 1])
    np.testing.assert_allclose(d.frequency[[0, 3]], [0, 1])


def test_reliability_diagram_draws_a_figure():
    require_module("matplotlib")
    P, y, _ = miscalibrated(500, 3, seed=9)
    d = reliability_diagram(P, y, plot=True, title="raw")
    assert d.figure is not None
    ax = d.figure.axes[0]
    assert ax.get_title() == "raw"
    d2 = reliability_diagram(P, y, ax=ax, class_index=0)
    assert d2.figure is d.figure
