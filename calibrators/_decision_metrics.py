"""Decision metrics: realised cost (:func:`expected_cost`) and task calibration error.

Public as :mod:`calibrators.metrics`. They take the probabilities (or actions) first,
then the labels and the cost matrix; actions come from the decision kernel
(:mod:`calibrators._decision`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import KFold

from calibrators._decision import expected_costs, mbr_actions
from calibrators._dirichlet import DirichletCalibrator
from calibrators._scoring import _check_order
from calibrators._validation import check_consistent_length as _check_consistent_length
from calibrators._validation import check_cost_matrix, check_probabilities
from calibrators._validation import check_is_fitted as _check_is_fitted
from calibrators._validation import check_labels as _check_labels
from calibrators._validation import check_sample_weight as _check_sample_weight


def expected_cost(
    P_or_actions: ArrayLike,
    y: ArrayLike,
    cost: ArrayLike,
    *,
    sample_weight: ArrayLike | None = None,
) -> float:
    """Weighted mean realised cost ``cost[y_i, a_i]`` of a set of decisions.

    Parameters
    ----------
    P_or_actions : array-like of shape (n_samples, n_labels) or (n_samples,)
        Either probabilities, in which case the actions are their MBR actions
        (:func:`mbr_actions`), or action indices in ``[0, n_actions)``.
    y : array-like of shape (n_samples,)
        True label indices in ``[0, n_labels)``.
    cost : array-like of shape (n_labels, n_actions)
        Row = true label, column = action.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights.

    Returns
    -------
    cost : float
        ``sum_i w_i * cost[y_i, a_i] / sum_i w_i``.

    Examples
    --------
    >>> from calibrators.metrics import expected_cost
    >>> cost = [[0, 1, 2], [4, 0, 2], [4, 1, 0]]
    >>> expected_cost([0, 1, 2], [0, 0, 2], cost)
    0.3333333333333333
    """
    _check_order(P_or_actions, y, "expected_cost", "P_or_actions, y, cost")
    C = check_cost_matrix(cost)
    n_labels, n_actions = C.shape
    if np.ndim(P_or_actions) == 2:
        actions = mbr_actions(P_or_actions, C)
    else:
        actions = _check_labels(P_or_actions, n_actions, name="actions")
    _check_consistent_length(actions, y, sample_weight)
    labels = _check_labels(y, n_labels, name="y")
    w = _check_sample_weight(sample_weight, labels.size)
    return float(w @ C[labels, actions] / w.sum())


def tce(
    P: ArrayLike,
    y: ArrayLike,
    cost: ArrayLike,
    *,
    calibrator: Any = None,
    method: str = "plugin",
    n_splits: int = 5,
    sample_weight: ArrayLike | None = None,
    random_state: int | None = 0,
) -> float:
    r"""Task calibration error: the excess cost of acting by MBR on ``P`` instead of ``q``.

    Let ``q = f(P)`` be the output of a calibration map ``f`` and ``delta(p)`` the MBR
    action of ``p`` (:func:`mbr_actions`). Two forms are available.

    Plug-in (``method="plugin"``), with ``f`` fitted on ``(P, y)`` (or used as given
    when ``calibrator`` is already fitted) and the expectation taken under ``q``:

    .. math::

        \mathrm{TCE} = \frac{1}{\sum_i w_i} \sum_i w_i \sum_\ell q_{i\ell}
            \left(C[\ell, \delta(P_i)] - C[\ell, \delta(q_i)]\right).

    It is ``>= 0`` by construction, since ``delta(q_i)`` minimises the inner sum, and
    0 when the calibrated and the raw probabilities lead to the same actions. It
    measures how much cost ``q`` believes is lost by trusting ``P``, so it is only
    as good as ``f``.

    Cross-fitted (``method="crossfit"``): the rows are split into ``n_splits``
    shuffled folds; for each fold a fresh clone of ``calibrator`` is fitted on the
    other folds and both actions are scored on the held-out labels:

    .. math::

        \mathrm{TCE}_\mathrm{cf} = \frac{1}{\sum_i w_i} \sum_i w_i
            \left(C[y_i, \delta(P_i)] - C[y_i, \delta(f_{-k(i)}(P_i))]\right).

    It is an unbiased estimate of the cost saved by calibrating (an honest,
    possibly negative, number when the calibrator overfits).

    Parameters
    ----------
    P : array-like of shape (n_samples, n_labels)
        Uncalibrated probabilities; each row sums to 1.
    y : array-like of shape (n_samples,)
        True label indices in ``[0, n_labels)``.
    cost : array-like of shape (n_labels, n_actions)
        Row = true label, column = action.
    calibrator : estimator, default=None
        A calibrator from this package (or any estimator with ``fit(P, y,
        sample_weight)`` and ``predict_proba(P)``); ``None`` means
        ``DirichletCalibrator()``. With ``method="plugin"`` a fitted calibrator is
        used as is and an unfitted one is cloned and fitted on ``(P, y)``.
    method : {"plugin", "crossfit"}, default="plugin"
        Which estimate to return (see above).
    n_splits : int, default=5
        Number of folds for ``method="crossfit"``.
    sample_weight : array-like of shape (n_samples,), default=None
        Sample weights, used both to fit and to average.
    random_state : int or None, default=0
        Seed of the fold shuffling for ``method="crossfit"``.

    Returns
    -------
    tce : float
        The weighted mean excess cost per decision.

    Examples
    --------
    >>> import numpy as np
    >>> from calibrators import TemperatureScaling
    >>> from calibrators.metrics import tce
    >>> rng = np.random.default_rng(0)
    >>> P = rng.dirichlet(np.ones(3), size=300)
    >>> y = np.array([rng.choice(3, p=p) for p in P])
    >>> cost = [[0, 1, 2], [4, 0, 2], [4, 1, 0]]
    >>> tce(P, y, cost, calibrator=TemperatureScaling()) >= 0
    True
    """
    _check_order(P, y, "tce", "P, y, cost")
    Q0 = check_probabilities(P, name="P")
    C = check_cost_matrix(cost, n_labels=Q0.shape[1])
    _check_consistent_length(Q0, y, sample_weight)
    labels = _check_labels(y, Q0.shape[1], name="y")
    w = _check_sample_weight(sample_weight, labels.size)
    if calibrator is None:
        calibrator = DirichletCalibrator()
    raw_actions = mbr_actions(Q0, C)
    if method == "plugin":
        try:
            _check_is_fitted(calibrator)
            fitted = calibrator
        except NotFittedError:
            fitted = clone(calibrator).fit(Q0, labels, sample_weight=w)
        risk = expected_costs(fitted.predict_proba(Q0), C)
        rows = np.arange(labels.size)
        excess = risk[rows, raw_actions] - risk.min(axis=1)
        return float(w @ excess / w.sum())
    if method == "crossfit":
        cal_actions = np.empty_like(raw_actions)
        folds = KFold(n_splits=n_splits, shuffle=True, random_state=random_state)
        for train, test in folds.split(Q0):
            fitted = clone(calibrator).fit(Q0[train], labels[train], sample_weight=w[train])
            cal_actions[test] = mbr_actions(fitted.predict_proba(Q0[test]), C)
        gain = C[labels, raw_actions] - C[labels, cal_actions]
        return float(w @ gain / w.sum())
    msg = f"tce got method={method!r}; expected 'plugin' or 'crossfit'."
    raise ValueError(msg)
