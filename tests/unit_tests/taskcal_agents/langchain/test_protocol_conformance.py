"""Every front door takes the same decision on the same recorded replies.

The Runnable, the chat model over it, the agent middleware (sampling the model itself or
through the agent's handler), the LangGraph node and the decision model all drive one
decision protocol
(:mod:`taskcal_agents.decision._protocol`). Here each of them, sync and async, decides on
the same scripted replies of a chat model — plain, with adaptive N stopping early and
going on to N, after failed draws that are retried, and with the fallback once the
retries run out — and the decisions must be identical: the decision record
(``Decision.to_metadata()``), the message's text and its tool calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest, ModelResponse
from langchain_core.decisions import Choice
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.runtime import Runtime

from taskcal_agents.decision import AdaptiveSampling, Decision, SamplingOptions
from taskcal_agents.decision._presets import tool_decision
from taskcal_agents.decision._stopping_prior import StoppingPrior
from taskcal_agents.decision._task import GroundingSpec, Task
from taskcal_agents.langchain import (
    TaskCalibratedChatModel,
    TaskCalibratedDecisionModel,
    TaskCalibratedRunnable,
    TaskCalibrationMiddleware,
)
from taskcal_agents.langchain._chat_model import DECISION_METADATA_KEY
from taskcal_agents.langchain._graph_node import DecisionState, decision_node, route_on_decision
from tests.unit_tests.taskcal_agents.helpers.chat_fakes import RecordingChatModel


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"Sunny in {city}."


USER = "What's the weather in Paris?"
CALL = AIMessage(
    content="", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"}]
)
ASK = "Which city do you mean?"
DOWN = ConnectionError("server down")
SETTLED = AdaptiveSampling(
    epsilon=0.05,
    prior=StoppingPrior(
        tool_decision(grounding=GroundingSpec()).outcomes, (0.05,) * 4, n_items=200
    ),
)
"""Adaptive N under a prior of items whose samples agree: four agreeing calls settle it."""


@dataclass(frozen=True)
class Scenario:
    """Replies in the order the model gives them, and the options of every front door."""

    name: str
    replies: tuple[Any, ...]
    options: dict[str, Any]


SCENARIOS = [
    Scenario("plain", (CALL, CALL, ASK, CALL, CALL, ASK, CALL, CALL), {"n_samples": 8}),
    # The first round of 4 agrees: adaptive N stops there.
    Scenario("adaptive_stops", (CALL,) * 16, {"n_samples": 16, "adaptive": SETTLED}),
    # A split first round: adaptive N goes on drawing.
    Scenario(
        "adaptive_goes_on",
        (CALL, ASK, CALL, ASK) + (CALL, CALL, ASK, ASK) + (CALL,) * 8,
        {"n_samples": 16, "adaptive": SETTLED},
    ),
    # The first draw fails; its retry gets the replies. (One failed call fails a draw, and
    # a front door may stop the draw's other calls then: the replies after it are alike.)
    Scenario("retried", (DOWN,) + (CALL,) * 8, {"n_samples": 4, "max_retries": 1}),
    # Every draw fails: after the retry, the task's fallback.
    Scenario("fallback", (DOWN,) * 64, {"n_samples": 4, "max_retries": 1, "on_error": "fallback"}),
]


def _model(scenario: Scenario) -> RecordingChatModel:
    # RecordingChatModel cycles through its replies: pad so that no front door wraps round.
    replies = list(scenario.replies) + [scenario.replies[-1]] * 64
    return RecordingChatModel(responses=replies)


def _view(record: dict[str, Any], message: AIMessage | None) -> dict[str, Any]:
    """What must agree: the decision record and the message's text and tool calls."""
    calls = [] if message is None else [(c["name"], c["args"]) for c in message.tool_calls]
    text = None if message is None else message.content
    return {**record, "decision_id": None, "message": (text, calls)}


def _run(coro_or_value: Any, mode: str) -> Any:
    return asyncio.run(coro_or_value) if mode == "async" else coro_or_value


# ------------------------------------------------------------------ the front doors


def _runnable(scenario: Scenario, task: Task, messages: list[BaseMessage], mode: str) -> Any:
    model = _model(scenario).bind_tools([get_weather])
    runnable = TaskCalibratedRunnable(model, task, **scenario.options)
    call = runnable.ainvoke(messages) if mode == "async" else runnable.invoke(messages)
    decision: Decision = _run(call, mode)
    return _view(decision.to_metadata(), decision.message)


def _chat_model(scenario: Scenario, task: Task, messages: list[BaseMessage], mode: str) -> Any:
    model = _model(scenario).bind_tools([get_weather])
    chat = TaskCalibratedChatModel(model=model, task=task, **scenario.options)
    call = chat.ainvoke(messages) if mode == "async" else chat.invoke(messages)
    message: AIMessage = _run(call, mode)
    return _view(message.response_metadata[DECISION_METADATA_KEY], message)


def _middleware(sampling: str) -> Callable[..., Any]:
    def door(scenario: Scenario, task: Task, messages: list[BaseMessage], mode: str) -> Any:
        model = _model(scenario)
        request = ModelRequest(
            model=model,
            messages=messages,
            tools=[get_weather],
            state={"messages": messages},
            runtime=Runtime(),
        )
        bound = model.bind_tools([get_weather])

        def handler(req: ModelRequest[Any]) -> ModelResponse[Any]:
            return ModelResponse(result=[bound.invoke(req.messages)])

        async def ahandler(req: ModelRequest[Any]) -> ModelResponse[Any]:
            return ModelResponse(result=[await bound.ainvoke(req.messages)])

        mw = TaskCalibrationMiddleware(
            task=task, sampling=sampling, options=SamplingOptions(**scenario.options)
        )
        if mode == "async":
            result = asyncio.run(mw.awrap_model_call(request, ahandler))
        else:
            result = mw.wrap_model_call(request, handler)
        assert isinstance(result, ExtendedModelResponse)
        [message] = result.model_response.result
        assert isinstance(message, AIMessage)
        return _view(message.response_metadata[DECISION_METADATA_KEY], message)

    return door


