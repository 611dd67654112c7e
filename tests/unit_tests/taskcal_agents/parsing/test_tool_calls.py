"""Tool calls written in the content, read the same way on every path.

Real completions of Qwen2.5-Coder-0.5B-Instruct served by vLLM with the hermes tool parser
(``tests/data/tool_calls``): the model writes its call as bare JSON or in a code fence, so
the server returns it as content. The paths: the content as a LangChain chat model returns
it (``ChatOpenAI`` against the server), ``OpenAISampler``, ``OfflineSampler``, g_T, and the
message that a decision (``Decider``, ``TaskCalibratedRunnable``, the agent middleware)
returns.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from taskcal_agents.decision import _presets as tasks
from taskcal_agents.decision._decider import Decider
from taskcal_agents.langchain._runnable import TaskCalibratedRunnable
from taskcal_agents.parsing._grounding import GroundingContext
from taskcal_agents.parsing._labels import unparsed_reason, with_offered_tools
from taskcal_agents.parsing._registry import get_parser
from taskcal_agents.parsing._tool_calls import extract_tool_calls, parse_tool_calls, with_tool_calls
from taskcal_agents.sampling import OpenAISampler, sample_messages
from taskcal_agents.sampling._offline import completion_to_message
from tests.unit_tests.taskcal_agents.helpers.chat_fakes import RecordingChatModel
from tests.unit_tests.taskcal_agents.helpers.middleware_fakes import middleware, scripted

DATA = Path(__file__).resolve().parents[3] / "data" / "tool_calls" / "qwen05_when2call.jsonl"
ROWS = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line]
IDS = [row["id"].split(":", 1)[1][:8] + row["id"][-2:] for row in ROWS]
CALL_ROWS = [row for row in ROWS if row["expect"]["tool_calls"]]
EVENTS = [row for row in ROWS if "Events_3_FindEvents" in row["tool_names"]]
CALL_ID = re.compile(r"call_[0-9a-f]{24}")
MODES = ["sync", "async"]
# The EVENTS calls' arguments as the user states them (a relative day makes each date
# inferable): the default tool_decision() grounds the calls, and sends only grounded ones.
EVENTS_QUESTION = "Music events in Philadelphia this weekend?"


@tool
def Events_3_FindEvents(event_type: str, city: str, date: str) -> str:
    """Find cultural events in a city on a date."""
    return f"2 {event_type} events in {city} on {date}."


def served(row: dict[str, Any]) -> AIMessage:
    """The completion as a LangChain chat model returns it: the call is in the content."""
    message = row["message"]
    return AIMessage(
        content=message["content"], response_metadata={"finish_reason": message["finish_reason"]}
    )


def label(row: dict[str, Any], message: AIMessage, **options: Any) -> str | None:
    parser = get_parser("tool_decision", **options)
    return with_offered_tools(parser, row["tool_names"])(message)


def calls(message: AIMessage) -> list[tuple[str, dict[str, Any]]]:
    return [(c["name"], c["args"]) for c in extract_tool_calls(message)]


def expected_calls(row: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(c["name"], c["args"]) for c in row["expect"]["tool_calls"]]


class HermesServer:
    """A fake vLLM server whose hermes parser found no call: every choice is content."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        choices = [
            {
                "index": i,
                "message": {"role": "assistant", "content": row["message"]["content"]},
                "finish_reason": row["message"]["finish_reason"],
            }
            for i, row in enumerate(self.rows[: body.get("n", 1)])
        ]
        usage = {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}
        response = {
            "id": "chatcmpl-q",
            "object": "chat.completion",
            "created": 0,
            "model": "qwen",
            "choices": choices,
            "usage": usage,
        }
        return httpx.Response(200, json=response)

    def sampler(self) -> OpenAISampler:
        return OpenAISampler(
            "http://fake-vllm.test/v1",
            "qwen",
            http_client=httpx.Client(transport=httpx.MockTransport(self)),
        )

    def chat_openai(self) -> ChatOpenAI:
        return ChatOpenAI(
            model="qwen",
            api_key="EMPTY",
            base_url="http://fake-vllm.test/v1",  # type: ignore[arg-type]
            http_client=httpx.Client(transport=httpx.MockTransport(self)),
            max_retries=0,
        )


