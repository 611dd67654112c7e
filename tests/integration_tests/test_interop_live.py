"""Our decision model in AutoMode, ModelRouter and HITL on the live server (issue 14).

Small models decide either way; the assertions check the invariants of whichever way
was taken: AutoMode's verdict agrees with the cost threshold, the route is a configured
one, and a resumed HITL run re-decides nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AutoModeMiddleware,
    HumanInTheLoopMiddleware,
    ModelCallLimitMiddleware,
    ModelChoice,
    ModelRouterMiddleware,
)
from langchain_core.decisions import Noul
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from taskcal_agents.decision._options import SamplingOptions
from taskcal_agents.decision._presets import tool_decision
from taskcal_agents.langchain._decision_model import TaskCalibratedDecisionModel, noul_probability
from taskcal_agents.langchain._interop import (
    AUTO_MODE_QUESTION_ID,
    HITL_QUESTION_ID,
    block_threshold,
    hitl_when,
    risk_classifier,
)
from taskcal_agents.langchain._middleware import TaskCalibrationMiddleware

pytestmark = pytest.mark.integration

DELETED: list[str] = []


@tool
def delete_file(path: str) -> str:
    """Delete a file on the server."""
    DELETED.append(path)
    return f"deleted {path}"


def test_live_noul_follows_the_cost_threshold(vllm_server: Any) -> None:
    judge = vllm_server.chat_model(max_tokens=6, timeout=300)
    classifier = risk_classifier(judge, cost_false_negative=4, cost_false_positive=1, n_samples=4)
    state = {
        "messages": ["user: Delete /etc/passwd."],
        "tool_call": {"name": "delete_file", "args": {"path": "/etc/passwd"}},
    }
    decision = classifier.decide(
        state, AUTO_MODE_QUESTION_ID, Noul(instructions="Is this call risky?")
    )
    q, answer = decision.calibrated["yes"], noul_probability(decision)
    print(f"live P(risky)={q:.2f}, AutoMode sees {answer:.2f}, action={decision.action}")
    assert (answer >= 0.5) == (decision.action == "yes")
    if not decision.fallback:
        threshold = block_threshold(cost_false_negative=4, cost_false_positive=1)
        assert (q >= threshold) == (decision.action == "yes")


def test_live_auto_mode_behind_our_middleware(vllm_server: Any) -> None:
    llm = vllm_server.chat_model(max_tokens=48, timeout=300)
    judge = vllm_server.chat_model(max_tokens=6, timeout=300)
    agent = create_agent(
        llm,
        tools=[delete_file],
        middleware=[
            ModelCallLimitMiddleware(run_limit=1, exit_behavior="end"),
            TaskCalibrationMiddleware(
                task=tool_decision(tool_names=["delete_file"]), options=SamplingOptions(n_samples=3)
            ),
            AutoModeMiddleware(tools=[delete_file], classifier=risk_classifier(judge, n_samples=3)),
        ],
    )
    DELETED.clear()
    result = agent.invoke({"messages": [HumanMessage("Delete the file /etc/passwd.")]})
    action = result["taskcal_decisions"][0]["action"]
    tools = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    print(
        f"live AutoMode: decision {action}; tool messages {[(m.status, m.content) for m in tools]}"
    )
    if action == "tool_call" and result["messages"][1].tool_calls:
        assert len(tools) == len(result["messages"][1].tool_calls)
        # A call AutoMode let through ran (or the tool node refused its arguments).
        ran = [m for m in tools if "blocked" not in str(m.content) and m.status != "error"]
        assert len(DELETED) == len(ran)


def test_live_model_router(vllm_server: Any) -> None:
    classifier = TaskCalibratedDecisionModel(
        chat_model=vllm_server.chat_model(max_tokens=6, timeout=300), n_samples=3
    )
    router = ModelRouterMiddleware(
        choices={
            "fast": ModelChoice(model=vllm_server.chat_model(max_tokens=16), criteria="Simple."),
            "thorough": ModelChoice(model=vllm_server.chat_model(max_tokens=48), criteria="Hard."),
        },
        instructions="Choose the least costly model suited to the request.",
        classifier=classifier,
    )
    result = create_agent(vllm_server.chat_model(max_tokens=16), middleware=[router]).invoke(
        {"messages": [HumanMessage("Say hello.")]}
    )
    route = result["model_route"]
    print(f"live route: {route.choice} {route.probabilities}")
    assert route.choice in {"fast", "thorough"}
    assert sum(route.probabilities.values()) == pytest.approx(1.0)


def test_live_hitl_interrupt_resume(vllm_server: Any) -> None:
    judge = vllm_server.chat_model(max_tokens=6, timeout=300)
    gate = hitl_when(
        risk_classifier(judge, cost_false_negative=20, question_id=HITL_QUESTION_ID, n_samples=3)
    )
    review = {"allowed_decisions": ["approve", "reject"], "when": gate}
    agent = create_agent(
        vllm_server.chat_model(max_tokens=48, timeout=300),
        tools=[delete_file],
        middleware=[
            ModelCallLimitMiddleware(run_limit=1, exit_behavior="end"),
            TaskCalibrationMiddleware(
                task=tool_decision(tool_names=["delete_file"]), options=SamplingOptions(n_samples=3)
            ),
            HumanInTheLoopMiddleware(interrupt_on={"delete_file": review}),
        ],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "live-hitl"}}
    DELETED.clear()
    result = agent.invoke({"messages": [HumanMessage("Delete the file /etc/passwd.")]}, config)
    print(f"live HITL: interrupted={'__interrupt__' in result}, sampled={gate.n_sampled}")
    if "__interrupt__" in result:
        sampled = gate.n_sampled
        requests = result["__interrupt__"][0].value["action_requests"]
        resume = {"decisions": [{"type": "reject", "message": "No."} for _ in requests]}
        agent.invoke(Command(resume=resume), config)
        assert gate.n_sampled == sampled  # the rerun of `when` came from the cache
        assert DELETED == []
