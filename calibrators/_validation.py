"""Input validation shared by the calibrators and the metrics.

This is the only module that imports private scikit-learn helpers (parameter
constraints, ``_fit_context`` and ``_check_sample_weight``); they may change without
deprecation, so ``pyproject.toml`` pins the scikit-learn minor version.
"""

from __future__ import annotations

from collections.abc import Callable
from numbers import Integral, Real
from typing import Any, TypeVar

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray
from sklearn.base import _fit_context
from sklearn.utils import check_consistent_length
from sklearn.utils._param_validation import (
    Interval,
    InvalidParameterError,
    StrOptions,
)
from sklearn.utils.parallel import _get_threadpool_controller
from sklearn.utils.validation import (
    _check_sample_weight,
    _num_samples,
    check_is_fitted,
    validate_data,
)

__all__ = [
    "EXTRA_COLUMN_MAPS",
    "ROW_SUM_TOLERANCE",
    "Integral",
    "Interval",
    "InvalidParameterError",
    "Real",
    "StrOptions",
    "check_consistent_length",
    "check_cost_matrix",
    "check_is_fitted",
    "check_labels",
    "check_probabilities",
    "check_raw_extra_columns",
    "check_sample_weight",
    "clipped_log",
    "fit_context",
    "resolve_n_classes",
    "single_blas_thread",
    "validate_fit_data",
    "validate_predict_data",
]

ROW_SUM_TOLERANCE = 1e-6
"""Largest accepted deviation of a probability row sum from 1."""

_F = TypeVar("_F", bound=Callable[..., Any])


def fit_context(*, prefer_skip_nested_validation: bool) -> Callable[[_F], _F]:
    """Return scikit-learn's ``_fit_context`` decorator (checks the parameters, then fits).

    Typed here because scikit-learn ships no type information.
    """
    decorator: Callable[[_F], _F] = _fit_context(
        prefer_skip_nested_validation=prefer_skip_nested_validation
    )
    return decorator


def single_blas_thread() -> Any:
    """Context manager limiting BLAS to one thread.

    The optimisers here make many small BLAS/LAPACK calls (L-BFGS-B's own updates,
    (k, k) by (k, n) products); on a busy machine, waking BLAS worker threads for
    each costs far more than the work itself (measured: 30 ms instead of 0.2 ms per
    L-BFGS-B step on 2 shared cores). The limit is process-wide while the context is
    open, so it is used around ``fit`` only, not around ``predict_proba``, which
    serving code may call from many threads at once.
    """
    return _get_threadpool_controller().limit(limits=1, user_api="blas")


def _first_bad_row(mask: NDArray[np.bool_]) -> int:
    """Index of the first row of ``P`` flagged in a boolean (n,) or (n, k) mask."""
    rows = mask.any(axis=1) if mask.ndim == 2 else mask
    return int(np.flatnonzero(rows)[0])