# ------------------------------------------------------------- the real completions


def test_the_fixture_holds_real_content_calls() -> None:
    assert len(ROWS) == 10
    assert all(row["message"]["tool_calls"] == [] for row in ROWS)
    contents = [row["message"]["content"] for row in ROWS]
    assert any(c.startswith("```json") for c in contents)
    assert any(c.startswith("{") for c in contents)
    assert any(c.startswith("Here's") for c in contents)
    assert sum(row["message"]["finish_reason"] == "length" for row in ROWS) == 2


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_g_t_reads_the_real_completion(row: dict[str, Any]) -> None:
    message = served(row)
    assert label(row, message) == row["expect"]["label"]
    if row["expect"]["label"] is None:
        assert (
            unparsed_reason(message, tool_names=row["tool_names"])
            == (row["expect"]["unparsed_reason"])
        )


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_parse_tool_calls_on_the_real_completion(row: dict[str, Any]) -> None:
    parsed = parse_tool_calls(row["message"]["content"])
    assert parsed.content == row["expect"]["content"]
    assert [(c["name"], c["args"]) for c in parsed.tool_calls] == expected_calls(row)
    assert all(CALL_ID.fullmatch(c["id"] or "") for c in parsed.tool_calls)
    assert [c["name"] for c in parsed.invalid_tool_calls] == row["expect"]["invalid_tool_calls"]
    assert all("cut off by max_tokens" in (c["error"] or "") for c in parsed.invalid_tool_calls)
    assert calls(served(row)) == expected_calls(row)


def test_every_path_reads_the_real_completions_the_same_way() -> None:
    server = HermesServer(ROWS)
    offered = [Events_3_FindEvents]
    openai = server.sampler().sample("x", n=len(ROWS), tools=offered)
    chat = sample_messages(server.chat_openai().bind_tools(offered), "x", n=len(ROWS))
    assert len(server.requests) == 2
    assert all(r["tools"][0]["function"]["name"] == "Events_3_FindEvents" for r in server.requests)
    for i, row in enumerate(ROWS):
        content = row["message"]["content"]
        finish = row["message"]["finish_reason"]
        offline = completion_to_message(
            content, finish_reason=finish, index=i, request_id="r", parse_tools=True
        )
        runtime = with_tool_calls(served(row))
        assert chat[i].content == content and chat[i].tool_calls == []  # as the server sent it
        paths = {
            "served": served(row),
            "chat_openai": chat[i],
            "openai": openai[i],
            "offline": offline,
            "runtime": runtime,
        }
        for name, message in paths.items():
            assert label(row, message) == row["expect"]["label"], (row["id"], name)
            assert calls(message) == expected_calls(row), (row["id"], name)
        for name, message in {"openai": openai[i], "offline": offline, "runtime": runtime}.items():
            # the call is a real tool call with an id, no longer JSON text
            assert message.content == row["expect"]["content"], (row["id"], name)
            assert [(c["name"], c["args"]) for c in message.tool_calls] == expected_calls(row)
            assert all(CALL_ID.fullmatch(c["id"] or "") for c in message.tool_calls)
            invalid = [c["name"] for c in message.invalid_tool_calls]
            assert invalid == row["expect"]["invalid_tool_calls"], (row["id"], name)
        assert openai[i].tool_calls == offline.tool_calls == runtime.tool_calls
        has_call = bool(row["expect"]["tool_calls"])
        assert (openai[i].response_metadata["finish_reason"] == "tool_calls") == has_call
        assert (offline.response_metadata["finish_reason"] == "tool_calls") == has_call


def test_openai_sampler_leaves_the_content_alone_without_tools() -> None:
    # The server runs no tool parser then, and neither does the sampler.
    server = HermesServer(ROWS)
    for params in ({}, {"tools": [Events_3_FindEvents], "tool_choice": "none"}):
        messages = server.sampler().sample("x", n=3, **params)  # type: ignore[arg-type]
        assert [m.content for m in messages] == [r["message"]["content"] for r in ROWS[:3]]
        assert all(m.tool_calls == [] for m in messages)
        assert all(m.response_metadata["finish_reason"] == "stop" for m in messages)


