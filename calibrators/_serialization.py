"""JSON-able dictionaries for calibrators: ``to_dict``, ``from_dict``, ``make_calibrator``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from calibrators._base import FORMAT_VERSION, BaseCalibrator, to_dict
from calibrators._dirichlet import DirichletCalibrator
from calibrators._histogram import HistogramBinning
from calibrators._identity import IdentityCalibrator
from calibrators._isotonic import IsotonicCalibrator
from calibrators._linear import MatrixScaling, VectorScaling
from calibrators._logistic import LogisticCalibrator
from calibrators._temperature import TemperatureScaling

__all__ = ["CALIBRATOR_NAMES", "FORMAT_VERSION", "from_dict", "make_calibrator", "to_dict"]

CALIBRATOR_NAMES: dict[str, type[BaseCalibrator]] = {
    "identity": IdentityCalibrator,
    "temperature": TemperatureScaling,
    "vector": VectorScaling,
    "matrix": MatrixScaling,
    "dirichlet": DirichletCalibrator,
    "logistic": LogisticCalibrator,
    "isotonic": IsotonicCalibrator,
    "histogram": HistogramBinning,
}
"""The registry of calibration maps: short name → class. :func:`make_calibrator` and
:func:`from_dict` accept exactly these, and the test suite and the workflow's defaults are
derived from it: a new map is added here (with its own ``_state_problem``)."""

_TYPES: dict[str, type[BaseCalibrator]] = {cls.__name__: cls for cls in CALIBRATOR_NAMES.values()}


_MAX_STATE_MAGNITUDE = 1e12
"""Bound on any fitted state value: far beyond a fitted map's, far below float overflow."""


def make_calibrator(name: str, **params: Any) -> BaseCalibrator:
    """Create a calibrator from its short name.

    Parameters
    ----------
    name : {"identity", "temperature", "vector", "matrix", "dirichlet", "logistic", \
"isotonic", "histogram"}
        Short name of the calibration map.
    **params
        Keyword parameters of the calibrator's constructor.

    Returns
    -------
    calibrator : BaseCalibrator
        An unfitted calibrator.

    Raises
    ------
    ValueError
        If ``name`` is unknown.
    TypeError
        If a parameter is not accepted by the calibrator.

    Examples
    --------
    >>> from calibrators import make_calibrator
    >>> make_calibrator("dirichlet", reg_lambda=1e-3)
    DirichletCalibrator(reg_lambda=0.001)
    """
    try:
        cls = CALIBRATOR_NAMES[name]
    except (KeyError, TypeError):
        msg = (
            f"make_calibrator got an unknown calibrator name {name!r}; expected one of "
            f"{sorted(CALIBRATOR_NAMES)}."
        )
        raise ValueError(msg) from None
    return cls(**params)


def _decode(value: Any, kind: str) -> Any:
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value)
    if kind == "float_or_none":
        return None if value is None else float(value)
    if kind == "array":
        return np.asarray(value, dtype=np.float64)
    if kind == "array_list":
        return [np.asarray(v, dtype=np.float64) for v in value]
    msg = f"unknown state kind {kind!r}"  # pragma: no cover - programming error
    raise AssertionError(msg)