def _as_matrix(P: ArrayLike, name: str) -> NDArray[np.float64]:
    """Convert ``P`` to a 2-D float64 array, or raise the ``check_probabilities`` errors."""
    if np.iscomplexobj(P):
        msg = (
            f"Complex data not supported: {name} must hold real probabilities; got dtype "
            f"{np.asarray(P).dtype}."
        )
        raise ValueError(msg)
    try:
        arr = np.asarray(P, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        msg = (
            f"{name} must be an array of shape (n_samples, n_classes) holding probabilities; "
            f"could not convert it to floats: {exc}"
        )
        raise ValueError(msg) from exc
    if arr.ndim != 2:
        msg = (
            f"{name} must be a 2-D array of shape (n_samples, n_classes) with one probability "
            f"row per sample; got an array of shape {arr.shape}. Reshape a single "
            f"distribution with {name}.reshape(1, -1)."
        )
        raise ValueError(msg)
    return arr


def check_probabilities(P: ArrayLike, name: str = "P") -> NDArray[np.float64]:
    """Check that ``P`` is an (n_samples, n_classes) matrix of probability rows.

    Parameters
    ----------
    P : array-like of shape (n_samples, n_classes)
        One probability distribution over the classes per row.
    name : str, default="P"
        Name of the argument, used in error messages.

    Returns
    -------
    P : ndarray of shape (n_samples, n_classes), dtype float64
        The validated probabilities (a copy only when a conversion was needed).

    Raises
    ------
    ValueError
        If ``P`` is not two-dimensional, has fewer than two columns or no rows, or a
        row holds a non-finite or negative entry or does not sum to 1 within
        ``1e-6``. The message names the first offending row.
    """
    arr = _as_matrix(P, name)
    n, k = arr.shape
    if n == 0:
        msg = f"{name} must hold at least one row; got shape {arr.shape}."
        raise ValueError(msg)
    if k < 2:
        msg = (
            f"{name} must have at least 2 columns (one per class); got shape {arr.shape}. "
            "Pass probabilities over all classes, not only the positive class."
        )
        raise ValueError(msg)
    finite = np.isfinite(arr)
    if not finite.all():
        i = _first_bad_row(~finite)
        msg = (
            f"{name} must hold finite probabilities; row {i} is {arr[i].tolist()!r}. "
            "Remove or repair rows with NaN or infinity."
        )
        raise ValueError(msg)
    negative = arr < 0
    if negative.any():
        i = _first_bad_row(negative)
        msg = (
            f"{name} must hold non-negative probabilities; row {i} is {arr[i].tolist()!r}. "
            "Pass probabilities, not logits or log-probabilities (apply a softmax first)."
        )
        raise ValueError(msg)
    sums = arr.sum(axis=1)
    bad = np.abs(sums - 1.0) > ROW_SUM_TOLERANCE
    if bad.any():
        i = _first_bad_row(bad)
        msg = (
            f"Each row of {name} must sum to 1 (tolerance {ROW_SUM_TOLERANCE:g}); row {i} "
            f"sums to {float(sums[i])!r}. Normalise the rows, e.g. {name} / {name}.sum(axis=1, "
            "keepdims=True)."
        )
        raise ValueError(msg)
    return arr


def check_labels(
    y: ArrayLike,
    n_classes: int,
    name: str = "y",
    *,
    because: str | None = None,
    fix: str | None = None,
) -> NDArray[np.intp]:
    """Check that ``y`` holds integer class indices in ``[0, n_classes)``.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Class indices (the column of ``P`` that holds the true class).
    n_classes : int
        Number of classes (columns of ``P``).
    name : str, default="y"
        Name of the argument, used in error messages.
    because : str, default=None
        Why there are ``n_classes`` classes, for the out-of-range message; ``None``
        means "P has n_classes columns".
    fix : str, default=None
        How to fix an out-of-range label; ``None`` means "Pass P with one column per
        class.".

    Returns
    -------
    y : ndarray of shape (n_samples,), dtype intp
        The validated labels.

    Raises
    ------
    ValueError
        If ``y`` is not one-dimensional, holds non-integer values, or a label lies
        outside ``[0, n_classes)``.
    """
    arr = np.asarray(y)
    if arr.ndim != 1:
        msg = f"{name} must be a 1-D array of class indices; got an array of shape {arr.shape}."
        raise ValueError(msg)
    if arr.dtype.kind in "iu":
        labels = arr.astype(np.intp, copy=False)
    elif arr.dtype.kind == "f":
        integral = np.isfinite(arr) & (np.floor(arr) == arr)
        if not integral.all():
            i = int(np.flatnonzero(~integral)[0])
            msg = (
                f"{name} must hold integer class indices in [0, {n_classes}); {name}[{i}] is "
                f"{arr[i].item()!r}. Map each label to the column of P that holds its "
                "probability."
            )
            raise ValueError(msg)
        labels = arr.astype(np.intp)
    else:
        first = arr[0].item() if arr.size else None
        msg = (
            f"{name} must hold integer class indices in [0, {n_classes}); got dtype "
            f"{arr.dtype} (first value {first!r}). Map each label to the column of P that "
            "holds its probability."
        )
        raise ValueError(msg)
    out = (labels < 0) | (labels >= n_classes)
    if out.any():
        i = int(np.flatnonzero(out)[0])
        because = because or f"P has {n_classes} columns"
        fix = fix or "Pass P with one column per class."
        msg = (
            f"{name} must hold class indices in [0, {n_classes}) because {because}; "
            f"{name}[{i}] is {int(labels[i])}. {fix}"
        )
        raise ValueError(msg)
    return labels


def check_sample_weight(sample_weight: ArrayLike | None, n_samples: int) -> NDArray[np.float64]:
    """Validate ``sample_weight``: finite, non-negative, not all zero.

    Parameters
    ----------
    sample_weight : array-like of shape (n_samples,), float or None
        Weights; ``None`` means all ones and a scalar means that value for every row.
    n_samples : int
        Expected length.

    Returns
    -------
    sample_weight : ndarray of shape (n_samples,), dtype float64

    Raises
    ------
    ValueError
        If the weights have the wrong shape, hold NaN, infinite or negative values, or
        are all zero.
    """
    if sample_weight is None:
        return np.ones(n_samples, dtype=np.float64)
    try:
        arr = np.asarray(sample_weight, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        msg = f"sample_weight must be numbers; could not convert it to floats: {exc}"
        raise ValueError(msg) from exc
    if arr.ndim == 0:
        arr = np.full(n_samples, float(arr))
    if arr.shape != (n_samples,):
        msg = (
            f"sample_weight must have shape ({n_samples},), one weight per row of P; got "
            f"shape {arr.shape}."
        )
        raise ValueError(msg)
    bad = ~np.isfinite(arr) | (arr < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        msg = (
            f"sample_weight must hold finite non-negative numbers; sample_weight[{i}] is "
            f"{arr[i].item()!r}."
        )
        raise ValueError(msg)
    if not arr.any():
        msg = "sample_weight must not be all zero; give at least one row a positive weight."
        raise ValueError(msg)
    placeholder = np.empty((n_samples, 1))
    checked: NDArray[np.float64] = _check_sample_weight(
        arr, placeholder, dtype=np.float64, ensure_non_negative=True
    )
    return checked


def check_cost_matrix(
    cost: ArrayLike, n_labels: int | None = None, n_actions: int | None = None
) -> NDArray[np.float64]:
    """Check a cost matrix: row = true label, column = action.

    Parameters
    ----------
    cost : array-like of shape (n_labels, n_actions)
        ``cost[l, a]`` is the cost of taking action ``a`` when the true label is ``l``.
    n_labels : int, default=None
        Required number of rows, if known (e.g. the number of columns of ``P``).
    n_actions : int, default=None
        Required number of columns, if known.

    Returns
    -------
    cost : ndarray of shape (n_labels, n_actions), dtype float64

    Raises
    ------
    ValueError
        If the matrix is not 2-D, is empty, has the wrong shape, or holds NaN,
        infinite or negative entries.
    """
    try:
        arr = np.asarray(cost, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        msg = (
            "cost must be a matrix of shape (n_labels, n_actions) holding numbers; could not "
            f"convert it to floats: {exc}"
        )
        raise ValueError(msg) from exc
    if arr.ndim != 2 or arr.size == 0:
        msg = (
            "cost must be a non-empty 2-D matrix of shape (n_labels, n_actions) (row = true "
            f"label, column = action); got an array of shape {arr.shape}."
        )
        raise ValueError(msg)
    if n_labels is not None and arr.shape[0] != n_labels:
        msg = (
            f"cost must have one row per label ({n_labels} rows, row = true label); got shape "
            f"{arr.shape}. Transpose it if rows are actions."
        )
        raise ValueError(msg)
    if n_actions is not None and arr.shape[1] != n_actions:
        msg = f"cost must have one column per action ({n_actions} columns); got shape {arr.shape}."
        raise ValueError(msg)
    bad = ~np.isfinite(arr)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        msg = f"cost must hold finite numbers; cost[{i}, {j}] is {float(arr[i, j])!r}."
        raise ValueError(msg)
    neg = arr < 0
    if neg.any():
        i, j = (int(v) for v in np.argwhere(neg)[0])
        msg = (
            f"cost must hold non-negative numbers; cost[{i}, {j}] is {float(arr[i, j])!r}. "
            "Shift the matrix so that the best outcome costs 0."
        )
        raise ValueError(msg)
    return arr


def clipped_log(P: NDArray[np.float64], eps: float) -> NDArray[np.float64]:
    """Return ``ln(max(P, eps))``, so that zero probabilities give finite features."""
    log: NDArray[np.float64] = np.log(np.maximum(P, eps))
    return log


def _reject_sparse(P: Any) -> None:
    if sp.issparse(P):
        msg = (
            "P must be a dense array of probabilities; sparse input is not supported. "
            "Convert it with P.toarray()."
        )
        raise TypeError(msg)


EXTRA_COLUMN_MAPS = "MatrixScaling and DirichletCalibrator(kind='full')"
"""The calibrators that read more input columns than classes (``n_classes`` below the
number of columns of ``P``)."""


def resolve_n_classes(estimator: Any, n_columns: int) -> int:
    """Return the number of classes ``estimator`` fits on ``n_columns`` input columns.

    That is ``estimator.n_classes``, or ``n_columns`` when it is ``None``.

    Raises
    ------
    ValueError
        If ``n_classes`` differs from ``n_columns`` and the estimator needs one input
        column per class, or if it exceeds ``n_columns``.
    """
    n_classes = getattr(estimator, "n_classes", None)
    if n_classes is None or n_classes == n_columns:
        return n_columns
    if not estimator.reads_extra_columns:
        msg = (
            f"{estimator!r} cannot map {n_columns} input columns of P to n_classes={n_classes} "
            f"classes: it needs one input column per class. Only {EXTRA_COLUMN_MAPS} read "
            "extra input columns (such as an unparsed share); use one of those, or leave "
            "n_classes=None."
        )
        raise ValueError(msg)
    if n_classes > n_columns:
        msg = (
            f"{estimator!r} got n_classes={n_classes}, more classes than the {n_columns} "
            f"input columns of P; n_classes must be at most {n_columns} (one column per class "
            "plus extra input columns), or None for one class per column."
        )
        raise ValueError(msg)
    return int(n_classes)


def check_raw_extra_columns(P: NDArray[np.float64], n_classes: int, owner: str) -> None:
    """Check a matrix whose first ``n_classes`` columns only are probability rows.

    The class columns ``P[:, :n_classes]`` must pass :func:`check_probabilities`; the
    columns after them are raw features and must only be finite.

    Raises
    ------
    ValueError
        If the class columns are not probability rows, or an extra column holds NaN or
        infinity; the message names the columns and the first offending row.
    """
    d = P.shape[1]
    check_probabilities(P[:, :n_classes], name="P" if n_classes == d else f"P[:, :{n_classes}]")
    extra = P[:, n_classes:]
    finite = np.isfinite(extra)
    if not finite.all():
        i = _first_bad_row(~finite)
        msg = (
            f"The extra input columns P[:, {n_classes}:] of {owner} must hold finite numbers; "
            f"row {i} has {extra[i].tolist()!r} there. Remove or repair rows with NaN or "
            "infinity (for example, impute a missing feature)."
        )
        raise ValueError(msg)


def validate_fit_data(
    estimator: Any,
    P: ArrayLike,
    y: ArrayLike,
    sample_weight: ArrayLike | None,
    *,
    raw_extra_columns: bool = False,
) -> tuple[NDArray[np.float64], NDArray[np.intp], NDArray[np.float64], int]:
    """Validate ``fit`` input and set ``n_features_in_`` on ``estimator``.

    With ``raw_extra_columns`` false, every row of ``P`` must be a probability row
    (extra input columns included). With it true, only the first ``n_classes`` columns
    must be, and the others only finite (:func:`check_raw_extra_columns`).

    Returns
    -------
    P, y, sample_weight, n_classes
        Probabilities (n, d), labels (n,) in ``[0, k)``, weights (n,) and the number of
        classes ``k`` (``d`` unless the estimator's ``n_classes`` says otherwise).
    """
    if y is None:
        msg = (
            f"{type(estimator).__name__} requires y to be passed, but the target y is None. "
            "Pass the true class index of every row of P."
        )
        raise ValueError(msg)
    _reject_sparse(P)
    if raw_extra_columns:
        P_arr = _as_matrix(P, "P")
        n_classes = resolve_n_classes(estimator, P_arr.shape[1])
        check_raw_extra_columns(P_arr, n_classes, type(estimator).__name__)
    else:
        P_arr = check_probabilities(P, name="P")
    n_labels = _num_samples(y)
    if P_arr.shape[0] != n_labels:
        msg = (
            f"P and y must have the same number of rows; got {P_arr.shape[0]} rows in P and "
            f"{n_labels} labels in y."
        )
        raise ValueError(msg)
    if not raw_extra_columns:
        n_classes = resolve_n_classes(estimator, P_arr.shape[1])
    if n_classes == P_arr.shape[1]:
        labels = check_labels(y, n_classes)
    else:
        labels = check_labels(
            y,
            n_classes,
            because=f"n_classes={n_classes}",
            fix="Pass the class index of every row, or raise n_classes.",
        )
    weights = check_sample_weight(sample_weight, P_arr.shape[0])
    validate_data(estimator, P_arr, reset=True, skip_check_array=True)
    return P_arr, labels, weights, n_classes


def validate_predict_data(
    estimator: Any, P: ArrayLike, *, raw_extra_columns: bool = False
) -> NDArray[np.float64]:
    """Validate prediction input against a fitted estimator.

    Checks that ``estimator`` is fitted and that ``P`` has ``n_features_in_`` columns
    (``n_classes_`` unless the map reads extra input columns), naming both numbers
    otherwise; then checks the values as :func:`validate_fit_data` does with the same
    ``raw_extra_columns``.
    """
    check_is_fitted(estimator)
    _reject_sparse(P)
    shape = np.shape(P)
    n_classes = estimator.n_classes_
    n_features = getattr(estimator, "n_features_in_", n_classes)
    if len(shape) == 2 and shape[1] != n_features:
        owner = type(estimator).__name__
        if n_features == n_classes:
            msg = (
                f"P has {shape[1]} columns but {owner} was fitted on {n_classes} classes "
                f"(n_classes_={n_classes}). Pass probabilities over the same {n_classes} "
                "classes, in the same order, as in fit."
            )
        else:
            msg = (
                f"P has {shape[1]} columns but {owner} was fitted on {n_features} input "
                f"columns (n_features_in_={n_features}) for {n_classes} classes "
                f"(n_classes_={n_classes}). Pass the same {n_features} input columns, in "
                "the same order, as in fit."
            )
        raise ValueError(msg)
    if raw_extra_columns:
        P_arr = _as_matrix(P, "P")
        check_raw_extra_columns(P_arr, n_classes, type(estimator).__name__)
    else:
        P_arr = check_probabilities(P, name="P")
    validate_data(estimator, P_arr, reset=False, skip_check_array=True)
    return P_arr
