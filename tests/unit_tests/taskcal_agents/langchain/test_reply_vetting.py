"""Under decide_on="user_turn" a run ends in an answer, never in the model's unusable reply."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from taskcal_agents.decision._options import SamplingOptions
from taskcal_agents.parsing._tool_turns import unusable_reply
from tests.conftest import require_module

require_module("langchain.agents")  # the 'agents' extra, which the middleware needs too
from langchain.agents import create_agent  # noqa: E402

from taskcal_agents.decision._presets import tool_decision  # noqa: E402
from taskcal_agents.langchain._middleware import TaskCalibrationMiddleware  # noqa: E402
from taskcal_agents.langchain._reply_guard import ToolReplyMiddleware, vetted_reply  # noqa: E402


@tool
def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    return "sunny, 21 °C" if city.lower() == "paris" else f"no weather data for {city}"


TASK = tool_decision(tool_effects={"get_weather": "read"})
"""The weather lookup is a read: two agreeing samples send it."""

PARIS = {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_paris"}
OFF_TOPIC = (
    "Parse the response to extract the weather description and temperature. Let's compare the "
    "provided response to the format of the expected JSON response structure"
)
TURN: list[BaseMessage] = [
    HumanMessage("What's the weather in Paris?"),
    AIMessage(content="", tool_calls=[PARIS]),
    ToolMessage("sunny, 21 °C", tool_call_id="call_paris"),
]


def test_unusable_replies() -> None:
    assert unusable_reply(AIMessage(content="", tool_calls=[PARIS]), TURN) == (
        "repeats a call already answered"
    )
    written = AIMessage(content=json.dumps({"name": "get_weather", "arguments": {"city": "Rome"}}))
    assert unusable_reply(written, TURN) == "writes a tool call as text"
    prose = AIMessage(content=f"{written.content}\n<|endoftext|>Can you help me with that?")
    assert unusable_reply(prose, TURN) == "writes a tool call as text"
    assert unusable_reply(AIMessage(content="  "), TURN) == "is empty"
    assert unusable_reply(AIMessage(content=OFF_TOPIC), TURN) == "uses nothing the tools returned"
    # A reply that uses a word or number of the result, or asks, is the model's to give.
    assert unusable_reply(AIMessage(content="Sunny skies over Paris today."), TURN) is None
    assert unusable_reply(AIMessage(content="It is 21 degrees."), TURN) is None
    assert unusable_reply(AIMessage(content="Do you want the forecast too?"), TURN) is None


def _turn(result: str, **args: Any) -> list[BaseMessage]:
    call = {"name": "act", "args": args, "id": "call_1"}
    return [
        HumanMessage("Do it."),
        AIMessage(content="", tool_calls=[call]),
        ToolMessage(result, tool_call_id="call_1"),
    ]


@pytest.mark.parametrize(
    ("result", "args", "reply"),
    [
        ("", {"to": "bob@x.org"}, "Done, I sent the email."),  # an empty result says nothing
        ("x " * 300 + "Zanzibar", {}, "The answer is Zanzibar."),  # read whole, not cut
        ("Light rain", {"city": "Paris"}, "It's raining lightly."),  # stems
        ("22.46", {}, "About 22 degrees."),  # a number's whole part
        ("Success", {"to": "bob@x.org"}, "Your email to Bob has been sent."),  # the call's args
        ("東京は晴れです", {}, "東京は晴れでしょう。"),  # no spaces: not judged
    ],
)
def test_replies_that_use_the_result_or_the_call_are_kept(
    result: str, args: dict[str, Any], reply: str
) -> None:
    assert unusable_reply(AIMessage(content=reply), _turn(result, **args)) is None


def test_json_data_in_a_reply_is_no_written_call() -> None:
    data = AIMessage(content='The user is {"name": "Alice", "email": "a@x.org"}.')
    assert unusable_reply(data, _turn('{"name": "Alice", "email": "a@x.org"}')) is None
    assert unusable_reply(AIMessage(content="It is sunny, 21 °C in Paris."), TURN) is None
    rome = {"name": "get_weather", "args": {"city": "Rome"}, "id": "call_rome"}
    assert unusable_reply(AIMessage(content="", tool_calls=[rome]), TURN) is None


class Scripted(BaseChatModel):
    """Calls get_weather('Paris') on the user turn; after the result, replies ``after``."""

    after: str = "repeat"

    def _reply(self, messages: Sequence[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], HumanMessage):
            return AIMessage(content="", tool_calls=[PARIS])
        if self.after == "repeat":
            return AIMessage(content="", tool_calls=[{**PARIS, "id": "call_again"}])
        if self.after == "text":
            return AIMessage(
                content=json.dumps({"name": "get_weather", "arguments": PARIS["args"]})
            )
        if self.after == "empty":
            return AIMessage(content="")
        if self.after == "off_topic":  # Qwen2.5-Coder-1.5B's reply to "sunny, 21 °C"
            return AIMessage(content=OFF_TOPIC)
        if self.after == "parallel":  # the answered call again, and a new one
            rome = {"name": "get_weather", "args": {"city": "Rome"}, "id": "call_rome"}
            return AIMessage(content="", tool_calls=[{**PARIS, "id": "call_again"}, rome])
        return AIMessage(content="It is sunny, 21 °C in Paris.")

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kw: Any) -> Any:
        return self.bind(**kw)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("after", ["repeat", "text", "empty", "off_topic"])
def test_the_run_ends_with_the_tool_result_not_the_unusable_reply(mode: str, after: str) -> None:
    mw = TaskCalibrationMiddleware(task=TASK, options=SamplingOptions(n_samples=2))
    agent = create_agent(
        Scripted(after=after), tools=[get_weather], middleware=[mw, ToolReplyMiddleware()]
    )
    request = {"messages": [HumanMessage("What's the weather in Paris?")]}
    if mode == "sync":
        result = agent.invoke(request)
    else:
        import asyncio

        result = asyncio.run(agent.ainvoke(request))
    tool_messages = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert len(tool_messages) == 1  # the repeated call was not run again
    last = result["messages"][-1]
    assert isinstance(last, AIMessage) and not last.tool_calls
    assert (
        last.content == "Here is what the tool returned: get_weather(city='Paris') → sunny, 21 °C"
    )
    assert last.response_metadata["taskcal_replaced_reply"].startswith("the model's reply ")


def test_a_real_answer_is_kept() -> None:
    mw = TaskCalibrationMiddleware(task=TASK, options=SamplingOptions(n_samples=2))
    agent = create_agent(
        Scripted(after="answer"), tools=[get_weather], middleware=[mw, ToolReplyMiddleware()]
    )
    result = agent.invoke({"messages": [HumanMessage("What's the weather in Paris?")]})
    assert result["messages"][-1].content == "It is sunny, 21 °C in Paris."
    assert "taskcal_replaced_reply" not in result["messages"][-1].response_metadata


def test_only_the_repeated_call_of_a_parallel_reply_is_dropped() -> None:
    mw = TaskCalibrationMiddleware(task=TASK, options=SamplingOptions(n_samples=2))
    agent = create_agent(
        Scripted(after="parallel"), tools=[get_weather], middleware=[mw, ToolReplyMiddleware()]
    )
    result = agent.invoke({"messages": [HumanMessage("What's the weather in Paris?")]})
    ran = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in ran] == ["call_paris", "call_rome"]  # Paris ran once
    last = result["messages"][-1]
    assert isinstance(last, AIMessage) and not last.tool_calls  # then both were repeats
    assert "taskcal_replaced_reply" in last.response_metadata


def test_the_calibration_middleware_alone_passes_the_reply_through() -> None:
    """Vetting is ToolReplyMiddleware's: without it the model's reply stands as it is."""
    mw = TaskCalibrationMiddleware(task=TASK, options=SamplingOptions(n_samples=2))
    agent = create_agent(Scripted(after="off_topic"), tools=[get_weather], middleware=[mw])
    result = agent.invoke({"messages": [HumanMessage("What's the weather in Paris?")]})
    assert result["messages"][-1].content == OFF_TOPIC


def test_a_kept_reply_is_marked_and_a_replaced_one_keeps_its_id() -> None:
    turn = [
        HumanMessage("What's the weather in Paris?"),
        AIMessage(content="", tool_calls=[PARIS]),
        ToolMessage("sunny, 21 °C", tool_call_id=PARIS["id"], name="get_weather"),
    ]
    kept = vetted_reply(AIMessage("It is sunny, 21 °C in Paris.", id="a"), turn)
    assert kept.response_metadata["taskcal_vetted"] is True and kept.id == "a"
    replaced = vetted_reply(AIMessage("", id="b"), turn)
    assert replaced.id == "b" and "taskcal_replaced_reply" in replaced.response_metadata
