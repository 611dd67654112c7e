"""From samples to an action: the task, the belief p̂, the calibrated q and the MBR decision.

``task`` (labels, parser, cost matrix), ``presets`` (the built-in tasks), ``belief``
(p̂ with a Dirichlet prior), ``options`` (how many samples and how), ``decider`` (q = f(p̂)
and a* = argmin_a Σ q(ℓ)·C[ℓ, a]), ``risk_control`` (certified risk limits), ``adaptive``
(stop sampling when the decision is settled) with its fitted ``stopping_prior``,
``artefact`` (the fitted calibrator file), ``protocol`` (the rounds of one decision, which
every front door drives).

The package exports what a user of a front door or the workflow needs; every other name is
public in its module (the protocol's ``decide_in_rounds``, ``Draw`` and ``RetryPolicy``
in ``protocol``, the risk guard in ``risk_control``, for instance).
"""

from __future__ import annotations

from typing import Any

from taskcal_agents._compat import moved_name
from taskcal_agents.decision.artefact import CalibratorArtefact
from taskcal_agents.decision.belief import Belief
from taskcal_agents.decision.decider import Decider, Decision, decide_from_messages
from taskcal_agents.decision.options import AdaptiveSampling, SamplingOptions
from taskcal_agents.decision.presets import (
    after_tool_result,
    answer_or_abstain,
    multiple_choice,
    rating,
    tool_decision,
)
from taskcal_agents.decision.risk_control import RiskSpec, calibrate_risk
from taskcal_agents.decision.task import AnswerClusterSpec, GroundingSpec, ParserSpec, Task

__all__ = [
    "AdaptiveSampling",
    "AnswerClusterSpec",
    "Belief",
    "CalibratorArtefact",
    "Decider",
    "Decision",
    "GroundingSpec",
    "ParserSpec",
    "RiskSpec",
    "SamplingOptions",
    "Task",
    "after_tool_result",
    "answer_or_abstain",
    "calibrate_risk",
    "decide_from_messages",
    "multiple_choice",
    "rating",
    "tool_decision",
]


def __getattr__(name: str) -> Any:
    """Names of the 0.1 module ``taskcal_agents.decision``, with a warning (one release)."""
    return moved_name(__name__, name)
