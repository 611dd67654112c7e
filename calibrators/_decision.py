"""The decision kernel: expected costs, minimum-Bayes-risk (MBR) and minimax actions.

The one implementation used by the metrics (:func:`calibrators.metrics.tce`, ...), the
runtime ``Decider`` and the offline evaluation of ``taskcal_agents``.

Cost matrices have shape (n_labels, n_actions): ``cost[l, a]`` is the cost of action
``a`` when the true label is ``l`` (row = true label, column = action).

Tie rule: among actions of exactly equal (expected or worst-case) cost, the one with the
lowest index is taken, everywhere (:func:`least_cost_actions` is the only place that
chooses).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from calibrators._validation import check_cost_matrix, check_probabilities

__all__ = ["expected_costs", "least_cost_actions", "mbr_actions", "minimax_action"]


def _check_beliefs(P: ArrayLike, name: str) -> NDArray[np.float64]:
    """Return ``P`` as float64 of shape (n_labels,) or (n_samples, n_labels), checked.

    A matrix with no rows is accepted (an empty batch); every row present must be a
    probability distribution (:func:`~calibrators._validation.check_probabilities`).
    """
    arr = np.asarray(P)
    if arr.ndim == 1:
        row: NDArray[np.float64] = check_probabilities(arr.reshape(1, -1), name=name)[0]
        return row
    if arr.ndim == 2 and arr.shape[0] == 0:
        return np.asarray(arr, dtype=np.float64)
    return check_probabilities(arr, name=name)


def _check_expected_costs(expected_costs: ArrayLike) -> NDArray[np.float64]:
    """Return ``expected_costs`` as a finite float64 matrix with at least one column."""
    try:
        R = np.asarray(expected_costs, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        msg = (
            "expected_costs must be a numeric array of shape (n_samples, n_actions); could not "
            f"convert it to floats: {exc}"
        )
        raise ValueError(msg) from exc
    if R.ndim != 2 or R.shape[1] == 0:
        msg = (
            "expected_costs must be a 2-D array of shape (n_samples, n_actions) with at least "
            f"one action; got an array of shape {R.shape}."
        )
        raise ValueError(msg)
    bad = ~np.isfinite(R)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        msg = f"expected_costs must be finite; expected_costs[{i}, {j}] is {float(R[i, j])!r}."
        raise ValueError(msg)
    return R


def expected_costs(
    P: ArrayLike, cost: ArrayLike, *, check_input: bool = True
) -> NDArray[np.float64]:
    """Return the expected cost of each action, ``sum_l P[..., l] * cost[l, a]``.

    Parameters
    ----------
    P : array-like of shape (n_samples, n_labels) or (n_labels,)
        Probabilities over the labels (each row sums to 1), or one such distribution.
    cost : array-like of shape (n_labels, n_actions)
        Row = true label, column = action.
    check_input : bool, default=True
        Check ``P`` and ``cost``. Pass ``False`` only for inputs already checked (a
        validated task's cost matrix and a normalised belief on a hot path), as with
        scikit-learn's ``check_input``.

    Returns
    -------
    expected_costs : ndarray of shape (n_samples, n_actions) or (n_actions,)
        One row of expected costs per row of ``P`` (a vector for a vector ``P``).

    Raises
    ------
    ValueError
        If ``P`` is not one or more probability distributions, or ``cost`` is not a
        finite, non-negative matrix with one row per column of ``P``; the message names
        the offending argument.

    Examples
    --------
    >>> from calibrators import expected_costs
    >>> cost = [[0, 1, 2], [4, 0, 2], [4, 1, 0]]
    >>> expected_costs([0.5, 0.3, 0.2], cost).tolist()
    [2.0, 0.7, 1.6]
    """
    if check_input:
        Q = _check_beliefs(P, "P")
        C = check_cost_matrix(cost, n_labels=Q.shape[-1])
    else:
        Q, C = np.asarray(P, dtype=np.float64), np.asarray(cost, dtype=np.float64)
    return Q @ C


def least_cost_actions(
    expected_costs: ArrayLike, *, allowed: ArrayLike | None = None, check_input: bool = True
) -> NDArray[np.intp]:
    """Return per row the action of least expected cost (ties: the lowest index).

    This is the one place that chooses an action from costs (the tie rule of the
    package).

    Parameters
    ----------
    expected_costs : array-like of shape (n_samples, n_actions)
        Expected cost of each action per row (see :func:`expected_costs`).
    allowed : array-like of bool of shape (n_samples, n_actions), default=None
        Which actions may be taken per row; ``None`` allows all. A row in which no action
        is allowed keeps its unrestricted choice.
    check_input : bool, default=True
        Check the shapes, the finiteness of ``expected_costs`` and the dtype of
        ``allowed``; pass ``False`` only for inputs already checked.

    Returns
    -------
    actions : ndarray of shape (n_samples,), dtype intp
        The index of the cheapest allowed action per row; on exact ties the lowest index.

    Raises
    ------
    ValueError
        If ``expected_costs`` is not a finite 2-D array with at least one column, or
        ``allowed`` is not a boolean array of the same shape.

    Examples
    --------
    >>> from calibrators import least_cost_actions
    >>> least_cost_actions([[0.3, 0.1, 0.1], [0.3, 0.1, 0.2]]).tolist()
    [1, 1]
    >>> least_cost_actions([[0.3, 0.1, 0.2]], allowed=[[True, False, True]]).tolist()
    [2]
    """
    R = _check_expected_costs(expected_costs) if check_input else np.asarray(expected_costs)
    best: NDArray[np.intp] = np.argmin(R, axis=1).astype(np.intp)
    if allowed is None:
        return best
    ok = np.asarray(allowed)
    if check_input and (ok.shape != R.shape or ok.dtype != np.bool_):
        msg = (
            f"allowed must be a boolean array of the shape of expected_costs {R.shape}; got "
            f"dtype {ok.dtype} and shape {ok.shape}."
        )
        raise ValueError(msg)
    restricted = np.argmin(np.where(ok, R, np.inf), axis=1).astype(np.intp)
    actions: NDArray[np.intp] = np.where(ok.any(axis=1), restricted, best)
    return actions


def mbr_actions(
    P: ArrayLike, cost: ArrayLike, *, allowed: ArrayLike | None = None
) -> NDArray[np.intp]:
    """Minimum-Bayes-risk actions: ``argmin_a sum_l P[i, l] * cost[l, a]`` per row.

    Parameters
    ----------
    P : array-like of shape (n_samples, n_labels)
        Probabilities over the labels; each row sums to 1.
    cost : array-like of shape (n_labels, n_actions)
        Row = true label, column = action.
    allowed : array-like of bool of shape (n_samples, n_actions), default=None
        Which actions may be taken per row (see :func:`least_cost_actions`); ``None``
        allows all.

    Returns
    -------
    actions : ndarray of shape (n_samples,)
        Index of the action with the lowest expected cost; on exact ties the lowest
        index.

    Raises
    ------
    ValueError
        If ``P``, ``cost`` or ``allowed`` is malformed (see :func:`expected_costs`).

    Examples
    --------
    >>> from calibrators.metrics import mbr_actions
    >>> cost = [[0, 1, 2], [4, 0, 2], [4, 1, 0]]
    >>> mbr_actions([[0.9, 0.05, 0.05], [0.5, 0.3, 0.2]], cost)
    array([0, 1])
    """
    Q = check_probabilities(P, name="P")
    return least_cost_actions(expected_costs(Q, cost), allowed=allowed)


def minimax_action(cost: ArrayLike) -> int:
    """Return the action of least worst-case cost, ``argmin_a max_l cost[l, a]``.

    Parameters
    ----------
    cost : array-like of shape (n_labels, n_actions)
        Row = true label, column = action.

    Returns
    -------
    action : int
        The action index; on exact ties the lowest index.

    Raises
    ------
    ValueError
        If ``cost`` is not a finite, non-negative, non-empty matrix.

    Examples
    --------
    >>> from calibrators import minimax_action
    >>> minimax_action([[0, 1, 2], [4, 0, 2], [4, 1, 0]])
    1
    >>> minimax_action([[0, 2, 1], [4, 1, 2]])  # worst cases 4, 2, 2: a tie
    1
    """
    C = check_cost_matrix(cost)
    return int(least_cost_actions(C.max(axis=0)[None, :])[0])
