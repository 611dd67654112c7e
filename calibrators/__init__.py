"""Calibration maps for multi-class probabilities, and task-aware metrics.

Every calibrator is a scikit-learn estimator whose input ``P`` is an
(n_samples, n_classes) matrix of probabilities (rows sum to 1) and whose labels are
class indices in ``[0, n_classes)``; ``n_classes = P.shape[1]``, so classes absent
from the calibration labels are fine. :class:`MatrixScaling` and
``DirichletCalibrator(kind="full")`` also read extra input columns after the class
columns (such as the share of unparsed samples): set their ``n_classes`` parameter below
``P.shape[1]``; the other maps need one input column per class and say so when asked
otherwise (:attr:`BaseCalibrator.reads_extra_columns`). Fitted calibrators serialise to JSON-able
dictionaries with :meth:`~BaseCalibrator.to_dict` and come back with
:func:`from_dict`. Metrics live in :mod:`calibrators.metrics`. The decision kernel
(:func:`expected_costs`, :func:`mbr_actions` with the one tie rule: lowest index,
:func:`minimax_action`) is what every cost-aware decision of ``taskcal_agents`` calls.

Only numpy, scipy and scikit-learn are imported.
"""

from __future__ import annotations

from calibrators import metrics
from calibrators._base import BaseCalibrator
from calibrators._decision import (
    expected_costs,
    least_cost_actions,
    mbr_actions,
    minimax_action,
)
from calibrators._dirichlet import DirichletCalibrator
from calibrators._histogram import HistogramBinning
from calibrators._identity import IdentityCalibrator
from calibrators._isotonic import IsotonicCalibrator
from calibrators._linear import MatrixScaling, VectorScaling
from calibrators._serialization import (
    CALIBRATOR_NAMES,
    FORMAT_VERSION,
    from_dict,
    make_calibrator,
)
from calibrators._temperature import TemperatureScaling
from calibrators._validation import check_cost_matrix, check_probabilities

__all__ = [
    "CALIBRATOR_NAMES",
    "FORMAT_VERSION",
    "BaseCalibrator",
    "DirichletCalibrator",
    "HistogramBinning",
    "IdentityCalibrator",
    "IsotonicCalibrator",
    "MatrixScaling",
    "TemperatureScaling",
    "VectorScaling",
    "check_cost_matrix",
    "check_probabilities",
    "expected_costs",
    "from_dict",
    "least_cost_actions",
    "make_calibrator",
    "mbr_actions",
    "metrics",
    "minimax_action",
]
