"""Cross-fitting: seeded stratified folds, and calibration maps fitted on the other folds.

Every decoder, calibrator and label shuffle of the evaluation sees the same folds
(:func:`stratified_folds`, stratified by label and seeded). A fold's items are decided on
what was fitted on the other folds: the label prior of the best constant action
(:func:`in_fold_prior`) and each calibration map (:func:`crossfit_calibrators`), fitted on
the served rows only (items with a usable sample, the only ones that reach a calibrator at
run time) and read on the inputs the runtime would feed it (:func:`calibrator_inputs`).

Under the task's ``unparsed: other`` policy the arrays also hold the calibrator inputs
``X`` (n, k + 1): each belief's smoothed counts plus its unparsed share. The maps that read
extra input columns (matrix scaling, full Dirichlet calibration) are fitted on ``X`` with
``n_classes=k``, as the runtime feeds them (:class:`~taskcal_agents.decision.Decider`
picks the input by the calibrator's ``n_features_in_``); the others need one input column
per label and are fitted on ``P`` (their rows say so in ``inputs`` and ``description``).
Raw MBR and the majority vote read ``P``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from taskcal_agents.errors import ConfigurationError
from taskcal_agents.workflow._calibrator_specs import CalibratorFactory
from taskcal_agents.workflow._eval_arrays import EvalArrays

__all__ = [
    "PRIOR_PSEUDOCOUNT",
    "apply_calibrators",
    "calibrator_inputs",
    "crossfit_calibrated",
    "crossfit_calibrators",
    "in_fold_prior",
    "stratified_folds",
]

PRIOR_PSEUDOCOUNT = 0.5
"""Pseudo-count added per label to the in-fold label prior (Jeffreys), so that its NLL
stays finite when a label is missing from a training fold."""


def stratified_folds(y: NDArray[np.intp], n_folds: int, seed: int) -> NDArray[np.intp]:
    """Assign each item to one of *n_folds* folds, stratified by label, seeded.

    Within each label the items are shuffled and dealt to the folds in turn, continuing
    where the previous label stopped, so fold sizes differ by at most one and every label
    is spread as evenly as its count allows (no warning for rare labels).

    Args:
        y: Label indices, shape (n,).
        n_folds: The number of folds (2 <= n_folds <= n).
        seed: The shuffling seed.

    Returns:
        The fold index of each item, shape (n,).

    Raises:
        ConfigurationError: *n_folds* is below 2 or above the number of items.
    """
    y = np.asarray(y)
    n = y.shape[0]
    if not 2 <= n_folds <= n:
        msg = f"folds must be between 2 and the number of items ({n}), got {n_folds!r}."
        raise ConfigurationError(msg)
    rng = np.random.default_rng(seed)
    folds = np.empty(n, dtype=np.intp)
    offset = 0
    for label in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == label))
        folds[idx] = (offset + np.arange(idx.size)) % n_folds
        offset += idx.size
    return folds


def in_fold_prior(y: NDArray[np.intp], folds: NDArray[np.intp], k: int) -> NDArray[np.float64]:
    """Per item, the label prior of the *other* folds (with :data:`PRIOR_PSEUDOCOUNT`)."""
    out = np.empty((y.shape[0], k))
    for f in np.unique(folds):
        train = folds != f
        counts = np.bincount(y[train], minlength=k) + PRIOR_PSEUDOCOUNT
        out[folds == f] = counts / counts.sum()
    return out


def calibrator_inputs(
    data: EvalArrays, make: CalibratorFactory
) -> tuple[NDArray[np.float64], CalibratorFactory, str]:
    """The inputs the calibrators of *make* read, and the factory to fit them on those.

    A map of raw input columns (``reads_raw_columns``: logistic calibration) reads
    ``data.inputs`` when the task reads the relevance features, else ``P``. Under the ``unparsed:
    other`` policy (``data.X`` set), a map that reads extra input columns
    (``reads_extra_columns``: matrix scaling, full Dirichlet calibration) reads ``X``. Both
    are made with ``n_classes=k``; any other map reads ``P``.

    Returns:
        The inputs, (n, k), (n, k + 1) or (n, task.n_inputs); the factory; and
        ``"inputs"``, ``"features"`` or ``"probs"``.
    """
    k = len(data.labels)

    def make_k() -> Any:
        return make().set_params(n_classes=k)

    if data.inputs is not None and getattr(make(), "reads_raw_columns", False):
        return data.inputs, make_k, "inputs"
    if data.X is None:
        return data.P, make, "probs"
    probe = make()
    if getattr(probe, "reads_raw_columns", False):  # its class columns: a probability row
        return data.P, make, "probs"
    if not getattr(probe, "reads_extra_columns", False):
        return data.P, make, "probs"
    return data.X, make_k, "features"


def crossfit_calibrators(
    P: NDArray[np.float64],
    y: NDArray[np.intp],
    folds: NDArray[np.intp],
    make: CalibratorFactory,
    *,
    fit_mask: NDArray[np.bool_] | None = None,
) -> dict[int, Any]:
    """Fit one calibrator per fold on the other folds' rows (those in *fit_mask*).

    Args:
        P: Calibrator inputs: the raw beliefs (n, k), or the belief features (n, k + 1)
            for a map made with ``n_classes=k`` (see :func:`calibrator_inputs`).
        y: True label indices, (n,).
        folds: Fold index per item, (n,).
        make: Returns a fresh, unfitted calibrator (``fit(P, y)``, ``predict_proba(P)``).
        fit_mask: Rows a calibrator may be fitted on (default: all); the workflow passes
            the served rows (:attr:`EvalArrays.served`).

    Returns:
        The fitted calibrator of each fold, by fold index.
    """
    use = np.ones(P.shape[0], dtype=bool) if fit_mask is None else np.asarray(fit_mask, bool)
    fitted = {}
    for f in np.unique(folds):
        train = (folds != f) & use
        if not train.any():
            msg = (
                f"cannot cross-fit: the folds other than fold {int(f)} hold no item with a "
                f"usable sample ({int(use.sum())} of {use.size} items have one); use fewer "
                "folds or more items."
            )
            raise ConfigurationError(msg)
        fitted[int(f)] = make().fit(P[train], y[train])
    return fitted


def crossfit_calibrated(
    P: NDArray[np.float64],
    y: NDArray[np.intp],
    folds: NDArray[np.intp],
    make: CalibratorFactory,
    *,
    fit_mask: NDArray[np.bool_] | None = None,
) -> NDArray[np.float64]:
    """Calibrate each fold with a map fitted on the other folds.

    See :func:`crossfit_calibrators` for the arguments.

    Returns:
        The cross-fitted calibrated beliefs, (n, k), every row (also those outside
        *fit_mask*).
    """
    return apply_calibrators(P, folds, crossfit_calibrators(P, y, folds, make, fit_mask=fit_mask))


def apply_calibrators(
    P: NDArray[np.float64], folds: NDArray[np.intp], fitted: dict[int, Any]
) -> NDArray[np.float64]:
    """Each fold's rows of *P* through its calibrator: (n, n_classes_) beliefs."""
    parts = []
    for f, calibrator in fitted.items():
        test = folds == f
        parts.append((test, np.asarray(calibrator.predict_proba(P[test]), dtype=np.float64)))
    Q = np.empty((P.shape[0], parts[0][1].shape[1]))
    for test, rows in parts:
        Q[test] = rows
    return Q
