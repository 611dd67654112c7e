"""Synthetic data and calibrator lists shared by the calibrators tests."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, settings
from numpy.typing import NDArray
from sklearn.base import clone

from calibrators import (
    CALIBRATOR_NAMES,
    DirichletCalibrator,
    HistogramBinning,
    LogisticCalibrator,
)

FAST = settings(
    max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
"""Hypothesis settings for these tests: few deterministic examples, no deadline."""


FAST_VARIANTS: dict[type, list] = {
    DirichletCalibrator: [
        DirichletCalibrator(),
        DirichletCalibrator(kind="diagonal", reg_lambda=1e-2, reg_mu=1e-2),
        DirichletCalibrator(kind="fixed_diagonal"),
        DirichletCalibrator(reg_lambda="auto", reg_grid=(0.0, 1e-2, 1.0), cv=3),
    ],
    LogisticCalibrator: [
        LogisticCalibrator(C=1.0),
        LogisticCalibrator(Cs=(0.01, 1.0, 100.0), cv=3),
    ],
    HistogramBinning: [HistogramBinning(n_bins=5), HistogramBinning(n_bins=4, strategy="quantile")],
}
"""The instances tested of a map, where its defaults alone are too slow or too few."""


def all_calibrators() -> list:
    """Every registered map (``CALIBRATOR_NAMES``): its defaults, or its fast variants."""
    return [
        clone(cal) for cls in CALIBRATOR_NAMES.values() for cal in FAST_VARIANTS.get(cls, [cls()])
    ]


def calibrator_id(cal) -> str:
    return repr(cal).replace(" ", "").replace("\n", "")


def softmax(Z: NDArray[np.float64]) -> NDArray[np.float64]:
    Z = Z - Z.max(axis=1, keepdims=True)
    E = np.exp(Z)
    return E / E.sum(axis=1, keepdims=True)


def sample_labels(P: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.intp]:
    """Draw one label per row from the categorical distribution in that row."""
    idx = (rng.random(P.shape[0])[:, None] > np.cumsum(P, axis=1)).sum(axis=1)
    return np.minimum(idx, P.shape[1] - 1)


def miscalibrated(
    n: int,
    k: int = 3,
    *,
    seed: int = 0,
    sharpen: float = 2.0,
    scale: float = 1.5,
) -> tuple[NDArray[np.float64], NDArray[np.intp], NDArray[np.float64]]:
    """Return ``(P, y, truth)``: overconfident, biased reports of true beliefs.

    ``truth = softmax(scale * z)``, ``y ~ truth``, ``P = softmax(sharpen * scale * z + bias)``.
    """
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, k)) * scale
    truth = softmax(Z)
    y = sample_labels(truth, rng)
    bias = np.linspace(-0.5, 0.5, k)
    P = softmax(sharpen * Z + bias)
    return P, y.astype(np.intp), truth


def calibrated(
    n: int, k: int = 3, *, seed: int = 0
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """Return ``(P, y)`` with ``y ~ P``: calibrated by construction."""
    rng = np.random.default_rng(seed)
    P = softmax(rng.normal(size=(n, k)) * 1.5)
    y = sample_labels(P, rng)
    return P, y.astype(np.intp)
