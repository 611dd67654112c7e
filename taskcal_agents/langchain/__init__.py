"""The LangChain front doors: Runnable, chat model, agent middleware, decision model.

With the AutoMode / human-in-the-loop interop (:mod:`taskcal_agents.langchain.interop`).
The package exports the four front doors and the interop's entry points; every other name
is public in its module (``runnable``, ``chat_model``, ``middleware``, ``decision_model``,
``interop``).

Names are imported on use: the middleware needs the ``agents`` extra (``langchain``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taskcal_agents._exports import lazy_exports

if TYPE_CHECKING:
    from taskcal_agents.langchain.chat_model import TaskCalibratedChatModel
    from taskcal_agents.langchain.decision_model import TaskCalibratedDecisionModel
    from taskcal_agents.langchain.interop import (
        HITL_QUESTION_ID,
        block_threshold,
        hitl_when,
        risk_classifier,
    )
    from taskcal_agents.langchain.middleware import TaskCalibrationMiddleware
    from taskcal_agents.langchain.runnable import TaskCalibratedRunnable

_EXPORTS: dict[str, str] = {
    "HITL_QUESTION_ID": "taskcal_agents.langchain.interop",
    "TaskCalibratedChatModel": "taskcal_agents.langchain.chat_model",
    "TaskCalibratedDecisionModel": "taskcal_agents.langchain.decision_model",
    "TaskCalibratedRunnable": "taskcal_agents.langchain.runnable",
    "TaskCalibrationMiddleware": "taskcal_agents.langchain.middleware",
    "block_threshold": "taskcal_agents.langchain.interop",
    "hitl_when": "taskcal_agents.langchain.interop",
    "risk_classifier": "taskcal_agents.langchain.interop",
}

__all__ = [
    "HITL_QUESTION_ID",
    "TaskCalibratedChatModel",
    "TaskCalibratedDecisionModel",
    "TaskCalibratedRunnable",
    "TaskCalibrationMiddleware",
    "block_threshold",
    "hitl_when",
    "risk_classifier",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
