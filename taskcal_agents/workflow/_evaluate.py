"""Cross-fitted comparison of decoders, on plain arrays (no model, no files).

:func:`evaluate_arrays` runs the decoders of :mod:`~taskcal_agents.workflow._decoders` (the
best constant action, the greedy completion, the majority vote, raw MBR, and MBR on each
calibrator's cross-fitted belief) on the evaluation arrays
(:class:`~taskcal_agents.workflow._eval_arrays.EvalArrays`) and scores each into one row
(:mod:`~taskcal_agents.workflow._scores`, with a risk–coverage block from
:mod:`~taskcal_agents.workflow._selective`).

The scores are those of what the runtime (:class:`~taskcal_agents.decision.Decider`)
would do: the decoders decide as the runtime does (executable MBR, the fallback action on
items without a usable sample), and the calibration maps are fitted on the served rows only
(items with a usable sample: the others never reach the calibrator at run time;
:mod:`~taskcal_agents.workflow._crossfit`). Scores are over all items.

Folds are stratified by label and seeded, so every decoder and calibrator sees the same
splits. The label-shuffle test (:mod:`~taskcal_agents.workflow._permutation`) says whether
the gain of calibrated MBR over the best constant action is more than chance.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from numpy.typing import NDArray

from taskcal_agents.errors import ConfigurationError
from taskcal_agents.workflow._calibrator_specs import (
    DEFAULT_CALIBRATORS,
    TCE_CALIBRATOR,
    CalibratorFactory,
    default_factory,
)
from taskcal_agents.workflow._crossfit import (
    apply_calibrators,
    calibrator_inputs,
    crossfit_calibrators,
    in_fold_prior,
    stratified_folds,
)
from taskcal_agents.workflow._decoders import (
    DECODERS,
    Beliefs,
    Decided,
    Decoder,
    calibrated_argmax,
    calibrated_mbr,
)
from taskcal_agents.workflow._eval_arrays import EvalArrays
from taskcal_agents.workflow._permutation import PermutationTest, permutation_test
from taskcal_agents.workflow._scores import add_paired_savings, crossfit_tce, score_actions
from taskcal_agents.workflow._selective import action_confidence, selective_summary

__all__ = ["Evaluation", "decoder_row", "evaluate_arrays"]


@dataclass
class Evaluation:
    """The result of :func:`evaluate_arrays`.

    Attributes:
        rows: One dict per decoder (``decoder``, ``description``, scores, ``error``).
        probs: Cross-fitted beliefs per probabilistic decoder (``raw``, ``constant``,
            calibrator names), each (n, k).
        actions: Action indices per decoder, each (n,).
        permutation: The label-shuffle test, or ``None`` when not run.
        n_folds: The number of folds.
        seed: The fold seed.
        folds: The fold index of each item, (n,).
        calibrators: Per calibrator name, the fitted map of each fold (fold index →
            calibrator, fitted on the served rows of the other folds): what the runtime
            would use on that fold's items (not written to JSON).
        n_excluded_no_sample: Items left out of every calibrator fit because they have
            no usable sample (they get the fallback action).
        permutation_error: Why the label-shuffle test could not run (its calibrator
            could not be cross-fitted), or ``None``.
    """

    rows: list[dict[str, Any]]
    probs: dict[str, NDArray[np.float64]]
    actions: dict[str, NDArray[np.intp]]
    permutation: PermutationTest | None
    n_folds: int
    seed: int
    folds: NDArray[np.intp] = field(default_factory=lambda: np.zeros(0, dtype=np.intp))
    calibrators: dict[str, dict[int, Any]] = field(default_factory=dict)
    n_excluded_no_sample: int = 0
    permutation_error: str | None = None

    def row(self, decoder: str) -> dict[str, Any]:
        """The row of *decoder*."""
        for row in self.rows:
            if row["decoder"] == decoder:
                return row
        msg = f"no decoder {decoder!r}; decoders are {[r['decoder'] for r in self.rows]!r}."
        raise KeyError(msg)


def decoder_row(
    name: str,
    decoder: Decoder,
    decided: Decided,
    data: EvalArrays,
    *,
    tce: Callable[[NDArray[np.float64]], float | None] | None = None,
    target_risk: float | None = None,
) -> dict[str, Any]:
    """The row of decoder *name*: its scores and its risk–coverage block.

    Args:
        name: The row's ``decoder``.
        decoder: The decoder (its description, what it read).
        decided: What it decided.
        data: The evaluation arrays.
        tce: Passed to :func:`~taskcal_agents.workflow._scores.score_actions`.
        target_risk: Passed to :func:`~taskcal_agents.workflow._selective.selective_summary`.

    Returns:
        ``decoder``, ``description``, ``error`` (``None``), the scores of
        :func:`~taskcal_agents.workflow._scores.score_actions`, ``selective`` (items ranked
        by the expected-cost margin of the decoder's action under the belief it decided
        on, ``P`` when it read none; items without a usable sample last when it reads
        samples), and for a calibrated decoder ``inputs``.
    """
    row: dict[str, Any] = {"decoder": name, "description": decoder.description, "error": None}
    row.update(
        score_actions(
            decided.actions,
            data,
            decided.belief,
            tce=tce,
            representative_calls=decoder.representative_calls,
        )
    )
    allowed = data.executable if decided.allowed is None else decided.allowed
    belief = data.P if decided.belief is None else decided.belief
    confidence = action_confidence(belief, data.cost, decided.actions, allowed)
    if decoder.reads_samples and data.no_sample.any():
        # Items without a usable sample are the least informed: deferred first.
        confidence = np.where(data.no_sample, confidence.min() - 1.0, confidence)
    row["selective"] = selective_summary(
        data.cost[data.y, decided.actions], confidence, target_risk=target_risk
    )
    if decoder.inputs is not None:
        row["inputs"] = decoder.inputs
    return row


@dataclass
class _Table:
    """The evaluation's rows as its decoders run, and each decoder's actions."""

    data: EvalArrays
    tce: Callable[[NDArray[np.float64]], float | None]
    target_risk: float | None
    rows: list[dict[str, Any]] = field(default_factory=list)
    actions: dict[str, NDArray[np.intp]] = field(default_factory=dict)

    def run(self, name: str, decoder: Decoder, beliefs: Beliefs) -> None:
        """Add the row of *decoder* on *beliefs* (none when it does not decide on them)."""
        decided = decoder.decide(self.data, beliefs)
        if decided is None:
            return
        self.actions[name] = decided.actions
        self.rows.append(
            decoder_row(
                name, decoder, decided, self.data, tce=self.tce, target_risk=self.target_risk
            )
        )

    def failed(self, name: str, decoder: Decoder, exc: Exception) -> None:
        """Add the row of a calibrated decoder whose map could not be cross-fitted."""
        self.rows.append(
            {
                "decoder": name,
                "description": decoder.description,
                "inputs": decoder.inputs,
                "error": f"{type(exc).__name__}: {exc}",
            }
        )


def _served_tce(
    Q: NDArray[np.float64],
    *,
    data: EvalArrays,
    n_folds: int,
    seed: int,
    make: CalibratorFactory,
) -> float | None:
    """The cross-fitted TCE of *Q* on the served rows (those a calibrator fits and decides)."""
    try:
        served = data.served
        return crossfit_tce(
            Q[served], data.y[served], data.cost, n_folds=n_folds, seed=seed, make=make
        )
    except (ValueError, RuntimeError, np.linalg.LinAlgError):
        return None


def evaluate_arrays(
    data: EvalArrays,
    *,
    calibrators: Sequence[str] = DEFAULT_CALIBRATORS,
    n_folds: int = 5,
    seed: int = 0,
    n_permutations: int = 200,
    test_calibrator: str | None = "dirichlet",
    factory: Callable[[str], CalibratorFactory] = default_factory,
    progress: Callable[[int], None] | None = None,
    target_risk: float | None = None,
    n_jobs: int | None = None,
) -> Evaluation:
    """Evaluate every decoder with cross-fitted calibration.

    Args:
        data: The evaluation arrays.
        calibrators: Calibrator specs to cross-fit (one ``mbr_<spec>`` row each), names of
            :func:`calibrators.make_calibrator` optionally with parameters
            (``"dirichlet:reg_lambda=auto"``, see :func:`parse_calibrator_spec`).
        n_folds: The number of stratified folds.
        seed: Seed of the folds and of the label shuffles.
        n_permutations: Label shuffles of the permutation test (0 skips it).
        test_calibrator: The calibrator whose MBR the test compares with the best constant
            action; ``None`` skips the test. It need not be in *calibrators*; when it is
            (and fits), an ``argmax_<test_calibrator>`` row adds its 0-1-cost decision.
        factory: Maps a calibrator spec to a factory of fresh calibrators.
        progress: Called with a step count as work completes (for a progress bar).
        target_risk: The risk a user accepts on the items a decoder keeps; each row's
            ``selective`` block then gives the coverage reached at it.
        n_jobs: Processes for the label shuffles (see :func:`permutation_test`).

    Returns:
        The rows, the cross-fitted beliefs and actions, the per-fold calibrators and the
        permutation test. Each row (:func:`decoder_row`) holds the scores of
        :func:`~taskcal_agents.workflow._scores.score_actions` plus the
        paired savings ``saving_vs_constant``, ``saving_vs_raw`` (mean per-item cost of
        the baseline minus this decoder's; positive = cheaper) and their paired standard
        errors ``saving_vs_constant_se``, ``saving_vs_raw_se``, and a ``selective`` block
        (:func:`~taskcal_agents.workflow._selective.selective_summary`: risk–coverage
        curve, AURC, coverage at *target_risk*) with items ranked by the decoder's
        expected-cost margin for its own action under the belief it decided on (the raw
        belief for ``greedy``; items without a usable sample come last). A calibrator
        that fails to fit gets a row with ``error`` set and no scores. Each calibrator
        row says in ``inputs`` what the map read: ``"probs"`` (p̂) or, under the
        ``unparsed: other`` policy, ``"features"`` (p̂'s counts plus the unparsed share;
        see :func:`calibrator_inputs`). ``mbr_raw_any`` appears when
        ``data.executable_any`` is set; tool decisions add the rates of
        :func:`~taskcal_agents.workflow._scores.tool_scores` to every scored row.

    Raises:
        ConfigurationError: Bad *n_folds* (see :func:`stratified_folds`), a negative
            *n_permutations*, ``n_jobs=0``, or an unknown calibrator name or parameter.
    """
    if n_permutations < 0:
        msg = f"permutations must be >= 0, got {n_permutations!r}."
        raise ConfigurationError(msg)
    if n_jobs == 0:
        msg = "jobs must be a number of processes >= 1, or negative (-1: all cores), got 0."
        raise ConfigurationError(msg)
    folds = stratified_folds(data.y, n_folds, seed)
    k = data.P.shape[1]
    tick = progress or (lambda _: None)
    tce = partial(_served_tce, data=data, n_folds=n_folds, seed=seed, make=factory(TCE_CALIBRATOR))
    table = _Table(data, tce, target_risk)
    beliefs: dict[str, NDArray[np.float64]] = {
        "raw": data.P,
        "constant": in_fold_prior(data.y, folds, k),
    }
    for name, decoder in DECODERS.items():
        table.run(name, decoder, beliefs)
    tick(1)
    factories = {name: factory(name) for name in calibrators}
    test_factory = factory(test_calibrator) if test_calibrator and n_permutations else None
    fitted: dict[str, dict[int, Any]] = {}
    for name in calibrators:
        X, make, inputs = calibrator_inputs(data, factories[name])
        decoder = calibrated_mbr(name, inputs, features=data.X is not None)
        try:
            fitted[name] = crossfit_calibrators(X, data.y, folds, make, fit_mask=data.served)
            beliefs[name] = apply_calibrators(X, folds, fitted[name])
        except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
            fitted.pop(name, None)
            table.failed(f"mbr_{name}", decoder, exc)
        else:
            table.run(f"mbr_{name}", decoder, beliefs)
        tick(1)
    if test_calibrator in calibrators and test_calibrator in fitted:
        table.run(f"argmax_{test_calibrator}", calibrated_argmax(test_calibrator), beliefs)
    add_paired_savings(table.rows, table.actions, data)
    test = None
    test_error = None
    if test_factory is not None and test_calibrator is not None:
        try:
            test = permutation_test(
                data,
                test_factory,
                calibrator=test_calibrator,
                n_folds=n_folds,
                fold_seed=seed,
                n_permutations=n_permutations,
                seed=seed,
                progress=progress,
                n_jobs=n_jobs,
            )
        except (ValueError, RuntimeError, np.linalg.LinAlgError) as exc:
            test_error = f"{type(exc).__name__}: {exc}"
    return Evaluation(
        rows=table.rows,
        probs=beliefs,
        actions=table.actions,
        permutation=test,
        n_folds=n_folds,
        seed=seed,
        folds=folds,
        calibrators=fitted,
        n_excluded_no_sample=int(data.no_sample.sum()),
        permutation_error=test_error,
    )
