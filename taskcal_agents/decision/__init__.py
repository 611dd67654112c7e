"""From samples to an action: the task, the belief p̂, the calibrated q and the MBR decision.

A :class:`Task` (labels, parser, cost matrix; the built-in ones: :func:`tool_decision`,
:func:`after_tool_result` (and :func:`after_tool_result_for` a tool task, keeping its trust
policy), :func:`answer_or_abstain`, :func:`rating`,
:func:`multiple_choice`) reads each sample; the :class:`Belief` p̂ (a Dirichlet prior over the
counts) becomes q = f(p̂) under a calibrator (a :class:`CalibratorArtefact`, fitted by
``taskcal fit``), and a :class:`Decider` takes a* = argmin_a Σ q(ℓ)·C[ℓ, a] among the
actions the samples can carry out (:func:`carried_actions`), returning a :class:`Decision`.
:class:`SamplingOptions` say how many samples and how; :class:`AdaptiveSampling` stops once
more samples would hardly change the action. :func:`calibrate_risk` certifies a risk limit
(:class:`RiskSpec`) by Learn-then-Test. :func:`check_artefact` checks an artefact the user
chose against how the front door samples, as ``calibrator="auto"`` checks a shipped one
(:class:`CalibratorMismatchWarning` when it does not fit).

``__all__`` is the public surface. The other names imported below are what the library's
other packages use (the decision protocol the front doors drive, the calibrator in force,
adaptive N's stopping rule, the artefact format): they are not part of the API.
"""

from __future__ import annotations

