"""The one task-prompt policy, and that sampling, the runnable and the middleware share it."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
)
from langgraph.runtime import Runtime

from taskcal_agents.datasets import DatasetItem
from taskcal_agents.decision._options import SamplingOptions
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.langchain._middleware import TaskCalibrationMiddleware
from taskcal_agents.langchain._runnable import TaskCalibratedRunnable
from taskcal_agents.sampling import OpenAISampler
from taskcal_agents.sampling._messages import to_messages
from taskcal_agents.sampling._prompts import (
    SYSTEM_ROLES,
    append_task_prompt,
    request_with_task_prompt,
    with_task_prompt,
)
from taskcal_agents.workflow import SampleSettings, SamplesStore, run_sampling, sample_header
from tests.unit_tests.taskcal_agents.helpers.chat_fakes import FakeOpenAIServer, RecordingChatModel
from tests.unit_tests.taskcal_agents.helpers.middleware_fakes import CountingHandler, run_hook
from tests.unit_tests.taskcal_agents.helpers.workflow_fakes import FakeSampler, tool_task

PROMPT = "Call the tool, ask for what is missing, or decline."
MODES = ["sync", "async"]


def text(t: str) -> dict[str, str]:
    return {"type": "text", "text": t}


# --------------------------------------------------------------------------- content


def test_string_content_gets_the_prompt_as_a_paragraph() -> None:
    assert append_task_prompt("You are X.", PROMPT) == f"You are X.\n\n{PROMPT}"
    # the prompt only counts as present when it is its own trailing paragraph
    assert append_task_prompt("Say Decide.", "Decide.") == "Say Decide.\n\nDecide."


@pytest.mark.parametrize("empty", ["", "  \n", None])
def test_empty_content_becomes_the_prompt(empty: str | None) -> None:
    assert append_task_prompt(empty, PROMPT) == PROMPT


def test_block_content_gets_an_extra_text_block() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:,"}}
    assert append_task_prompt([text("You are X."), image], PROMPT) == [
        text("You are X."),
        image,
        text(PROMPT),
    ]
    assert append_task_prompt(["plain string block"], PROMPT) == [
        "plain string block",
        text(PROMPT),
    ]
    assert append_task_prompt([], PROMPT) == [text(PROMPT)]


@pytest.mark.parametrize(
    "content",
    [PROMPT, f"You are X.\n\n{PROMPT}", [text("You are X."), text(PROMPT)], [PROMPT]],
)
def test_content_that_ends_with_the_prompt_is_kept(content: Any) -> None:
    assert append_task_prompt(content, PROMPT) == content


@pytest.mark.parametrize("prompt", [None, ""])
def test_no_prompt_keeps_the_content(prompt: str | None) -> None:
    blocks = [text("x")]
    assert append_task_prompt("x", prompt) == "x"
    assert append_task_prompt(blocks, prompt) is blocks


def test_bad_content_is_refused() -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"^append_task_prompt parameter 'content' must be a string, a list of content "
        r"blocks or None, got int 3; pass a message's content\.$",
    ):
        append_task_prompt(3, PROMPT)  # type: ignore[arg-type]


# -------------------------------------------------------------------------- messages


def as_dicts(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return messages


def as_langchain(messages: list[dict[str, Any]]) -> list[BaseMessage]:
    return to_messages(messages)


KINDS = [as_dicts, as_langchain]

CASES = {
    "no system": (
        [{"role": "user", "content": "hi"}],
        [{"role": "system", "content": PROMPT}, {"role": "user", "content": "hi"}],
    ),
    "system string": (
        [{"role": "system", "content": "You are X."}, {"role": "user", "content": "hi"}],
        [
            {"role": "system", "content": f"You are X.\n\n{PROMPT}"},
            {"role": "user", "content": "hi"},
        ],
    ),
    "system blocks": (
        [{"role": "system", "content": [text("You are X.")]}, {"role": "user", "content": "hi"}],
        [
            {"role": "system", "content": [text("You are X."), text(PROMPT)]},
            {"role": "user", "content": "hi"},
        ],
    ),
    "developer": (
        [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        [
            {"role": "developer", "content": f"Be brief.\n\n{PROMPT}"},
            {"role": "user", "content": "hi"},
        ],
    ),
    "system later": (
        [
            {"role": "user", "content": "hi"},
            {"role": "system", "content": "Note."},
            {"role": "system", "content": "Second."},
        ],
        [
            {"role": "user", "content": "hi"},
            {"role": "system", "content": f"Note.\n\n{PROMPT}"},
            {"role": "system", "content": "Second."},
        ],
    ),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", list(CASES))
def test_with_task_prompt(kind: Any, case: str) -> None:
    messages, expected = CASES[case]
    given = kind(copy.deepcopy(messages))
    before = copy.deepcopy(given)
    rendered = with_task_prompt(given, PROMPT)
    assert rendered == kind(expected)
    assert given == before  # the caller's messages are untouched
    if kind is as_dicts:
        assert messages == CASES[case][0]
    # rendering a rendered request changes nothing
    assert with_task_prompt(rendered, PROMPT) == rendered


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("prompt", [None, ""])
def test_with_no_prompt_the_request_is_unchanged(kind: Any, prompt: str | None) -> None:
    messages = kind(CASES["system string"][0])
    rendered = with_task_prompt(messages, prompt)
    assert rendered == messages
    assert rendered is not messages


def test_the_message_keeps_its_fields_and_the_others_are_the_callers() -> None:
    developer = SystemMessage(
        content="Be brief.",
        id="s1",
        name="rules",
        additional_kwargs={"__openai_role__": "developer"},
    )
    human = HumanMessage(content="hi", id="h1")
    rendered = with_task_prompt([developer, human], PROMPT)
    assert rendered[0] == SystemMessage(
        content=f"Be brief.\n\n{PROMPT}",
        id="s1",
        name="rules",
        additional_kwargs={"__openai_role__": "developer"},
    )
    assert rendered[1] is human
    assert developer.content == "Be brief."
    item = {"role": "system", "content": "own", "name": "rules"}
    assert with_task_prompt([item], PROMPT) == [
        {"role": "system", "content": f"own\n\n{PROMPT}", "name": "rules"}
    ]
    assert item["content"] == "own"


def test_chat_message_roles_and_empty_requests() -> None:
    chat = ChatMessage(role="developer", content="Be brief.")
    assert with_task_prompt([chat], PROMPT) == [
        ChatMessage(role="developer", content=f"Be brief.\n\n{PROMPT}")
    ]
    user = ChatMessage(role="user", content="hi")
    assert with_task_prompt([user], PROMPT) == [SystemMessage(content=PROMPT), user]
    assert with_task_prompt([], PROMPT) == [SystemMessage(content=PROMPT)]


def test_a_message_of_another_type_is_refused() -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"^with_task_prompt parameter 'messages' must hold LangChain messages or "
        r"OpenAI-style dicts with a 'role', got messages\[1\] = \('user', 'hi'\); convert "
        r"the input with taskcal_agents\.sampling\.to_messages first\.$",
    ):
        with_task_prompt([HumanMessage(content="x"), ("user", "hi")], PROMPT)


@pytest.mark.parametrize("case", ["no system", "system string", "system blocks", "developer"])
def test_the_split_form_renders_like_the_joined_request(case: str) -> None:
    joined = to_messages(CASES[case][0])
    expected = with_task_prompt(joined, PROMPT)
    if isinstance(joined[0], SystemMessage):
        system, rest = request_with_task_prompt(joined[0], joined[1:], PROMPT)
        assert system == expected[0]
    else:
        system, rest = request_with_task_prompt(None, joined, PROMPT)
        assert system == SystemMessage(content=PROMPT)
    assert [system, *rest] == expected


def test_the_split_form_finds_a_system_message_in_the_conversation() -> None:
    conversation = to_messages(CASES["system later"][0])
    system, rest = request_with_task_prompt(None, conversation, PROMPT)
    assert system is None
    assert rest == to_messages(CASES["system later"][1])
    assert request_with_task_prompt(None, conversation, None) == (None, conversation)


# ------------------------------------------------- one request on every path (issue 8)

LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look an order up.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    },
}
USER = {"role": "user", "content": "Where is my order 42? truth=tool_call"}
OWN = "You are the shop's assistant."

# item messages, then the request every path must send (the task prompt merged in)
ITEMS = {
    "no system, tools": (
        [USER],
        [LOOKUP],
        [{"role": "system", "content": PROMPT}, USER],
    ),
    "own system, tools": (
        [{"role": "system", "content": OWN}, USER],
        [LOOKUP],
        [{"role": "system", "content": f"{OWN}\n\n{PROMPT}"}, USER],
    ),
    "own developer message": (
        [{"role": "developer", "content": OWN}, USER],
        [LOOKUP],
        [{"role": "developer", "content": f"{OWN}\n\n{PROMPT}"}, USER],
    ),
    "system blocks, multi-turn, no tools": (
        [
            {"role": "system", "content": [text(OWN)]},
            {"role": "user", "content": "Hello."},
            {"role": "assistant", "content": "Hi, how can I help?"},
            USER,
        ],
        [],
        [
            {"role": "system", "content": [text(OWN), text(PROMPT)]},
            {"role": "user", "content": "Hello."},
            {"role": "assistant", "content": "Hi, how can I help?"},
            USER,
        ],
    ),
    "system message later in the conversation": (
        [{"role": "user", "content": "Hello."}, {"role": "system", "content": OWN}, USER],
        [LOOKUP],
        [
            {"role": "user", "content": "Hello."},
            {"role": "system", "content": f"{OWN}\n\n{PROMPT}"},
            USER,
        ],
    ),
}


def item_of(case: str) -> DatasetItem:
    messages, tools, _ = ITEMS[case]
    return DatasetItem(id="i1", messages=messages, tools=tools, label="tool_call")


def calibration_request(case: str, tmp_path: Path) -> tuple[list[dict[str, Any]], Any]:
    """The messages and tools `taskcal sample` (run_sampling) sends for the item."""
    task, settings = tool_task(prompt=PROMPT), SampleSettings(n=2, model="fake")
    sampler = FakeSampler()
    with SamplesStore.open(tmp_path / "s.jsonl", sample_header(task, settings, None)) as store:
        report = run_sampling(task, [item_of(case)], sampler, store, settings)
    assert report.written == 1
    assert len(sampler.calls) == 2  # the N samples and the greedy completion
    first, greedy = sampler.calls
    assert greedy["messages"] == first["messages"] and greedy["tools"] == first["tools"]
    assert first["messages"] == ITEMS[case][2]
    return first["messages"], first["tools"]


def recording_model(tools: list[dict[str, Any]]) -> Any:
    model = RecordingChatModel(responses=[AIMessage(content="Which order?")])
    return model, (model.bind(tools=tools) if tools else model)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", list(ITEMS))
def test_sampling_and_the_runnable_send_the_same_request(
    case: str, mode: str, tmp_path: Path
) -> None:
    messages, tools, expected = ITEMS[case]
    sampled, sampled_tools = calibration_request(case, tmp_path)
    assert sampled == expected
    assert sampled_tools == (tools or None)

    model, bound = recording_model(tools)
    runnable = TaskCalibratedRunnable(bound, tool_task(prompt=PROMPT), n_samples=2)
    item = item_of(case)
    if mode == "sync":
        runnable.invoke(item.messages)
    else:
        asyncio.run(runnable.ainvoke(item.messages))
    # one representation (LangChain messages): role by role, content by content
    assert model.inputs == [to_messages(sampled)] * 2
    assert [c.get("tools") for c in model.calls] == [tools or None] * 2
    assert item.messages == messages  # nothing was changed in place


def agent_request(case: str, model: Any) -> ModelRequest[Any]:
    """The item as an agent holds it: its system message apart from the conversation."""
    messages, tools, _ = ITEMS[case]
    conversation = to_messages(messages)
    system = conversation[0] if isinstance(conversation[0], SystemMessage) else None
    return ModelRequest(
        model=model,
        system_message=system,
        messages=conversation[1:] if system is not None else conversation,
        tools=list(tools),
        state={"messages": conversation},
        runtime=Runtime(),
    )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", list(ITEMS))
def test_the_middleware_sends_the_same_request(case: str, mode: str, tmp_path: Path) -> None:
    _, tools, expected = ITEMS[case]
    sampled, _ = calibration_request(case, tmp_path)
    task = tool_task(prompt=PROMPT)

    # sampling="model": the request's model is called with [system, *messages] and the tools
    model, _ = recording_model(tools)
    request = agent_request(case, model)
    mw = TaskCalibrationMiddleware(
        task=task, sampling="model", options=SamplingOptions(n_samples=2)
    )
    run_hook(mw, CountingHandler([]), request, mode)
    assert model.inputs == [to_messages(sampled)] * 2
    assert [c.get("tools") for c in model.calls] == [tools or None] * 2

    # sampling="handler": the agent's handler gets the same system text and conversation
    handler = CountingHandler([AIMessage(content="Which order?")] * 2)
    mw = TaskCalibrationMiddleware(
        task=task, sampling="handler", options=SamplingOptions(n_samples=2)
    )
    run_hook(mw, handler, request, mode)
    system_text = next(m["content"] for m in expected if m["role"] in SYSTEM_ROLES)
    assert len(handler.requests) == 2
    for sent in handler.requests:
        full = [sent.system_message, *sent.messages] if sent.system_message else sent.messages
        assert full == to_messages(sampled)
        assert next(m for m in full if isinstance(m, SystemMessage)).content == system_text
        assert sent.tools == tools
    fresh = agent_request(case, model)  # the agent's request is untouched
    assert (request.system_message, request.messages) == (fresh.system_message, fresh.messages)


@pytest.mark.parametrize("case", list(ITEMS))
def test_the_same_request_reaches_the_server(case: str, tmp_path: Path) -> None:
    """`taskcal sample`'s OpenAISampler and a deployed ChatOpenAI send equal bodies."""
    _, tools, expected = ITEMS[case]
    task, settings = tool_task(prompt=PROMPT), SampleSettings(n=2, model="m")
    server = FakeOpenAIServer()
    transport = httpx.MockTransport(server)
    sampler = OpenAISampler(
        "http://fake.invalid/v1",
        "m",
        http_client=httpx.Client(transport=transport),
        async_http_client=httpx.AsyncClient(transport=transport),
    )
    with SamplesStore.open(tmp_path / "s.jsonl", sample_header(task, settings, None)) as store:
        assert run_sampling(task, [item_of(case)], sampler, store, settings).written == 1
    chat = server.chat_openai()
    model = chat.bind_tools(tools) if tools else chat
    TaskCalibratedRunnable(model, task, n_samples=2).invoke(item_of(case).messages)

    calibration, greedy, deployment = server.requests
    assert calibration["messages"] == greedy["messages"] == expected
    assert deployment["messages"] == expected
    assert calibration.get("tools", []) == deployment.get("tools", []) == tools