def from_dict(d: Mapping[str, Any]) -> BaseCalibrator:
    """Rebuild a calibrator from the dictionary written by its ``to_dict``.

    Parameters
    ----------
    d : dict
        ``{"format_version": 1, "type": ..., "params": {...}, "state": {...} or None}``,
        e.g. parsed back from JSON text.

    Returns
    -------
    calibrator : BaseCalibrator
        The calibrator, fitted when ``d["state"]`` is not ``None``; its predictions
        equal those of the calibrator that wrote ``d``.

    Raises
    ------
    ValueError
        If ``d`` is not such a dictionary, has another format version, names an
        unknown type, or its parameters or state do not fit that type: a missing or
        extra attribute, a non-finite value (NaN, infinity), a wrong shape or an
        out-of-range value (the message names the attribute).

    Examples
    --------
    >>> import json
    >>> import numpy as np
    >>> from calibrators import TemperatureScaling, from_dict
    >>> P = np.array([[0.9, 0.1], [0.6, 0.4], [0.2, 0.8]])
    >>> cal = TemperatureScaling().fit(P, [0, 1, 1])
    >>> copy = from_dict(json.loads(json.dumps(cal.to_dict())))
    >>> bool(np.array_equal(copy.predict_proba(P), cal.predict_proba(P)))
    True
    """
    if not isinstance(d, Mapping):
        msg = f"from_dict expects a dict written by to_dict; got {type(d).__name__}."
        raise ValueError(msg)
    version = d.get("format_version")
    if version != FORMAT_VERSION:
        msg = (
            f"from_dict reads calibrators with format_version {FORMAT_VERSION}; got "
            f"format_version {version!r}. Write the calibrator again with this version of "
            "calibrators."
        )
        raise ValueError(msg)
    type_name = d.get("type")
    cls = _TYPES.get(type_name) if isinstance(type_name, str) else None
    if cls is None:
        msg = (
            f"from_dict got an unknown calibrator type {type_name!r}; expected one of "
            f"{sorted(_TYPES)}."
        )
        raise ValueError(msg)
    params = d.get("params") or {}
    if not isinstance(params, Mapping):
        msg = f"from_dict expects 'params' to be a dict for {type_name}; got {params!r}."
        raise ValueError(msg)
    # JSON turns tuples into lists; sequence parameters (reg_grid) come back as tuples.
    params = {key: tuple(val) if isinstance(val, list) else val for key, val in params.items()}
    try:
        calibrator = cls(**params)
        calibrator._validate_params()  # the constraints fit() checks: eps, n_bins, ...
    except TypeError as exc:
        msg = f"from_dict got parameters that {type_name} does not accept: {exc}"
        raise ValueError(msg) from exc
    state = d.get("state")
    if state is None:
        return calibrator
    expected = {"n_classes_", *(name for name, _ in cls._state_attributes)}
    if not isinstance(state, Mapping) or set(state) - {"n_features_in_"} != expected:
        got = sorted(state) if isinstance(state, Mapping) else state
        msg = (
            f"from_dict expects the 'state' of {type_name} to hold exactly {sorted(expected)} "
            f"(and 'n_features_in_' when the map reads extra input columns); got {got!r}."
        )
        raise ValueError(msg)
    n_classes = _count(state["n_classes_"], "n_classes_", cls.__name__, minimum=2)
    n_features = _count(state.get("n_features_in_", n_classes), "n_features_in_", cls.__name__)
    if n_features < n_classes or (n_features != n_classes and not calibrator.reads_extra_columns):
        msg = (
            f"from_dict got a {type_name} state with n_features_in_={n_features} input "
            f"columns for n_classes_={n_classes} classes, but {calibrator!r} needs one input "
            "column per class; the dictionary is inconsistent."
        )
        raise ValueError(msg)
    calibrator.n_classes_ = n_classes
    calibrator.classes_ = np.arange(n_classes)
    calibrator.n_features_in_ = n_features
    for name, kind in cls._state_attributes:
        try:
            value = _decode(state[name], kind)
        except (TypeError, ValueError, OverflowError) as exc:  # int(inf) overflows
            msg = f"from_dict got a {type_name} state {name!r} that is not a {kind}: {exc}"
            raise ValueError(msg) from exc
        values = value if kind == "array_list" else [value]
        if any(v is not None and not np.all(np.isfinite(v)) for v in values):
            msg = (
                f"from_dict got a {type_name} state {name!r} with a non-finite value (NaN or "
                f"infinity): {state[name]!r}; the dictionary is corrupt."
            )
            raise ValueError(msg)
        if any(
            v is not None and np.size(v) and np.max(np.abs(v)) > _MAX_STATE_MAGNITUDE
            for v in values
        ):
            msg = (
                f"from_dict got a {type_name} state {name!r} with a value beyond "
                f"{_MAX_STATE_MAGNITUDE:g} in magnitude: {state[name]!r}; no fitted map has one "
                "(it would overflow at prediction time): the dictionary is corrupt."
            )
            raise ValueError(msg)
        setattr(calibrator, name, value)
    problem = calibrator._state_problem()
    if problem is not None:
        msg = f"from_dict got an inconsistent {type_name} state: {problem}."
        raise ValueError(msg)
    for name in cls._transient_attributes:
        setattr(calibrator, name, None)
    return calibrator


def _count(value: Any, name: str, type_name: str, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        msg = (
            f"from_dict expects {type_name} state {name!r} to be an int >= {minimum}; "
            f"got {value!r}."
        )
        raise ValueError(msg)
    return value
