"""The base class shared by every calibration map."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin

from calibrators._scoring import nll
from calibrators._validation import (
    Integral,
    Interval,
    Real,
    fit_context,
    single_blas_thread,
    validate_fit_data,
    validate_predict_data,
)

__all__ = ["BaseCalibrator"]

EPS_CONSTRAINT = Interval(Real, 0.0, 1.0, closed="neither")
"""Constraint of the ``eps`` parameter: the floor applied to probabilities before ``ln``."""

N_CLASSES_CONSTRAINT: list[Any] = [Interval(Integral, 2, None, closed="left"), None]
"""Constraint of the ``n_classes`` parameter every calibrator takes."""


FORMAT_VERSION = 1
"""Version of the dictionary layout written by ``to_dict``."""


class BaseCalibrator(ClassifierMixin, BaseEstimator):  # type: ignore[misc]  # sklearn: untyped
    """Base class of the calibration maps: ``fit``, ``predict_proba``, ``predict``.

    Subclasses implement ``_fit(P, y, sample_weight, n_classes)`` and
    ``_predict_proba(P)`` on validated arrays, and list their fitted attributes in
    ``_state_attributes`` (name, kind) so that ``to_dict`` can serialise them.
    The input of every method is a matrix ``P`` of shape (n_samples, n_features)
    holding probabilities (rows sum to 1); ``y`` holds class indices in
    ``[0, n_classes)``. Every calibrator takes an ``n_classes`` parameter: ``None``
    means one class per input column (``n_features = n_classes``, the usual case).
    Maps whose :attr:`reads_extra_columns` is true (matrix scaling and full Dirichlet
    calibration) also accept a smaller ``n_classes``: they read the extra columns (for
    example the share of unparsed samples) as inputs only.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {}
    _state_attributes: ClassVar[tuple[tuple[str, str], ...]] = ()
    _transient_attributes: ClassVar[tuple[str, ...]] = ()
    """Fitted attributes that ``to_dict`` does not keep (``None`` after ``from_dict``)."""

    def _state_problem(self) -> str | None:
        """Return what is wrong with a state read back by ``from_dict``, or ``None``.

        Each map with fitted state checks its own shapes and ranges (against
        ``n_classes_`` and ``n_features_in_``); one without state has nothing to check.

        Raises
        ------
        NotImplementedError
            If the map has fitted state but no check of its own.
        """
        if self._state_attributes:
            msg = (
                f"{type(self).__name__} lists fitted state in _state_attributes but does not "
                "define _state_problem; define it so that from_dict can check a stored state."
            )
            raise NotImplementedError(msg)
        return None

    @property
    def reads_extra_columns(self) -> bool:
        """Whether the map can read more input columns than it has classes.

        Returns
        -------
        bool
            ``True`` for :class:`MatrixScaling` and ``DirichletCalibrator(kind="full")``,
            whose weight matrix may have shape (n_classes, n_features); ``False`` for the
            maps that need one input column per class.
        """
        return False

    @property
    def reads_raw_columns(self) -> bool:
        """Whether the columns after the class columns may be any finite numbers.

        Returns
        -------
        bool
            ``True`` for :class:`LogisticCalibrator`, whose class columns alone must be
            probability rows; ``False`` for the maps that need whole rows summing to 1.
        """
        return False

    @fit_context(prefer_skip_nested_validation=True)
    def fit(
        self, P: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None
    ) -> BaseCalibrator:
        """Fit the calibration map.

        Parameters
        ----------
        P : array-like of shape (n_samples, n_features)
            Predicted probabilities of the uncalibrated source; each row sums to 1.
            The number of classes is the ``n_classes`` parameter, or ``P.shape[1]``
            when it is ``None``; a class that never occurs in ``y`` is fine.
        y : array-like of shape (n_samples,)
            True class indices in ``[0, n_classes)``.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative sample weights. ``None`` weighs every row equally. A weight of
            2 is equivalent to duplicating the row.

        Returns
        -------
        self : object
            The fitted calibrator.
        """
        P_arr, labels, weights, n_classes = validate_fit_data(
            self, P, y, sample_weight, raw_extra_columns=self.reads_raw_columns
        )
        with single_blas_thread():
            self._fit(P_arr, labels, weights, n_classes)
        self.n_classes_ = n_classes
        self.classes_ = np.arange(n_classes)
        return self

    def predict_proba(self, P: ArrayLike) -> NDArray[np.float64]:
        """Return calibrated probabilities.

        Parameters
        ----------
        P : array-like of shape (n_samples, n_features)
            Uncalibrated probabilities with the ``n_features_in_`` columns seen in
            ``fit`` (one per class, plus any extra input columns).

        Returns
        -------
        Q : ndarray of shape (n_samples, n_classes)
            Calibrated probabilities; each row sums to 1.
        """
        P_arr = validate_predict_data(self, P, raw_extra_columns=self.reads_raw_columns)
        return self._predict_proba(P_arr)

    def predict(self, P: ArrayLike) -> NDArray[np.intp]:
        """Return the most probable class after calibration.

        Parameters
        ----------
        P : array-like of shape (n_samples, n_features)
            Uncalibrated probabilities.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Index of the largest calibrated probability (lowest index on ties).
        """
        Q = self.predict_proba(P)
        predicted: NDArray[np.intp] = self.classes_[np.argmax(Q, axis=1)]
        return predicted

    def score(self, P: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
        """Return the negative mean log-loss of the calibrated probabilities.

        Higher is better, so ``GridSearchCV`` and ``cross_val_score`` select the
        calibrator with the lowest held-out negative log-likelihood. This replaces the
        accuracy score of ``ClassifierMixin``.

        Parameters
        ----------
        P : array-like of shape (n_samples, n_features)
            Uncalibrated probabilities.
        y : array-like of shape (n_samples,)
            True class indices.
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights.

        Returns
        -------
        score : float
            ``-nll(y, predict_proba(P))``.
        """
        return -nll(y, self.predict_proba(P), sample_weight=sample_weight)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able description of the calibrator.

        Returns
        -------
        d : dict
            ``{"format_version": 1, "type": <class name>, "params": {...},
            "state": {...} or None}``; ``calibrators.from_dict(d)`` rebuilds the
            calibrator (fitted if it was fitted).
        """
        return to_dict(self)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.classifier_tags.poor_score = True
        return tags

    # Subclass hooks -----------------------------------------------------------

    def _fit(
        self,
        P: NDArray[np.float64],
        y: NDArray[np.intp],
        sample_weight: NDArray[np.float64],
        n_classes: int,
    ) -> None:
        raise NotImplementedError

    def _predict_proba(self, P: NDArray[np.float64]) -> NDArray[np.float64]:
        raise NotImplementedError


def softmax(Z: NDArray[np.float64]) -> NDArray[np.float64]:
    """Row-wise softmax of a logit matrix (modified in place and returned)."""
    Z -= Z.max(axis=1, keepdims=True)
    np.exp(Z, out=Z)
    Z /= Z.sum(axis=1, keepdims=True)
    return Z


def normalise_rows(Q: NDArray[np.float64]) -> NDArray[np.float64]:
    """Divide each row by its sum; rows summing to 0 become uniform (in place)."""
    sums = Q.sum(axis=1, keepdims=True)
    empty = sums[:, 0] <= 0
    if empty.any():
        Q[empty] = 1.0
        sums[empty] = Q.shape[1]
    Q /= sums
    return Q


def _jsonable(value: Any, owner: str, name: str) -> Any:
    """Convert a parameter value to JSON types (numbers, strings, None, lists)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, owner, name) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    msg = (
        f"{owner}.to_dict cannot serialise the parameter {name}={value!r}; only numbers, "
        "strings, None and lists are JSON-able. Set it to such a value (e.g. an int for cv)."
    )
    raise ValueError(msg)


