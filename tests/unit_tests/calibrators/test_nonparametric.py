"""Isotonic regression and histogram binning."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from calibrators import HistogramBinning, IsotonicCalibrator
from tests.unit_tests.calibrators.helpers import miscalibrated


def test_isotonic_matches_sklearn_per_class_before_renormalising():
    P, y, _ = miscalibrated(500, 3, seed=0)
    cal = IsotonicCalibrator().fit(P, y)
    P_test, _, _ = miscalibrated(200, 3, seed=1)
    raw = np.column_stack(
        [
            IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip")
            .fit(P[:, j], y == j)
            .predict(P_test[:, j])
            for j in range(3)
        ]
    )
    expected = raw / raw.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(cal.predict_proba(P_test), expected, atol=1e-12)


def test_isotonic_maps_are_monotone():
    P, y, _ = miscalibrated(500, 3, seed=2)
    cal = IsotonicCalibrator().fit(P, y)
    for xt, yt in zip(cal.x_thresholds_, cal.y_thresholds_, strict=True):
        assert np.all(np.diff(xt) >= 0)
        assert np.all(np.diff(yt) >= 0)
        assert np.all((yt >= 0) & (yt <= 1))


def test_isotonic_row_of_zeros_becomes_uniform():
    P = np.array([[0.9, 0.1], [0.8, 0.2]])
    y = np.array([1, 0])  # anti-correlated: f_0 and f_1 are flat
    cal = IsotonicCalibrator().fit(P, y)
    cal.y_thresholds_ = [np.zeros_like(t) for t in cal.y_thresholds_]
    np.testing.assert_allclose(cal.predict_proba(P), 0.5)


def test_histogram_bin_values_are_frequencies():
    P = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4], [0.1, 0.9]])
    y = np.array([0, 1, 1, 0, 1])
    cal = HistogramBinning(n_bins=2).fit(P, y)
    np.testing.assert_allclose(cal.bin_edges_, [[0, 0.5, 1], [0, 0.5, 1]])
    # class 0: bin [0, .5) holds p=.3,.1 (labels 1,1) -> 0; bin [.5, 1] holds .9,.8,.6 -> 2/3
    np.testing.assert_allclose(cal.bin_values_[0], [0.0, 2 / 3])
    np.testing.assert_allclose(cal.bin_values_[1], [1 / 3, 1.0])


def test_histogram_empty_bin_maps_to_midpoint():
    P = np.array([[0.95, 0.05], [0.9, 0.1]])
    cal = HistogramBinning(n_bins=4).fit(P, [0, 1])
    np.testing.assert_allclose(cal.bin_values_[0][:3], [0.125, 0.375, 0.625])


def test_histogram_quantile_bins_hold_equal_mass():
    P, y, _ = miscalibrated(1_000, 3, seed=3)
    cal = HistogramBinning(n_bins=4, strategy="quantile").fit(P, y)
    for j in range(3):
        bins = np.searchsorted(cal.bin_edges_[j, 1:-1], P[:, j], side="right")
        counts = np.bincount(bins, minlength=4)
        assert counts.min() >= 240
        assert cal.bin_edges_[j, 0] == 0.0
        assert cal.bin_edges_[j, -1] == 1.0


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_histogram_moves_towards_the_truth_with_many_rows(strategy):
    P, y, truth = miscalibrated(20_000, 2, seed=4)
    Q = HistogramBinning(n_bins=10, strategy=strategy).fit(P, y).predict_proba(P)
    assert np.mean(np.abs(Q - truth)) < 0.5 * np.mean(np.abs(P - truth))