from taskcal_agents._exports import lazy_exports
from taskcal_agents.decision._adaptive import StopCheck as StopCheck
from taskcal_agents.decision._adaptive import UnfittedPriorWarning
from taskcal_agents.decision._adaptive import check_adaptive as check_adaptive
from taskcal_agents.decision._adaptive import outcome_counts as outcome_counts
from taskcal_agents.decision._adaptive import stop_check_messages as stop_check_messages
from taskcal_agents.decision._artefact import ARTEFACT_FORMAT as ARTEFACT_FORMAT
from taskcal_agents.decision._artefact import ARTEFACT_FORMAT_VERSION as ARTEFACT_FORMAT_VERSION
from taskcal_agents.decision._artefact import (
    CalibratorArtefact,
    CalibratorMismatchWarning,
    check_artefact,
)
from taskcal_agents.decision._artefact import CalibratorLike as CalibratorLike
from taskcal_agents.decision._artefact import ResolvedCalibrator as ResolvedCalibrator
from taskcal_agents.decision._artefact import artefact_belief as artefact_belief
from taskcal_agents.decision._artefact import as_artefact as as_artefact
from taskcal_agents.decision._artefact import recorded_belief as recorded_belief
from taskcal_agents.decision._artefact import resolve_calibrator as resolve_calibrator
from taskcal_agents.decision._belief import DEFAULT_ALPHA as DEFAULT_ALPHA
from taskcal_agents.decision._belief import Belief
from taskcal_agents.decision._decider import (
    Decider,
    Decision,
    carried_actions,
    decide_from_messages,
    grounded_flags,
    ungrounded_flags,
)
from taskcal_agents.decision._decider import item_relevance as item_relevance
from taskcal_agents.decision._decider import raw_inputs as raw_inputs
from taskcal_agents.decision._effects import ToolEffects
from taskcal_agents.decision._effects import effect_resolver as effect_resolver
from taskcal_agents.decision._executability import trusted_flags as trusted_flags
from taskcal_agents.decision._one_pass import ONE_PASS_PSEUDO_SAMPLES as ONE_PASS_PSEUDO_SAMPLES
from taskcal_agents.decision._one_pass import one_pass_belief as one_pass_belief
from taskcal_agents.decision._one_pass import read_one_pass as read_one_pass
from taskcal_agents.decision._options import DEFAULT_N_SAMPLES as DEFAULT_N_SAMPLES
from taskcal_agents.decision._options import DEFAULT_TEMPERATURE as DEFAULT_TEMPERATURE
from taskcal_agents.decision._options import AdaptiveSampling, SamplingOptions
from taskcal_agents.decision._presets import DEFAULT_TOOL_EFFECTS as DEFAULT_TOOL_EFFECTS
from taskcal_agents.decision._presets import (
    EFFECT_AWARE_AFTER_TOOL_RESULT_COST as EFFECT_AWARE_AFTER_TOOL_RESULT_COST,
)
from taskcal_agents.decision._presets import EFFECT_AWARE_COST as EFFECT_AWARE_COST
from taskcal_agents.decision._presets import (
    FLAT_TOOL_DECISION_COST,
    after_tool_result,
    after_tool_result_for,
    answer_or_abstain,
    multiple_choice,
    rating,
    tool_decision,
)
from taskcal_agents.decision._protocol import DecisionInput as DecisionInput
from taskcal_agents.decision._protocol import Draw as Draw
from taskcal_agents.decision._protocol import Drawn as Drawn
from taskcal_agents.decision._protocol import RetryPolicy as RetryPolicy
from taskcal_agents.decision._protocol import decide_in_rounds as decide_in_rounds
from taskcal_agents.decision._protocol import decide_one_pass as decide_one_pass
from taskcal_agents.decision._protocol import draw_in_rounds as draw_in_rounds
from taskcal_agents.decision._record import modal_provenance as modal_provenance
from taskcal_agents.decision._risk_control import RiskControl as RiskControl
from taskcal_agents.decision._risk_control import RiskGuard as RiskGuard
from taskcal_agents.decision._risk_control import RiskNotCertifiedWarning, RiskSpec, calibrate_risk
from taskcal_agents.decision._samples import ground_samples as ground_samples
from taskcal_agents.decision._shipped import AUTO as AUTO
from taskcal_agents.decision._shipped import Auto as Auto
from taskcal_agents.decision._shipped import ServedSettings as ServedSettings
from taskcal_agents.decision._shipped import UncalibratedWarning
from taskcal_agents.decision._shipped import auto_artefact as auto_artefact
from taskcal_agents.decision._shipped import fitted_on as fitted_on
from taskcal_agents.decision._shipped import shipped_artefacts as shipped_artefacts
from taskcal_agents.decision._stopping_prior import FEW_ITEMS as FEW_ITEMS
from taskcal_agents.decision._stopping_prior import StoppingPrior as StoppingPrior
from taskcal_agents.decision._stopping_prior import StoppingPriorWarning
from taskcal_agents.decision._stopping_prior import few_items_message as few_items_message
from taskcal_agents.decision._stopping_prior import fit_stopping_prior as fit_stopping_prior
from taskcal_agents.decision._task import AnswerClusterSpec, GroundingSpec, ParserSpec, Task
from taskcal_agents.decision._terms import call_bar as call_bar

__all__ = [
    "FLAT_TOOL_DECISION_COST",
    "AdaptiveSampling",
    "AnswerClusterSpec",
    "Belief",
    "CalibratorArtefact",
    "CalibratorMismatchWarning",
    "Decider",
    "Decision",
    "GroundingSpec",
    "ParserSpec",
    "RiskNotCertifiedWarning",
    "RiskSpec",
    "SamplingOptions",
    "StoppingPriorWarning",
    "Task",
    "ToolEffects",
    "UncalibratedWarning",
    "UnfittedPriorWarning",
    "after_tool_result",
    "after_tool_result_for",
    "answer_or_abstain",
    "calibrate_risk",
    "carried_actions",
    "check_artefact",
    "decide_from_messages",
    "grounded_flags",
    "multiple_choice",
    "rating",
    "tool_decision",
    "ungrounded_flags",
]

# The other names of the 0.1 module ``taskcal_agents.decision``, with a warning (one release).
__getattr__, __dir__ = lazy_exports(__name__, {})