def _encode(value: Any, kind: str) -> Any:
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value)
    if kind == "float_or_none":
        return None if value is None else float(value)
    if kind == "array":
        return np.asarray(value, dtype=np.float64).tolist()
    if kind == "array_list":
        return [np.asarray(v, dtype=np.float64).tolist() for v in value]
    msg = f"unknown state kind {kind!r}"  # pragma: no cover - programming error
    raise AssertionError(msg)


def to_dict(calibrator: BaseCalibrator) -> dict[str, Any]:
    """Return the JSON-able dictionary of a calibrator (see ``BaseCalibrator.to_dict``)."""
    owner = type(calibrator).__name__
    params = {
        key: _jsonable(val, owner, key) for key, val in calibrator.get_params(deep=False).items()
    }
    state: dict[str, Any] | None = None
    if hasattr(calibrator, "n_classes_"):
        state = {"n_classes_": int(calibrator.n_classes_)}
        n_features = int(getattr(calibrator, "n_features_in_", calibrator.n_classes_))
        if n_features != state["n_classes_"]:
            # Only maps reading extra input columns write it, so older readers refuse
            # such a calibrator instead of feeding it the wrong number of columns.
            state["n_features_in_"] = n_features
        for name, kind in calibrator._state_attributes:
            state[name] = _encode(getattr(calibrator, name), kind)
    return {
        "format_version": FORMAT_VERSION,
        "type": type(calibrator).__name__,
        "params": params,
        "state": state,
    }