def _graph_node(scenario: Scenario, task: Task, messages: list[BaseMessage], mode: str) -> Any:
    """The LangGraph node in a ``StateGraph`` that routes on its decision."""
    model = _model(scenario).bind_tools([get_weather])
    graph = StateGraph(DecisionState)
    graph.add_node(
        "decide", decision_node(model, task, options=SamplingOptions(**scenario.options))
    )
    graph.add_node("tools", ToolNode([get_weather]))
    graph.add_edge(START, "decide")
    graph.add_conditional_edges(
        "decide", route_on_decision,
        {"tool_call": "tools", "confirm": END, "request_for_info": END, "cannot_answer": END},
    )  # fmt: skip
    graph.add_edge("tools", END)
    app = graph.compile()
    state = {"messages": messages, "taskcal_decisions": []}
    result = _run(app.ainvoke(state) if mode == "async" else app.invoke(state), mode)
    [record] = result["taskcal_decisions"]
    reply = result["messages"][len(messages)]
    assert isinstance(reply, AIMessage)
    if record["action"] == "tool_call":  # routed to the tools: their result follows
        assert result["messages"][-1].content == "Sunny in Paris."
    return _view(record, reply)


TOOL_DOORS: dict[str, Callable[..., Any]] = {
    "runnable": _runnable,
    "chat_model": _chat_model,
    "middleware_model": _middleware("model"),
    "middleware_handler": _middleware("handler"),
    "graph_node": _graph_node,
}
MODES = ("sync", "async")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_the_front_doors_take_the_same_tool_decision(scenario: Scenario) -> None:
    # The default task (relevance features on); adaptive N refuses them: the plain grounding.
    # The weather lookup is a read (its bar 0.5), so agreeing samples settle it early.
    adaptive = scenario.name.startswith("adaptive")
    read = {"get_weather": "read"}
    task = (
        tool_decision(grounding=GroundingSpec(), tool_effects=read)
        if adaptive
        else tool_decision(tool_effects=read)
    )
    messages: list[BaseMessage] = [HumanMessage(USER)]
    views = {
        (door, mode): run(scenario, task, messages, mode)
        for door, run in TOOL_DOORS.items()
        for mode in MODES
    }
    assert len(views) == len(TOOL_DOORS) * len(MODES) == 10
    reference = views[("runnable", "sync")]
    for key, view in views.items():
        assert view == reference, f"{key} differs from the sync Runnable"
    if scenario.name == "adaptive_stops":
        assert reference["stopped_early"] is True and reference["n_samples"] == 4
    if scenario.name == "adaptive_goes_on":
        assert reference["n_samples"] > 4
    if scenario.name == "retried":
        assert reference["fallback"] is False and reference["n_samples"] == 4
    if scenario.name in ("fallback", "later_round_fails"):
        assert reference["fallback"] is True and reference["n_samples"] == 0
        assert reference["fallback_reason"] == (
            "model error after 2 attempt(s): ConnectionError: server down"
        )


TEAM = Choice(
    instructions="Which team should handle this request?",
    criteria={"billing": "Payment issues.", "technical": "Bugs.", "sales": "Pricing."},
)
CHOICE_SCENARIOS = [
    Scenario("plain", ("technical", "technical", "billing", "technical"), {"n_samples": 4}),
    Scenario(
        "adaptive_stops",
        ("technical",) * 16,
        {
            "n_samples": 16,
            "adaptive": AdaptiveSampling(
                epsilon=0.05,
                prior=StoppingPrior(
                    ("billing", "technical", "sales"), (0.05,) * 4, n_items=200
                ),  # the outcomes of the task the decision model builds for TEAM
            ),
        },
    ),
    Scenario(
        "retried",
        (DOWN,) + ("technical",) * 8,
        {"n_samples": 4, "max_retries": 1},
    ),
    Scenario("fallback", (DOWN,) * 64, {"n_samples": 4, "max_retries": 1, "on_error": "fallback"}),
]


@pytest.mark.parametrize("scenario", CHOICE_SCENARIOS, ids=lambda s: s.name)
def test_the_decision_model_decides_as_the_runnable(scenario: Scenario) -> None:
    views = {}
    for mode in MODES:
        dm = TaskCalibratedDecisionModel(chat_model=_model(scenario), **scenario.options)
        call = (
            dm.adecide("Stripe fails.", "team", TEAM)
            if mode == "async"
            else dm.decide("Stripe fails.", "team", TEAM)
        )
        decision: Decision = _run(call, mode)
        views[("decision_model", mode)] = _view(decision.to_metadata(), decision.message)
        task, prompt = dm.task_for("team", TEAM), dm.prompt_for("Stripe fails.", TEAM)
        runnable = TaskCalibratedRunnable(_model(scenario), task, **scenario.options)
        call = runnable.ainvoke(prompt) if mode == "async" else runnable.invoke(prompt)
        decision = _run(call, mode)
        views[("runnable_choice", mode)] = _view(decision.to_metadata(), decision.message)
    assert len(views) == 4
    reference = views[("runnable_choice", "sync")]
    for key, view in views.items():
        assert view == reference, f"{key} differs from the sync Runnable"
