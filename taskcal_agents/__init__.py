"""taskcal-agents: task-calibrated, cost-aware decisions for LLM agents.

The pipeline, one module per step:

``sampling`` (N completions) → ``parsers`` (g_T: completion → task label) →
``belief`` (empirical p̂ with Dirichlet smoothing) → ``calibrators`` (q = f(p̂)) →
``decision`` (MBR: argmin_a Σ_ℓ q(ℓ)·C[ℓ, a]).

Public names are imported lazily so that ``import taskcal_agents`` stays cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from taskcal_agents.adaptive import AdaptiveSampling
    from taskcal_agents.artefact import CalibratorArtefact
    from taskcal_agents.belief import Belief
    from taskcal_agents.chat_model import TaskCalibratedChatModel
    from taskcal_agents.decision import Decider, Decision, decide_from_messages
    from taskcal_agents.decision_model import TaskCalibratedDecisionModel
    from taskcal_agents.grounding import GroundingContext
    from taskcal_agents.middleware import TaskCalibrationMiddleware
    from taskcal_agents.options import SamplingOptions
    from taskcal_agents.runnable import TaskCalibratedRunnable
    from taskcal_agents.sampling import asample_messages, sample_messages
    from taskcal_agents.task import GroundingSpec, ParserSpec, Task

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "AdaptiveSampling": "taskcal_agents.adaptive",
    "Belief": "taskcal_agents.belief",
    "CalibratorArtefact": "taskcal_agents.artefact",
    "Decider": "taskcal_agents.decision",
    "Decision": "taskcal_agents.decision",
    "GroundingContext": "taskcal_agents.grounding",
    "GroundingSpec": "taskcal_agents.task",
    "ParserSpec": "taskcal_agents.task",
    "SamplingOptions": "taskcal_agents.options",
    "Task": "taskcal_agents.task",
    "TaskCalibratedChatModel": "taskcal_agents.chat_model",
    "TaskCalibratedDecisionModel": "taskcal_agents.decision_model",
    "TaskCalibratedRunnable": "taskcal_agents.runnable",
    "TaskCalibrationMiddleware": "taskcal_agents.middleware",
    "asample_messages": "taskcal_agents.sampling",
    "decide_from_messages": "taskcal_agents.decision",
    "sample_messages": "taskcal_agents.sampling",
}

__all__ = [
    "AdaptiveSampling",
    "Belief",
    "CalibratorArtefact",
    "Decider",
    "Decision",
    "GroundingContext",
    "GroundingSpec",
    "ParserSpec",
    "SamplingOptions",
    "Task",
    "TaskCalibratedChatModel",
    "TaskCalibratedDecisionModel",
    "TaskCalibratedRunnable",
    "TaskCalibrationMiddleware",
    "__version__",
    "asample_messages",
    "decide_from_messages",
    "sample_messages",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    msg = f"module 'taskcal_agents' has no attribute {name!r}"
    raise AttributeError(msg)


def __dir__() -> list[str]:
    return sorted(__all__)
