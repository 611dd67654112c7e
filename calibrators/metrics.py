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

from calibrators._decision import mbr_actions
from calibrators._decision_metrics import expected_cost, tce
from calibrators._reliability import ReliabilityDiagram, reliability_diagram
from calibrators._scoring import brier, classwise_ece, ece, nll

__all__ = [
    "ReliabilityDiagram",
    "brier",
    "classwise_ece",
    "ece",
    "expected_cost",
    "mbr_actions",
    "nll",
    "reliability_diagram",
    "tce",
]
