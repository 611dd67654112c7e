"""The live vLLM server: it answers, renders tools with our chat template, parses tool calls."""

from __future__ import annotations

import httpx
import pytest
from langchain_core.messages import AIMessage

from taskcal_agents.sampling import OpenAISampler
from taskcal_agents.serving import ExternalServer, VLLMServer

pytestmark = pytest.mark.integration

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def _root(server: VLLMServer | ExternalServer) -> str:
    return server.base_url.removesuffix("/v1")


def test_the_server_answers_through_chat_openai(vllm_server: VLLMServer | ExternalServer) -> None:
    reply = vllm_server.chat_model(temperature=0.0, max_tokens=8).invoke("Say hello.")
    assert isinstance(reply, AIMessage)
    assert reply.content.strip()


TOOL_CONVERSATION = [
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call-1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call-1", "content": "sunny, 21 C"},
]
"""A tool call and its result: what a chat template must render (also used for Qwen)."""


def test_the_chat_template_renders_tools_tool_calls_and_tool_results(
    vllm_server: VLLMServer | ExternalServer,
) -> None:
    messages = TOOL_CONVERSATION
    with httpx.Client(timeout=30) as client:
        tokens = client.post(
            _root(vllm_server) + "/tokenize",
            json={
                "model": vllm_server.model_name,
                "messages": messages,
                "tools": [WEATHER_TOOL],
                "add_generation_prompt": True,
            },
        )
        tokens.raise_for_status()
        prompt = client.post(
            _root(vllm_server) + "/detokenize",
            json={"model": vllm_server.model_name, "tokens": tokens.json()["tokens"]},
        )
        prompt.raise_for_status()
    text = prompt.json()["prompt"]
    assert "<tools>" in text
    assert "Get the current weather for a city." in text
    assert (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in text
    )
    assert "<tool_response>\nsunny, 21 C\n</tool_response>" in text
    assert text.endswith("<|im_start|>assistant\n")


def test_hermes_tool_calls_come_back_as_langchain_tool_calls(
    vllm_server: VLLMServer | ExternalServer,
) -> None:
    # Force the Hermes text with a regex, so the test checks the server's tool parser
    # rather than the 135M model's skill.
    forced = (
        r'<tool_call>\n\{"name": "get_weather", "arguments": \{"city": "Paris"\}\}\n</tool_call>'
    )
    with OpenAISampler.from_endpoint(vllm_server.endpoint) as sampler:
        messages = sampler.sample(
            "What is the weather in Paris?",
            n=1,
            max_tokens=40,
            tools=[WEATHER_TOOL],
            structured_outputs={"regex": forced},
        )
    for message in messages:
        assert message.tool_calls[0]["name"] == "get_weather"
        assert message.tool_calls[0]["args"] == {"city": "Paris"}
        assert message.response_metadata["finish_reason"] == "tool_calls"
