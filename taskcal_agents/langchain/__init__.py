"""The LangChain front doors: Runnable, chat model, agent middleware, decision model.

With the AutoMode / human-in-the-loop interop (:mod:`taskcal_agents.langchain.interop`).

Names are imported on use: the middleware needs the ``agents`` extra (``langchain``).
"""

from __future__ import annotations

from taskcal_agents._exports import lazy_exports

_EXPORTS: dict[str, str] = {
    "AUTO_MODE_QUESTION_ID": "taskcal_agents.langchain.interop",
    "DECISION_METADATA_KEY": "taskcal_agents.langchain.chat_model",
    "HITL_QUESTION_ID": "taskcal_agents.langchain.interop",
    "HITL_STORE_NAMESPACE": "taskcal_agents.langchain.interop",
    "LabelParser": "taskcal_agents.langchain.decision_model",
    "MODEL_ROUTER_QUESTION_ID": "taskcal_agents.langchain.interop",
    "ReviewGate": "taskcal_agents.langchain.interop",
    "TaskCalibratedChatModel": "taskcal_agents.langchain.chat_model",
    "TaskCalibratedDecisionModel": "taskcal_agents.langchain.decision_model",
    "TaskCalibratedRunnable": "taskcal_agents.langchain.runnable",
    "TaskCalibrationMiddleware": "taskcal_agents.langchain.middleware",
    "TaskCalibrationState": "taskcal_agents.langchain.middleware",
    "block_threshold": "taskcal_agents.langchain.interop",
    "decision_from_message": "taskcal_agents.langchain.middleware",
    "hitl_when": "taskcal_agents.langchain.interop",
    "noul_probability": "taskcal_agents.langchain.decision_model",
    "render_state": "taskcal_agents.langchain.decision_model",
    "risk_classifier": "taskcal_agents.langchain.interop",
    "risk_costs": "taskcal_agents.langchain.interop",
    "split_retry": "taskcal_agents.langchain.runnable",
}

__all__ = [
    "AUTO_MODE_QUESTION_ID",
    "DECISION_METADATA_KEY",
    "HITL_QUESTION_ID",
    "HITL_STORE_NAMESPACE",
    "MODEL_ROUTER_QUESTION_ID",
    "LabelParser",
    "ReviewGate",
    "TaskCalibratedChatModel",
    "TaskCalibratedDecisionModel",
    "TaskCalibratedRunnable",
    "TaskCalibrationMiddleware",
    "TaskCalibrationState",
    "block_threshold",
    "decision_from_message",
    "hitl_when",
    "noul_probability",
    "render_state",
    "risk_classifier",
    "risk_costs",
    "split_retry",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
