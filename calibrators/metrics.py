"""Metrics for probabilistic predictions and for the decisions taken from them.

Scoring rules follow scikit-learn's argument order ``(y_true, y_prob, ...)``:
:func:`nll`, :func:`brier`, :func:`ece`, :func:`classwise_ece`. Decision metrics take
the probabilities first, then the labels and the cost matrix: :func:`mbr_actions`,
:func:`expected_cost`, :func:`tce`, :func:`reliability_diagram`. Swapped arguments
raise a ``ValueError`` that says so.

Cost matrices have shape (n_labels, n_actions): ``cost[l, a]`` is the cost of action
``a`` when the true label is ``l`` (row = true label, column = action).

The implementations live in private modules by concern: scoring rules
(``_scoring``), the decision kernel (``_decision``: :func:`mbr_actions`, also exported by
:mod:`calibrators` with :func:`~calibrators.expected_costs` and
:func:`~calibrators.minimax_action`), decision metrics (``_decision_metrics``) and
reliability diagrams (``_reliability``).
"""

from __future__ import annotations

# ``__all__`` (below) is the public surface. The names imported ``as`` themselves stay
# importable from this module outside it (0.1 exported them from here).
from calibrators._decision import mbr_actions as mbr_actions
from calibrators._decision_metrics import expected_cost as expected_cost
from calibrators._decision_metrics import tce
from calibrators._reliability import ReliabilityDiagram as ReliabilityDiagram
from calibrators._reliability import reliability_diagram as reliability_diagram
from calibrators._scoring import brier, classwise_ece, ece, nll

__all__ = [
    "brier",
    "classwise_ece",
    "ece",
    "nll",
    "tce",
]
