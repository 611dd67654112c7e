"""The front doors' core (DecisionSession): what a copy of a door, a retry layer, the node's
options and the 0.1 keyword arguments of the middleware mean."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from langchain_core.decisions import Choice
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from taskcal_agents.decision._options import SamplingOptions
from taskcal_agents.decision._presets import tool_decision
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.langchain._chat_model import TaskCalibratedChatModel
from taskcal_agents.langchain._decision_model import TaskCalibratedDecisionModel
from taskcal_agents.langchain._graph_node import decision_node
from taskcal_agents.langchain._middleware import TaskCalibrationMiddleware
from taskcal_agents.langchain._reply_guard import ToolReplyMiddleware
from tests.unit_tests.taskcal_agents.helpers.chat_fakes import RecordingChatModel

TEAM = Choice(
    instructions="Which team?", criteria={"billing": "Pay.", "technical": "Bugs.", "sales": "$"}
)


def test_a_copy_of_the_chat_model_samples_through_its_own_retry_layer() -> None:
    flaky = RecordingChatModel(responses=[ConnectionError("down"), "Which city?", "Which city?"])
    chat = TaskCalibratedChatModel(
        RecordingChatModel(responses=["x"]), tool_decision(), None, n_samples=2, use_n=False
    )
    retried = chat.with_model(flaky.with_retry(stop_after_attempt=3, wait_exponential_jitter=False))
    reply = retried.invoke("Weather?")
    assert reply.content == "Which city?" and len(flaky.calls) >= 3


def test_a_copy_of_a_door_decides_with_its_own_options() -> None:
    chat = TaskCalibratedChatModel(
        RecordingChatModel(responses=["Which city?"]), tool_decision(), None, n_samples=2
    )
    runnable = chat.runnable.model_copy(update={"n_samples": 5})
    assert runnable.invoke("Weather?").n_samples == 5
    model = TaskCalibratedDecisionModel(
        chat_model=GenericFakeChatModel(messages=iter(["technical"] * 20)),
        calibrators={"team": None}, n_samples=2,
    )  # fmt: skip
    assert model.decide("Stripe fails.", "team", TEAM).n_samples == 2
    copy = model.model_copy(update={"n_samples": 6})
    assert copy.decide("Stripe fails.", "team", TEAM).n_samples == 6
    assert model.decide("Stripe fails.", "team", TEAM).n_samples == 2


def test_the_graph_node_takes_an_explicit_alpha() -> None:
    model = RecordingChatModel(responses=["Which city?"]).bind_tools([])
    node = decision_node(
        model, tool_decision(), None, options=SamplingOptions(n_samples=2, alpha=5.0)
    )
    state = node.invoke({"messages": [HumanMessage("Weather?")], "taskcal_decisions": []})
    probs = state["taskcal_decisions"][-1]["probs"]
    assert probs["tool_call"] == pytest.approx(5 / 17)  # (0 + α) / (2 + 3α) with α = 5


def test_no_closing_message_after_a_structured_response() -> None:
    turn = [
        HumanMessage("Weather?"),
        AIMessage("", tool_calls=[{"name": "Weather", "args": {"city": "Paris"}, "id": "s"}]),
        ToolMessage("Returning structured response: ...", tool_call_id="s", name="Weather"),
    ]
    guard = ToolReplyMiddleware()
    assert guard._closing({"messages": turn, "structured_response": {"city": "Paris"}}) is None
    assert guard._closing({"messages": turn}) is not None


def test_the_old_keyword_arguments_warn_at_the_callers_line() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        TaskCalibrationMiddleware(task=tool_decision(), n_samples=4, alpha=None)
    assert [w.category for w in caught] == [DeprecationWarning] * 2  # n_samples, alpha
    assert {Path(w.filename) for w in caught} == {Path(__file__)}


def test_old_tool_result_arguments_beside_the_new_one_are_refused() -> None:
    with pytest.warns(DeprecationWarning), pytest.raises(ConfigurationError, match="tool_result"):
        TaskCalibrationMiddleware(task=tool_decision(), tool_result=None, tool_result_task=None)
