"""The LangChain front doors, the LangGraph node, the reply guard and the interop.

The front doors: :class:`TaskCalibratedRunnable` (chat input → :class:`Decision
<taskcal_agents.decision.Decision>`), :class:`TaskCalibratedChatModel` (a chat model whose
reply is the decision), :class:`TaskCalibrationMiddleware` (``create_agent``'s model call,
decided) and :class:`TaskCalibratedDecisionModel` (``langchain_core.decisions``).
:class:`ToolReplyMiddleware` vets the model's reply after a tool result;
:func:`decision_node` decides in a LangGraph ``StateGraph`` (:class:`DecisionState`,
:func:`route_on_decision`). The interop with LangChain's decision-model middlewares:
:func:`risk_classifier` and :func:`block_threshold` for ``AutoModeMiddleware``,
:data:`MODEL_ROUTER_QUESTION_ID` for ``ModelRouterMiddleware``, :func:`hitl_when` and
:data:`HITL_QUESTION_ID` for ``HumanInTheLoopMiddleware``.

Names are imported on use (``_EXPORTS``): the middlewares need the ``agents`` extra
(``langchain``), the node ``langgraph``. Every door decides through one
:class:`DecisionSession` (built from its parameters, rebuilt for each copy), whose
:meth:`~DecisionSession.begin` gives a :class:`PendingDecision`. ``__all__`` is the public
surface.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from taskcal_agents._exports import lazy_exports

if TYPE_CHECKING:
    from taskcal_agents.langchain._chat_model import TaskCalibratedChatModel
    from taskcal_agents.langchain._decision_model import TaskCalibratedDecisionModel
    from taskcal_agents.langchain._graph_node import (
        DecisionState,
        decision_node,
        route_on_decision,
    )
    from taskcal_agents.langchain._interop import (
        HITL_QUESTION_ID,
        MODEL_ROUTER_QUESTION_ID,
        block_threshold,
        hitl_when,
        risk_classifier,
    )
    from taskcal_agents.langchain._middleware import TaskCalibrationMiddleware
    from taskcal_agents.langchain._reply_guard import ToolReplyMiddleware
    from taskcal_agents.langchain._runnable import TaskCalibratedRunnable
    from taskcal_agents.langchain._session import DecisionSession, PendingDecision
    from taskcal_agents.langchain._trust_gate import trust_gate

_EXPORTS: dict[str, str] = {
    "DecisionSession": "taskcal_agents.langchain._session",
    "DecisionState": "taskcal_agents.langchain._graph_node",
    "HITL_QUESTION_ID": "taskcal_agents.langchain._interop",
    "MODEL_ROUTER_QUESTION_ID": "taskcal_agents.langchain._interop",
    "PendingDecision": "taskcal_agents.langchain._session",
    "TaskCalibratedChatModel": "taskcal_agents.langchain._chat_model",
    "TaskCalibratedDecisionModel": "taskcal_agents.langchain._decision_model",
    "TaskCalibratedRunnable": "taskcal_agents.langchain._runnable",
    "TaskCalibrationMiddleware": "taskcal_agents.langchain._middleware",
    "ToolReplyMiddleware": "taskcal_agents.langchain._reply_guard",
    "block_threshold": "taskcal_agents.langchain._interop",
    "decision_node": "taskcal_agents.langchain._graph_node",
    "hitl_when": "taskcal_agents.langchain._interop",
    "risk_classifier": "taskcal_agents.langchain._interop",
    "route_on_decision": "taskcal_agents.langchain._graph_node",
    "trust_gate": "taskcal_agents.langchain._trust_gate",
}

__all__ = [
    "HITL_QUESTION_ID",
    "MODEL_ROUTER_QUESTION_ID",
    "DecisionSession",
    "DecisionState",
    "PendingDecision",
    "TaskCalibratedChatModel",
    "TaskCalibratedDecisionModel",
    "TaskCalibratedRunnable",
    "TaskCalibrationMiddleware",
    "ToolReplyMiddleware",
    "block_threshold",
    "decision_node",
    "hitl_when",
    "risk_classifier",
    "route_on_decision",
    "trust_gate",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
