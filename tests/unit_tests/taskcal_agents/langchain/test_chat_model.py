from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.tracers.context import collect_runs

from taskcal_agents.decision import _presets as tasks
from taskcal_agents.decision._decider import Decision
from taskcal_agents.errors import ConfigurationError, LabelMismatchError
from taskcal_agents.langchain._chat_model import DECISION_METADATA_KEY, TaskCalibratedChatModel
from taskcal_agents.langchain._runnable import TaskCalibratedRunnable
from taskcal_agents.langchain._session import reply_for
from taskcal_agents.parsing._tool_turns import tool_result_reply
from tests.conftest import require_module
from tests.unit_tests.taskcal_agents.helpers.calibration import FakeCalibrator
from tests.unit_tests.taskcal_agents.helpers.chat_fakes import (
    WEATHER_SCHEMA,
    FakeOpenAIServer,
    RecordingChatModel,
    get_weather,
    tool_call_message,
)

QUESTION = "Which city do you mean?"
MODES = ["sync", "async"]


def call(model: Any, input_: Any, mode: str) -> AIMessage:
    if mode == "sync":
        return model.invoke(input_)
    return asyncio.run(model.ainvoke(input_))


def decision_of(message: AIMessage) -> Decision:
    return Decision.model_validate(message.response_metadata[DECISION_METADATA_KEY])


@pytest.mark.parametrize("mode", MODES)
def test_returns_tool_call_message_with_decision(mode: str) -> None:
    model = GenericFakeChatModel(messages=iter([tool_call_message(city="Paris")] * 4))
    # The default task grounds calls: the tool is bound and the user names the city.
    bound = model.bind(tools=[WEATHER_SCHEMA])
    chat = TaskCalibratedChatModel(bound, tasks.tool_decision(), n_samples=4)
    assert isinstance(chat, BaseChatModel)
    reply = call(chat, "What's the weather in Paris?", mode)
    assert isinstance(reply, AIMessage)
    assert reply.tool_calls[0]["name"] == "get_weather"
    assert reply.tool_calls[0]["args"] == {"city": "Paris"}
    meta = reply.response_metadata[DECISION_METADATA_KEY]
    json.dumps(meta)  # JSON-able
    assert "message" not in meta and "samples" not in meta
    decision = decision_of(reply)
    assert (decision.action, decision.n_samples) == ("tool_call", 4)


@pytest.mark.parametrize("mode", MODES)
def test_returns_question_and_abstention(mode: str) -> None:
    ask = TaskCalibratedChatModel(
        GenericFakeChatModel(messages=iter([QUESTION] * 3)), tasks.tool_decision(), n_samples=3
    )
    assert call(ask, "x", mode).content == QUESTION
    abstain = TaskCalibratedChatModel(
        GenericFakeChatModel(messages=iter(["I can't do that."] * 3)),
        tasks.tool_decision(abstain_text="Sorry, no."),
        n_samples=3,
    )
    reply = call(abstain, "x", mode)
    assert reply.content == "Sorry, no."
    assert decision_of(reply).action == "cannot_answer"


@pytest.mark.parametrize("mode", MODES)
def test_a_decision_without_a_message_of_its_own_replies_as_every_door(mode: str) -> None:
    """Never an empty reply: a rating answers with its label; after a tool result, with a
    report of what the tools returned (as the middleware does)."""
    rate = TaskCalibratedChatModel(
        GenericFakeChatModel(messages=iter(["4", "4", "5"])), tasks.rating(), None, n_samples=3
    )
    reply = call(rate, "Rate this answer.", mode)
    assert (reply.content, decision_of(reply).action) == ("4", "4")
    turn = [
        HumanMessage("Weather in Paris?"),
        AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "c"}]),
        ToolMessage("Sunny.", tool_call_id="c", name="get_weather"),
    ]
    decision = Decision(
        task="t", action="direct_answer", probs={}, calibrated={}, expected_cost={},
        n_samples=0, n_unparsed=0,
    )  # fmt: skip
    report = reply_for(decision, turn)
    assert report.content == tool_result_reply(turn).content
    assert report.response_metadata[DECISION_METADATA_KEY]["action"] == "direct_answer"


@pytest.mark.parametrize("mode", MODES)
def test_tool_call_without_sampled_call_is_not_sent(mode: str) -> None:
    model = GenericFakeChatModel(messages=iter([QUESTION] * 2))
    cal = FakeCalibrator(3, fixed=[0.98, 0.01, 0.01])
    chat = TaskCalibratedChatModel(model, tasks.tool_decision(), cal, n_samples=2)
    reply = call(chat, "x", mode)
    decision = decision_of(reply)
    # MBR picks tool_call, but no sample made a call: the cheapest executable action is sent
    assert reply.tool_calls == []
    assert decision.action != "tool_call"
    assert decision.fallback
    assert decision.fallback_reason is not None
    assert decision.fallback_reason.startswith("MBR chose 'tool_call', but no sample carried")
    assert reply.content in (QUESTION, tasks.tool_decision().abstain_text)