@pytest.mark.parametrize("row", CALL_ROWS[:3], ids=IDS[:3])
def test_a_call_to_a_tool_not_offered_is_no_valid_call(row: dict[str, Any]) -> None:
    message = served(row)
    other = {**row, "tool_names": ["stock_price.get"]}
    assert label(other, message) is None
    assert unparsed_reason(message, tool_names=["stock_price.get"]) == "unoffered_tool"
    # The parser's check of the offered tool names (tool_names=), without grounding.
    task = tasks.tool_decision(grounding=None)
    decision = Decider(task).decide([message] * 4, tool_names=["stock_price.get"])
    assert decision.action != "tool_call"
    assert decision.n_unparsed == 4
    assert decision.message is None or decision.message.tool_calls == []


def test_a_call_cut_off_by_max_tokens_is_counted_and_never_sent() -> None:
    [row] = [r for r in ROWS if r["expect"]["invalid_tool_calls"]]
    message = served(row)
    assert row["message"]["finish_reason"] == "length"
    assert extract_tool_calls(message) == []
    # the started call states the decision (partial_calls, the default) ...
    assert label(row, message) == "tool_call"
    # ... or, without that rule, the sample is unparsed for its length
    assert label(row, message, partial_calls=False) is None
    assert unparsed_reason(message, tool_names=row["tool_names"]) == "length"
    # the samplers keep it as an invalid call with its name and the error
    [invalid] = with_tool_calls(message).invalid_tool_calls
    assert invalid["name"] == "Music_3_PlayMedia"
    assert invalid["args"] == row["message"]["content"].removeprefix("```json").strip()
    # a decision never sends it (the fixture keeps the offered tools' names only; a cut-off
    # call has no arguments to ground)
    context = GroundingContext([{"name": name} for name in row["tool_names"]])
    decision = Decider(tasks.tool_decision()).decide(
        [message] * 4, tool_names=row["tool_names"], context=context
    )
    assert decision.counts["tool_call"] == 4
    assert decision.action != "tool_call"
    assert decision.fallback_reason is not None and "no sample carried it out" in (
        decision.fallback_reason
    )
    assert decision.message is not None and decision.message.tool_calls == []


# ---------------------------------------------------------------- the returned message

EVENTS_TASK = tasks.tool_decision(tool_effects={"Events_3_FindEvents": "read"})
"""Finding events is a read: three agreeing samples of four send it."""


def test_decider_returns_the_content_call_as_a_tool_call() -> None:
    samples = [served(row) for row in EVENTS]
    context = GroundingContext([Events_3_FindEvents], [HumanMessage(EVENTS_QUESTION)])
    decision = Decider(EVENTS_TASK).decide(
        samples, tool_names=EVENTS[0]["tool_names"], context=context
    )
    assert decision.action == "tool_call"
    assert decision.counts["tool_call"] == 3
    assert decision.n_unparsed == 1  # the echoed tool definition, cut off
    message = decision.message
    assert message is not None
    assert message.content == ""
    [call] = message.tool_calls
    assert call["name"] == "Events_3_FindEvents"
    assert call["args"] == EVENTS[0]["expect"]["tool_calls"][0]["args"]
    assert CALL_ID.fullmatch(call["id"] or "")
    assert message.response_metadata == samples[0].response_metadata  # the sample itself


