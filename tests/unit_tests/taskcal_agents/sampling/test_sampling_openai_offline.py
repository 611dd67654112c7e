"""The offline (vllm.LLM) sampler's pure parts: tool-call parsing and output conversion.

Loading the engine takes tens of seconds and gigabytes on the CPU, so the engine call itself
is not exercised by the test suite.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from taskcal_agents.errors import ConfigurationError, SamplingError
from taskcal_agents.parsing._tool_calls import parse_tool_calls
from taskcal_agents.sampling._offline import (
    OfflineSampler,
    completion_to_message,
    outputs_to_messages,
)


@dataclass
class FakeCompletion:
    index: int
    text: str
    finish_reason: str | None = "stop"


@dataclass
class FakeRequestOutput:
    request_id: str
    outputs: list[FakeCompletion]


def test_plain_text_has_no_tool_calls() -> None:
    assert parse_tool_calls("Paris.") == ("Paris.", [], [])


def test_hermes_calls_are_parsed_and_malformed_ones_kept_as_invalid() -> None:
    text = (
        "Let me check.\n"
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_weather", "arguments": ["Rome"]}\n</tool_call>\n'
        "<tool_call>\n{broken"
    )
    content, calls, invalid = parse_tool_calls(text)

    assert content == "Let me check."
    assert [(c["name"], c["args"]) for c in calls] == [("get_weather", {"city": "Paris"})]
    assert [i["name"] for i in invalid] == ["get_weather"]  # "{broken" is no call: no name
    assert invalid[0]["error"] == "Function arguments must be a JSON object, got ['Rome']."


def test_completion_with_a_tool_call_finishes_with_tool_calls() -> None:
    message = completion_to_message(
        '<tool_call>{"name": "f", "arguments": {}}</tool_call>',
        finish_reason="stop",
        index=2,
        request_id="r",
        parse_tools=True,
    )
    assert message.content == ""
    assert message.tool_calls[0]["name"] == "f"
    assert message.response_metadata == {"finish_reason": "tool_calls", "choice_index": 2}
    assert message.id == "r-2"

    raw = completion_to_message(
        "<tool_call>{}</tool_call>",
        finish_reason="stop",
        index=0,
        request_id="r",
        parse_tools=False,
    )
    assert raw.content == "<tool_call>{}</tool_call>"
    assert raw.tool_calls == []


def test_outputs_are_grouped_per_conversation_in_index_order() -> None:
    outputs = [
        FakeRequestOutput("a", [FakeCompletion(1, "y"), FakeCompletion(0, "x")]),
        FakeRequestOutput("b", [FakeCompletion(0, "z", "length"), FakeCompletion(1, "w")]),
    ]
    messages = outputs_to_messages(outputs, 2, parse_tools=True)
    assert [[m.content for m in group] for group in messages] == [["x", "y"], ["z", "w"]]
    assert messages[1][0].response_metadata["finish_reason"] == "length"


def test_missing_completions_are_a_sampling_error() -> None:
    outputs = [FakeRequestOutput("a", [FakeCompletion(0, "x")])]
    with pytest.raises(
        SamplingError,
        match=r"^OfflineSampler: asked vLLM for n=3 completions, request 'a' got 1\.$",
    ):
        outputs_to_messages(outputs, 3, parse_tools=True)


def test_bad_arguments_are_refused_before_loading_vllm() -> None:
    with pytest.raises(
        ConfigurationError, match=r"^OfflineSampler: device must be 'cpu' or 'gpu', got 'tpu'\.$"
    ):
        OfflineSampler(device="tpu")
    with pytest.raises(
        ConfigurationError, match=r"^OfflineSampler\.sample_batch: n must be an int >= 1, got 0\.$"
    ):
        OfflineSampler().sample_batch(["hi"], n=0)