def test_kwargs_split_between_runnable_and_chat_model() -> None:
    model = GenericFakeChatModel(messages=iter([]))
    chat = TaskCalibratedChatModel(
        model, tasks.rating(), n_samples=3, temperature=0.2, tags=["t"], on_error="fallback"
    )
    assert chat.runnable.n_samples == 3
    assert chat.runnable.temperature == 0.2
    assert chat.runnable.on_error == "fallback"
    assert chat.tags == ["t"]
    assert chat.task.name == "rating"
    assert chat._llm_type == "taskcal"
    assert chat._identifying_params == {
        "task": "rating",
        "model": "GenericFakeChatModel",
        "calibrator": None,
        "n_samples": 3,
        "temperature": 0.2,
        "alpha": 0.1,
    }


def test_from_runnable() -> None:
    runnable = TaskCalibratedRunnable(
        GenericFakeChatModel(messages=iter([QUESTION] * 2)), tasks.tool_decision(), n_samples=2
    )
    chat = TaskCalibratedChatModel(runnable=runnable)
    assert chat.runnable is runnable
    assert chat.invoke("x").content == QUESTION


def test_constructor_errors() -> None:
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "TaskCalibratedChatModel needs either 'model' and 'task' or 'runnable', got "
            "model=None, task=None."
        ),
    ):
        TaskCalibratedChatModel()
    runnable = TaskCalibratedRunnable(GenericFakeChatModel(messages=iter([])), tasks.rating())
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "TaskCalibratedChatModel takes either 'runnable' or model/task/calibrator and "
            "sampling options, not both; got runnable and ['n_samples']."
        ),
    ):
        TaskCalibratedChatModel(runnable=runnable, n_samples=3)
    with pytest.raises(LabelMismatchError, match=re.escape("calibrator FakeCalibrator has labels")):
        TaskCalibratedChatModel(
            GenericFakeChatModel(messages=iter([])),
            tasks.tool_decision(),
            FakeCalibrator(3, labels=["x", "y", "z"]),
        )


# ------------------------------------------------------------------------- tools


@pytest.mark.parametrize("mode", MODES)
def test_bind_tools_binds_to_inner_model(mode: str) -> None:
    inner = RecordingChatModel(responses=[tool_call_message(city="Rome")])
    task = tasks.tool_decision(tool_effects={"get_weather": "read"})
    chat = TaskCalibratedChatModel(inner, task, n_samples=2, temperature=None)
    bound = chat.bind_tools([get_weather], tool_choice="auto")
    assert isinstance(bound, TaskCalibratedChatModel)
    assert bound is not chat
    assert chat.runnable.model is inner  # the original is untouched
    reply = call(bound, "What's the weather in Rome?", mode)  # the call is grounded
    assert reply.tool_calls[0]["args"] == {"city": "Rome"}
    assert inner.calls == [{"tools": [WEATHER_SCHEMA], "tool_choice": "auto"}] * 2


def test_bind_tools_replaces_tools_and_keeps_other_bindings() -> None:
    server = FakeOpenAIServer()
    inner = server.chat_openai().bind_tools([get_weather]).bind(stop=["END"])
    chat = TaskCalibratedChatModel(inner, tasks.tool_decision(), n_samples=4)

    def lookup(query: str) -> str:
        """Look something up."""
        return query

    bound = chat.bind_tools([lookup])
    bound.invoke("x")
    body = server.requests[0]
    assert [t["function"]["name"] for t in body["tools"]] == ["lookup"]
    assert body["stop"] == ["END"]
    assert body["n"] == 4


def test_bind_tools_unsupported() -> None:
    chat = TaskCalibratedChatModel(GenericFakeChatModel(messages=iter([])), tasks.tool_decision())
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "TaskCalibratedChatModel.bind_tools: the wrapped GenericFakeChatModel does not "
            "support tool calling; wrap a model that implements bind_tools."
        ),
    ):
        chat.bind_tools([get_weather])


# ----------------------------------------------------------------- composition


def test_in_a_chain_with_tracing() -> None:
    model = GenericFakeChatModel(messages=iter([QUESTION] * 3))
    chat = TaskCalibratedChatModel(model, tasks.tool_decision(), n_samples=3)
    chain = ChatPromptTemplate.from_messages([("human", "{q}")]) | chat
    with collect_runs() as cb:
        reply = chain.invoke({"q": "weather?"})
    assert reply.content == QUESTION
    (root,) = cb.traced_runs
    llm_run = root.child_runs[1]
    assert llm_run.run_type == "llm"
    (decide_run,) = llm_run.child_runs
    assert decide_run.name == "TaskCalibratedRunnable"
    assert [c.run_type for c in decide_run.child_runs] == ["llm"] * 3


def test_in_create_agent() -> None:
    agents = require_module("langchain.agents")
    inner = RecordingChatModel(
        responses=[tool_call_message(city="Paris")] * 3 + ["It is sunny in Paris."] * 3
    )
    chat = TaskCalibratedChatModel(
        inner, tasks.tool_decision(direct_answer=True), n_samples=3, temperature=None
    )
    agent = agents.create_agent(chat, tools=[get_weather])
    result = agent.invoke(
        {"messages": [HumanMessage(content="Weather in Paris?")]}, {"max_concurrency": 1}
    )
    messages = result["messages"]
    assert [type(m).__name__ for m in messages] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]
    assert messages[2].content == "sunny in Paris"
    assert messages[3].content == "It is sunny in Paris."
    assert decision_of(messages[3]).action == "direct_answer"
    assert inner.calls[0]["tools"] == [WEATHER_SCHEMA]
