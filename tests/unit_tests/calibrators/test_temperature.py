"""Temperature scaling."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from calibrators import DirichletCalibrator, TemperatureScaling
from calibrators.metrics import nll
from tests.unit_tests.calibrators.helpers import FAST, miscalibrated, sample_labels, softmax


@pytest.mark.parametrize("planted", [0.4, 1.0, 2.5])
def test_recovers_a_planted_temperature(planted):
    """If P = softmax(z / T0) and y ~ softmax(z), the fitted temperature is about 1 / T0."""
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(20_000, 4)) * 2.0
    y = sample_labels(softmax(Z), rng)
    P = softmax(Z / planted)
    T = TemperatureScaling().fit(P, y).temperature_
    assert pytest.approx(1 / planted, rel=0.05) == T


@FAST
@given(seed=st.integers(0, 10_000), n=st.integers(2, 200), k=st.integers(2, 6))
def test_keeps_argmax_and_accuracy_and_does_not_raise_nll(seed, n, k):
    P, y, _ = miscalibrated(n, k, seed=seed)
    cal = TemperatureScaling().fit(P, y)
    Q = cal.predict_proba(P)
    np.testing.assert_array_equal(np.argmax(Q, axis=1), np.argmax(P, axis=1))
    assert np.mean(cal.predict(P) == y) == np.mean(np.argmax(P, axis=1) == y)
    # T = 1 is a candidate, so the calibration-set log loss cannot go up.
    assert nll(y, Q) <= nll(y, P) + 1e-9


def test_keeps_ranking_within_each_row():
    P, y, _ = miscalibrated(500, 5, seed=3)
    Q = TemperatureScaling().fit(P, y).predict_proba(P)
    np.testing.assert_array_equal(
        np.argsort(Q, axis=1, kind="stable"), np.argsort(P, axis=1, kind="stable")
    )


def test_overconfident_source_gets_temperature_above_one():
    P, y, _ = miscalibrated(5_000, 3, seed=4, sharpen=3.0)
    assert TemperatureScaling().fit(P, y).temperature_ > 1.5


def test_matches_fixed_diagonal_dirichlet():
    """Dirichlet 'fixed_diagonal' is a * ln p with b = 0, i.e. a = 1 / T."""
    P, y, _ = miscalibrated(3_000, 4, seed=5)
    T = TemperatureScaling().fit(P, y)
    D = DirichletCalibrator(kind="fixed_diagonal").fit(P, y)
    assert D.coef_[0, 0] == pytest.approx(1 / T.temperature_, rel=1e-4)
    np.testing.assert_allclose(D.predict_proba(P), T.predict_proba(P), atol=1e-5)