@pytest.mark.parametrize("mode", MODES)
def test_runnable_returns_the_content_call_as_a_tool_call(mode: str) -> None:
    model = RecordingChatModel(responses=[row["message"]["content"] for row in EVENTS])
    runnable = TaskCalibratedRunnable(
        model.bind_tools([Events_3_FindEvents]),
        EVENTS_TASK,
        n_samples=4,
        temperature=None,
    )
    decision = (
        runnable.invoke(EVENTS_QUESTION)
        if mode == "sync"
        else asyncio.run(runnable.ainvoke(EVENTS_QUESTION))
    )
    assert decision.action == "tool_call"
    assert decision.message is not None
    [call] = decision.message.tool_calls
    assert call["name"] == "Events_3_FindEvents"
    assert CALL_ID.fullmatch(call["id"] or "")
    assert "{" not in decision.message.content


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sampling", ["handler", "model"])
def test_agent_runs_the_tool_that_the_model_wrote_as_json(mode: str, sampling: str) -> None:
    contents = [row["message"]["content"] for row in EVENTS]
    model = scripted(*contents, "There are 2 music events.")
    agent = create_agent(
        model,
        tools=[Events_3_FindEvents],
        middleware=[middleware(sampling=sampling, task=EVENTS_TASK)],
    )
    inputs = {"messages": [HumanMessage(EVENTS_QUESTION)]}
    result = agent.invoke(inputs) if mode == "sync" else asyncio.run(agent.ainvoke(inputs))
    kinds = [type(m).__name__ for m in result["messages"]]
    assert kinds == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    [call] = result["messages"][1].tool_calls
    # the three calls differ in their date; which one is sent depends on sample order
    assert (call["name"], call["args"]) in [c for row in EVENTS for c in expected_calls(row)]
    assert result["messages"][2].tool_call_id == call["id"]
    assert (
        result["messages"][2].content
        == f"2 Music events in Philadelphia on {call['args']['date']}."
    )
    assert [d["action"] for d in result["taskcal_decisions"]] == ["tool_call"]


# ---------------------------------------------------------------------------- the rules

CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


@pytest.mark.parametrize(
    ("text", "content", "names"),
    [
        (CALL, "", ["get_weather"]),
        (f"Here is the call:\n\n```json\n{CALL}\n```", "Here is the call:", ["get_weather"]),
        (f"```\n{CALL}\n```\n", "", ["get_weather"]),
        (f"{CALL}\n</tool_call>", "", ["get_weather"]),  # stray closing tag
        ('[{"name": "a", "arguments": {}}, {"name": "b", "parameters": {"x": 1}}]', "", ["a", "b"]),
        (f"{CALL},\n{CALL}", "", ["get_weather", "get_weather"]),
        (f"```json\n{CALL}\n```\n```json\n{CALL}\n```", "", ["get_weather", "get_weather"]),
        ('{"name": "f", "arguments": "{\\"x\\": 1}"}', "", ["f"]),  # arguments as a string
        (
            '{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}',
            "",
            ["f"],
        ),
        ('{"tool_calls": [{"name": "f", "args": {}}]}', "", ["f"]),
        # a call quoted in prose, then the call that ends the text
        (f"Like {CALL} here. So:\n{CALL}", f"Like {CALL} here. So:", ["get_weather"]),
        # tags count wherever they are, text after them too
        (f"Sure.\n<tool_call>\n{CALL}\n</tool_call>\nDone.", "Sure.", ["get_weather"]),
        ('<tool_call>{"name": "f", "parameters": {"x": 1}}</tool_call>', "", ["f"]),
        ('<tool_call>[{"name": "f", "arguments": {}}]</tool_call>', "", ["f"]),
        ('<tool_call>{"name": "f"}</tool_call>', "", ["f"]),  # tagged: no arguments → {}
    ],
)
def test_calls_in_text(text: str, content: str, names: list[str]) -> None:
    parsed = parse_tool_calls(text)
    assert [c["name"] for c in parsed.tool_calls] == names
    assert parsed.content == content
    assert parsed.invalid_tool_calls == []


@pytest.mark.parametrize(
    "text",
    [
        f"I would call {CALL} to get it.",  # followed by prose: quoted, not made
        f"{CALL}\n" + '{"temperature": 21}',  # followed by other JSON (an invented result)
        '{"name": "get_weather"}',  # no argument key
        '{"name": "Alice", "age": 30}',
        '{"name": "get_weather", "description": "Get the weather.", "arguments": {"city": "X"}}',
        '{"name": "get_weather", "parameters": {"type": "object", "properties": {}}}',
        '{"type": "function", "function": {"name": "get_weather", "description": "Get it.", '
        '"parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}',
        '{"name": "get_weather", "arguments": "not json"}',
        '{"name": 3, "arguments": {}}',
    ],
)
def test_no_calls_in_text(text: str) -> None:
    assert parse_tool_calls(text) == (text, [], [])
    assert with_tool_calls(AIMessage(content=text)).content == text


def test_tagged_arguments_that_are_no_object_make_an_invalid_call() -> None:
    parsed = parse_tool_calls('<tool_call>{"name": "f", "arguments": [1]}</tool_call>')
    assert parsed.tool_calls == []
    [invalid] = parsed.invalid_tool_calls
    assert (invalid["name"], invalid["error"]) == (
        "f",
        "Function arguments must be a JSON object, got [1].",
    )


