"""The label-shuffle test of "calibrated MBR beats the best constant action".

The test permutes ``y`` against ``P`` (the masks of served items and executable actions
stay with their items) and recomputes the whole cross-fitted cost gap (best constant −
calibrated MBR) with the evaluation's rules: its p-value says whether the gain of
calibrated MBR over the best constant action is more than chance.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from calibrators import mbr_actions
from taskcal_agents.workflow._calibrator_specs import CalibratorFactory
from taskcal_agents.workflow._crossfit import (
    calibrator_inputs,
    crossfit_calibrated,
    in_fold_prior,
    stratified_folds,
)
from taskcal_agents.workflow._decoders import runtime_actions
from taskcal_agents.workflow._eval_arrays import EvalArrays

__all__ = ["PermutationTest", "permutation_test"]


@dataclass
class PermutationTest:
    """Label-shuffle test of "calibrated MBR beats the best constant action".

    Attributes:
        calibrator: The calibrator of the tested MBR decoder.
        statistic: Observed cross-fitted gap, cost(constant) − cost(MBR + calibrator).
        gap_se: Standard error of the observed gap (paired over items).
        p_value: (1 + #{permuted gap >= observed}) / (1 + n_permutations).
        n_permutations: The number of label shuffles.
        seed: The seed of the shuffles.
        null: The permuted gaps.
    """

    calibrator: str
    statistic: float
    gap_se: float | None
    p_value: float
    n_permutations: int
    seed: int
    null: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (the null distribution summarised by its quantiles)."""
        null = np.asarray(self.null)
        return {
            "calibrator": self.calibrator,
            "statistic": self.statistic,
            "gap_se": self.gap_se,
            "p_value": self.p_value,
            "n_permutations": self.n_permutations,
            "seed": self.seed,
            "null_quantiles": {
                q: float(np.quantile(null, float(q))) for q in ("0.5", "0.9", "0.95", "0.99")
            }
            if null.size
            else {},
        }


def _gap(
    P: NDArray[np.float64],
    y: NDArray[np.intp],
    data: EvalArrays,
    n_folds: int,
    seed: int,
    make: CalibratorFactory,
) -> tuple[float, NDArray[np.float64]]:
    """Cross-fitted cost(constant) − cost(MBR + calibrator), and the per-item differences.

    The calibrator is fitted on served rows only and its MBR is restricted to executable
    actions (:func:`runtime_actions`), exactly as in
    :func:`~taskcal_agents.workflow._evaluate.evaluate_arrays`. *P* holds the calibrator
    inputs (see :func:`calibrator_inputs`).
    """
    folds = stratified_folds(y, n_folds, seed)
    k = len(data.labels)
    const = mbr_actions(in_fold_prior(y, folds, k), data.cost)
    Q = crossfit_calibrated(P, y, folds, make, fit_mask=data.served)
    cal = runtime_actions(Q, data)
    diff = data.cost[y, const] - data.cost[y, cal]
    return float(diff.mean()), diff


def permutation_test(
    data: EvalArrays,
    make: CalibratorFactory,
    *,
    calibrator: str,
    n_folds: int = 5,
    fold_seed: int = 0,
    n_permutations: int = 200,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
    n_jobs: int | None = None,
) -> PermutationTest:
    """Label-shuffle test of the cross-fitted gap between best constant and calibrated MBR.

    Under the null hypothesis the beliefs carry no information about the labels, so
    shuffling ``y`` against ``P`` leaves the gap's distribution unchanged. The masks of
    served items and executable actions stay with their items (they describe the
    samples, not the label). Each shuffle refits the whole procedure (folds stratified
    by the shuffled labels, every fold's calibrator with its own inner selection).

    Args:
        data: The evaluation arrays.
        make: Returns a fresh calibrator.
        calibrator: Its name (for the report).
        n_folds: Folds of the cross-fitting.
        fold_seed: Seed of the folds (the same for the observed and permuted labels).
        n_permutations: The number of shuffles.
        seed: Seed of the shuffles.
        progress: Called with 1 after each shuffle.
        n_jobs: Shuffles run in parallel in this many processes (joblib; ``None`` is 1
            unless in a ``joblib.parallel_config`` context, -1 is all cores). The result
            does not depend on it.

    Returns:
        The test result.
    """
    from joblib import Parallel, delayed

    X, make, _ = calibrator_inputs(data, make)
    observed, diff = _gap(X, data.y, data, n_folds, fold_seed, make)
    rng = np.random.default_rng(seed)
    orders = [rng.permutation(data.n) for _ in range(n_permutations)]
    gaps = Parallel(n_jobs=n_jobs, return_as="generator")(
        delayed(_gap)(X, data.y[order], data, n_folds, fold_seed, make) for order in orders
    )
    null = []
    for gap, _ in gaps:
        null.append(gap)
        if progress is not None:
            progress(1)
    exceed = sum(g >= observed - 1e-12 for g in null)
    return PermutationTest(
        calibrator=calibrator,
        statistic=observed,
        gap_se=float(diff.std(ddof=1) / math.sqrt(data.n)) if data.n > 1 else None,
        p_value=(1 + exceed) / (1 + n_permutations),
        n_permutations=n_permutations,
        seed=seed,
        null=null,
    )
