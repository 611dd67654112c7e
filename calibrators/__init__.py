"""Calibration maps for multi-class probabilities, and task-aware metrics.

Every calibrator is a scikit-learn estimator whose input ``P`` is an
(n_samples, n_classes) matrix of probabilities (rows sum to 1) and whose labels are
class indices in ``[0, n_classes)``; ``n_classes = P.shape[1]``, so classes absent
from the calibration labels are fine. :class:`MatrixScaling` and
``DirichletCalibrator(kind="full")`` also read extra input columns after the class
columns (such as the share of unparsed samples): set their ``n_classes`` parameter below
``P.shape[1]``; their whole row must still sum to 1. :class:`LogisticCalibrator` reads
raw features (any finite numbers) after its ``n_classes`` probability columns. The
other maps need one input column per class and say so when asked
otherwise (:attr:`BaseCalibrator.reads_extra_columns`). Fitted calibrators serialise to JSON-able
dictionaries with :meth:`~BaseCalibrator.to_dict` and come back with
:func:`from_dict`. Metrics live in :mod:`calibrators.metrics`. The decision kernel
(:func:`expected_costs`, :func:`mbr_actions` with the one tie rule: lowest index,
:func:`minimax_action`) is what every cost-aware decision of ``taskcal_agents`` calls.

Only numpy, scipy and scikit-learn are imported.
"""

from __future__ import annotations

# ``__all__`` (below) is the public surface. The names imported ``as`` themselves stay
# importable from this package outside it (0.1 exported them from here, and
# ``taskcal_agents`` uses several): the names and format version of the serialised maps,
# the identity map, the input checks, and the least-cost and minimax action rules.
from calibrators import metrics as metrics
from calibrators._base import BaseCalibrator as BaseCalibrator
from calibrators._decision import expected_costs, mbr_actions
from calibrators._decision import least_cost_actions as least_cost_actions
from calibrators._decision import minimax_action as minimax_action
from calibrators._dirichlet import DirichletCalibrator
from calibrators._histogram import HistogramBinning
from calibrators._identity import IdentityCalibrator as IdentityCalibrator
from calibrators._isotonic import IsotonicCalibrator
from calibrators._linear import MatrixScaling, VectorScaling
from calibrators._logistic import LogisticCalibrator
from calibrators._serialization import CALIBRATOR_NAMES, from_dict, make_calibrator
from calibrators._serialization import FORMAT_VERSION as FORMAT_VERSION
from calibrators._temperature import TemperatureScaling
from calibrators._validation import check_cost_matrix as check_cost_matrix
from calibrators._validation import check_probabilities as check_probabilities

__all__ = [
    "CALIBRATOR_NAMES",
    "DirichletCalibrator",
    "HistogramBinning",
    "IsotonicCalibrator",
    "LogisticCalibrator",
    "MatrixScaling",
    "TemperatureScaling",
    "VectorScaling",
    "expected_costs",
    "from_dict",
    "make_calibrator",
    "mbr_actions",
]