def test_parse_tool_calls_returns_fresh_copies() -> None:
    first = parse_tool_calls(CALL)
    first.tool_calls[0]["args"]["city"] = "Rome"
    assert parse_tool_calls(CALL).tool_calls[0]["args"] == {"city": "Paris"}


def test_with_tool_calls_keeps_native_calls_and_fills_missing_ids() -> None:
    message = AIMessage(content=CALL, tool_calls=[{"name": "f", "args": {}, "id": None}])
    result = with_tool_calls(message)
    assert result.content == CALL  # native calls win; the content is not read
    assert [c["name"] for c in result.tool_calls] == ["f"]
    assert CALL_ID.fullmatch(result.tool_calls[0]["id"] or "")
    assert message.tool_calls[0]["id"] is None  # the input is not changed


def test_openai_sampler_decodes_arguments_that_vllm_encoded_twice() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        arguments = json.dumps(json.dumps({"city": "Paris"}))  # '"{\\"city\\": \\"Paris\\"}"'
        tool_call = {
            "id": "c",
            "type": "function",
            "function": {"name": "get_weather", "arguments": arguments},
        }
        choice = {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": None, "tool_calls": [tool_call]},
        }
        return httpx.Response(
            200,
            json={
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [choice],
            },
        )

    sampler = OpenAISampler(
        "http://fake-vllm.test/v1",
        "m",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    [message] = sampler.sample("x", tools=[Events_3_FindEvents])
    assert message.tool_calls == [
        {"name": "get_weather", "args": {"city": "Paris"}, "id": "c", "type": "tool_call"}
    ]


# Verbatim forms from Qwen2.5-Coder-1.5B-Instruct on When2Call (N = 8, T = 0.7), shortened
# only inside the arguments: read as calls, the same on every path.
QWEN15_FORMS = [
    (
        '{{"name": "set_alarm", "arguments": {"alarm_time": "2023-04-01 08:30:00", '
        '"purpose": "Meeting with client in 1 minute"}}}}',
        "set_alarm",
        {"alarm_time": "2023-04-01 08:30:00", "purpose": "Meeting with client in 1 minute"},
        "",
    ),
    (
        '<tools>\n{"name": "detail_adriel_project", "arguments": {"project_name": "Project A", '
        '"include_financials": true}}\n</tools>',
        "detail_adriel_project",
        {"project_name": "Project A", "include_financials": True},
        "",
    ),
    (
        "To find a Music event in New York on April 15, you can use the "
        "`Events_3_BuyEventTickets` function. Here's an example of how to use it:\n```json\n"
        '{\n  "name": "Events_3_BuyEventTickets",\n  "arguments": {\n    "event_name": '
        '"Leonardo DiCaprio",\n    "number_of_tickets": 10\n  }\n}\n```\nThis will initiate a '
        "payment request to a specified receiver for a c",
        "Events_3_BuyEventTickets",
        {"event_name": "Leonardo DiCaprio", "number_of_tickets": 10},
        "To find a Music event in New York on April 15, you can use the "
        "`Events_3_BuyEventTickets` function. Here's an example of how to use it:",
    ),
]


@pytest.mark.parametrize(("text", "name", "args", "content"), QWEN15_FORMS)
def test_qwen15_call_forms(text: str, name: str, args: dict[str, Any], content: str) -> None:
    found = parse_tool_calls(text)
    assert [(c["name"], c["args"]) for c in found.tool_calls] == [(name, args)]
    assert found.content == content
    task = tasks.tool_decision()
    assert task.parse_completion(AIMessage(content=text), tool_names=[name]) == "tool_call"
    assert task.parse_completion(AIMessage(content=text), tool_names=["other_tool"]) is None


def test_prose_after_an_unfenced_call_or_an_open_fence_is_still_no_call() -> None:
    assert parse_tool_calls('I will call {"name": "f", "arguments": {}} now.').tool_calls == []
    unclosed = 'Like this: ```json\n{"name": "f", "arguments": {}} and then more'
    assert parse_tool_calls(unclosed).tool_calls == []
