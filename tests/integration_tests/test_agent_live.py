"""A real create_agent loop with real tools and TaskCalibrationMiddleware on the live server.

SmolLM2-135M rarely emits a tool call on its own, so the tool-loop test forces tool calls
on user turns (``tool_choice="required"``) through a small outer middleware: the samples
then mix parsed calls and truncated or malformed ones, and the calibrated decision picks
the route. Assertions check the invariants of whichever route was taken.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelCallLimitMiddleware, wrap_model_call
from langchain_core.decisions import Choice
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from taskcal_agents.decision._options import SamplingOptions
from taskcal_agents.decision._presets import tool_decision
from taskcal_agents.langchain._chat_model import DECISION_METADATA_KEY
from taskcal_agents.langchain._decision_model import TaskCalibratedDecisionModel
from taskcal_agents.langchain._middleware import TaskCalibrationMiddleware, decision_from_message

pytestmark = pytest.mark.integration

CALLED: list[str] = []


@tool
def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    CALLED.append(str(city))
    return f"Sunny in {city}."


@wrap_model_call
def require_tools_on_user_turns(request: Any, handler: Any) -> Any:
    """Force tool calls on user turns."""
    if request.messages and isinstance(request.messages[-1], HumanMessage):
        request = request.override(tool_choice="required")
    return handler(request)


def check_run(result: dict[str, Any], n: int) -> str:
    """Check the invariants of one agent run; return the first decision's action."""
    messages = result["messages"]
    decisions = result["taskcal_decisions"]
    assert len(decisions) == 1  # decide_on="user_turn": one decision per user turn
    record = decisions[0]
    assert record["n_samples"] == n
    assert sum(record["calibrated"].values()) == pytest.approx(1.0)
    if not record["fallback"]:
        best = min(record["expected_cost"].values())
        chosen = record["unguarded_action"] or record["action"]  # the MBR action
        assert record["expected_cost"][chosen] == pytest.approx(best)
    first = messages[1]
    assert isinstance(first, AIMessage)
    assert first.response_metadata[DECISION_METADATA_KEY] == record
    assert decision_from_message(first).action == record["action"]  # type: ignore[union-attr]
    if record["action"] == "tool_call":  # the chosen sample's calls (a forced call may be two)
        assert first.tool_calls and {c["name"] for c in first.tool_calls} == {"get_weather"}
        results = messages[2 : 2 + len(first.tool_calls)]
        assert all(isinstance(m, ToolMessage) for m in results)
        assert [m.tool_call_id for m in results] == [c["id"] for c in first.tool_calls]
    else:  # ask or abstain: the decision's message ends the run
        assert first.tool_calls == []
        assert len(messages) == 2
    return str(record["action"])


def test_agent_live_tool_loop(vllm_server: Any) -> None:
    llm = vllm_server.chat_model(max_tokens=48, timeout=300)
    agent = create_agent(
        llm,
        tools=[get_weather],
        middleware=[
            # One model call (the decision): after the tool result the run ends, which
            # keeps this test fast (the answer after a tool result is a plain model call).
            ModelCallLimitMiddleware(run_limit=1, exit_behavior="end"),
            require_tools_on_user_turns,
            TaskCalibrationMiddleware(
                task=tool_decision(tool_names=["get_weather"]), options=SamplingOptions(n_samples=3)
            ),
        ],
    )
    CALLED.clear()
    result = agent.invoke({"messages": [HumanMessage("What's the weather in Paris?")]})
    action = check_run(result, 3)
    print(f"live agent decision: {action}; tool called with {CALLED!r}")
    if action == "tool_call":
        # The real tool ran, or the tool node reported the model's invalid arguments.
        tool_message = result["messages"][2]
        assert CALLED or tool_message.status == "error"
        assert result["messages"][-1].content == "Model call limits exceeded: run limit (1/1)"


def test_agent_live_async_handler_sampling(vllm_server: Any) -> None:
    async def run() -> dict[str, Any]:
        # Close the async HTTP client inside the loop that used it.
        async with httpx.AsyncClient(timeout=300) as client:
            llm = vllm_server.chat_model(max_tokens=32, timeout=300, http_async_client=client)
            middleware = TaskCalibrationMiddleware(
                task=tool_decision(), sampling="handler", options=SamplingOptions(n_samples=3)
            )
            agent = create_agent(
                llm,
                tools=[get_weather],
                middleware=[ModelCallLimitMiddleware(run_limit=3, exit_behavior="end"), middleware],
            )
            return await agent.ainvoke(
                {"messages": [HumanMessage("What's the weather like?")]}, {"max_concurrency": 3}
            )

    action = check_run(asyncio.run(run()), 3)
    print(f"live agent decision (async, handler sampling): {action}")


def test_decision_model_live_choice(vllm_server: Any) -> None:
    classifier = TaskCalibratedDecisionModel(
        chat_model=vllm_server.chat_model(max_tokens=6, timeout=300), n_samples=3
    )
    question = Choice(
        instructions="Which team should handle this request?",
        criteria={"billing": "Payments and invoices.", "technical": "Bugs and errors."},
    )
    response = classifier.invoke(
        {"state": "I was charged twice on my invoice.", "questions": {"team": question}}
    )
    answer = response.choices["team"]
    assert answer.choice in {"billing", "technical"}
    assert sum(answer.probabilities.values()) == pytest.approx(1.0)
    assert answer.confidence == pytest.approx(answer.probabilities[answer.choice])
    assert response.model == vllm_server.model_name
