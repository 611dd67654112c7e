"""The one-pass tool decision at the front doors, against a scripted OpenAI-compatible server.

The server answers a request that asks for ``top_logprobs`` under a choice constraint with
scripted first-token log-probabilities, and a greedy request with a call to ``get_weather``.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from typing import Any

import httpx
import numpy as np
import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from taskcal_agents.decision import SamplingOptions, tool_decision
from taskcal_agents.decision._one_pass import ONE_PASS_PSEUDO_SAMPLES
from taskcal_agents.errors import ConfigurationError, SamplingError
from taskcal_agents.langchain import TaskCalibratedRunnable, TaskCalibrationMiddleware
from taskcal_agents.sampling import tool_options
from tests.unit_tests.taskcal_agents.helpers.chat_fakes import (
    FakeOpenAIServer,
    RecordingChatModel,
    get_weather,
)


@tool
def get_time(city: str) -> str:
    """Get the local time in a city."""
    return f"noon in {city}"


ROOT = {"call": math.log(0.7), "ask": math.log(0.2), "no": math.log(0.1), "<|x|>": -9999.0}


def _logprobs(top: dict[str, float]) -> dict[str, Any]:
    entries = [
        {"token": t, "bytes": list(t.encode()), "logprob": lp, "top_logprobs": []}
        for t, lp in top.items()
    ]
    return {"content": [{**entries[0], "top_logprobs": entries}]}


class ScriptedServer(FakeOpenAIServer):
    """Chat completions: scripted top_logprobs for a choice request, else a greedy call."""

    def __init__(self, top: dict[str, float] | None = ROOT, *, logprobs: bool = True) -> None:
        super().__init__()  # its requests list and its chat_openai()
        self.top = top
        self.logprobs = logprobs

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        if "structured_outputs" in body:
            message: dict[str, Any] = {"role": "assistant", "content": "call"}
            lp = _logprobs(self.top or {}) if self.logprobs else None
        else:
            args = json.dumps({"city": "Paris"})
            call = {"id": "c1", "type": "function",
                    "function": {"name": "get_weather", "arguments": args}}  # fmt: skip
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            lp = None
        choice = {"index": 0, "message": message, "finish_reason": "stop", "logprobs": lp}
        return httpx.Response(
            200,
            json={
                "id": "x", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [choice],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            },
        )  # fmt: skip


def _expected_probs() -> np.ndarray:
    counts = np.array([0.7, 0.2, 0.1]) * ONE_PASS_PSEUDO_SAMPLES + 0.1
    return counts / counts.sum()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_runnable_decides_from_one_pass_and_one_greedy_call(mode: str) -> None:
    server = ScriptedServer()
    model = server.chat_openai().bind_tools([get_weather])
    runnable = TaskCalibratedRunnable(
        model, tool_decision(), calibrator=None, belief="one_pass", n_samples=16
    )
    question = "What's the weather in Paris?"
    if mode == "sync":
        decision = runnable.invoke(question)
    else:
        decision = asyncio.run(runnable.ainvoke(question))

    choice, greedy = server.requests
    assert choice["logprobs"] is True
    assert choice["top_logprobs"] == 20
    assert choice["structured_outputs"] == {
        "choice": [
            "call get_weather()",
            "ask for missing information",
            "no offered tool can do this",
        ]
    }
    assert choice["tool_choice"] == "none"
    assert choice["tools"][0]["function"]["name"] == "get_weather"
    assert choice["temperature"] == 1.0
    assert "call get_weather()" in choice["messages"][0]["content"]  # the instruction
    assert greedy["temperature"] == 0.0
    assert "logprobs" not in greedy and "structured_outputs" not in greedy
    assert "call get_weather()" not in json.dumps(greedy["messages"])
    assert greedy["tools"][0]["function"]["name"] == "get_weather"

    assert decision.belief == "one_pass"
    assert decision.forward_passes == 2
    assert decision.n_samples == 1
    np.testing.assert_allclose(list(decision.probs.values()), _expected_probs())
    # Raw belief, q(tool_call) ≈ 0.69: below a write's bar, so the grounded call is confirmed.
    assert decision.action == "confirm"
    assert decision.message is not None
    assert "get_weather" in str(decision.message.content)


def test_call_options_sharing_a_first_token_need_no_second_pass() -> None:
    server = ScriptedServer()
    model = server.chat_openai().bind_tools([get_weather, get_time])
    runnable = TaskCalibratedRunnable(model, tool_decision(), calibrator=None, belief="one_pass")
    decision = runnable.invoke("What's the weather in Paris?")
    assert decision.forward_passes == 2  # one for the belief, one greedy completion
    np.testing.assert_allclose(list(decision.probs.values()), _expected_probs())


def test_an_ungrounded_greedy_call_reads_as_asking() -> None:
    server = ScriptedServer()
    model = server.chat_openai().bind_tools([get_weather])
    runnable = TaskCalibratedRunnable(model, tool_decision(), calibrator=None, belief="one_pass")
    decision = runnable.invoke("What's the weather like?")  # no city: Paris is invented
    assert decision.n_ungrounded == 1
    # The default grounding relabels an ungrounded call as asking: so does the call mass.
    expected = (np.array([0.0, 0.9, 0.1]) * ONE_PASS_PSEUDO_SAMPLES + 0.1) / 16.3
    np.testing.assert_allclose(list(decision.probs.values()), expected)
    assert decision.action == "request_for_info"


def test_the_middleware_decides_one_pass() -> None:
    from langchain.agents import create_agent

    server = ScriptedServer()
    middleware = TaskCalibrationMiddleware(
        task=tool_decision(), calibrator=None, options=SamplingOptions(belief="one_pass")
    )
    agent = create_agent(server.chat_openai(), tools=[get_weather], middleware=[middleware])
    state = agent.invoke({"messages": [HumanMessage("What's the weather in Paris?")]})
    (decision,) = state["taskcal_decisions"]
    assert decision["belief"] == "one_pass"
    assert decision["forward_passes"] == 2
    assert server.requests[0]["structured_outputs"]["choice"][0] == "call get_weather()"


def test_a_model_without_logprobs_is_refused_by_name() -> None:
    runnable = TaskCalibratedRunnable(
        RecordingChatModel(responses=[]), tool_decision(), calibrator=None, belief="one_pass"
    )
    with pytest.raises(ConfigurationError, match="OpenAI-compatible chat model"):
        runnable.invoke("What's the weather in Paris?")


def test_a_response_without_logprobs_is_a_sampling_error() -> None:
    server = ScriptedServer(logprobs=False)
    model = server.chat_openai().bind_tools([get_weather])
    runnable = TaskCalibratedRunnable(model, tool_decision(), calibrator=None, belief="one_pass")
    with pytest.raises(SamplingError, match="no logprobs"):
        runnable.invoke("What's the weather in Paris?")


def test_one_pass_needs_a_tool_decision_and_no_adaptive_n() -> None:
    from taskcal_agents.decision import answer_or_abstain

    with pytest.raises(ConfigurationError, match="one-pass belief"):
        TaskCalibratedRunnable(
            RecordingChatModel(responses=[]), answer_or_abstain(), calibrator=None,
            belief="one_pass",
        )  # fmt: skip
    with pytest.raises(ConfigurationError, match="one_pass"):
        SamplingOptions.checked("X", belief="one_pass", adaptive=0.1)
    with pytest.raises(ConfigurationError, match="sampling='handler'"):
        TaskCalibrationMiddleware(
            task=tool_decision(), options=SamplingOptions(belief="one_pass"), sampling="handler"
        )


def test_tool_options_are_prefix_free_and_labelled() -> None:
    options = tool_options(tool_decision(), ["get", "get_weather"])
    assert options.options == (
        "call get()",
        "call get_weather()",
        "ask for missing information",
        "no offered tool can do this",
    )
    assert options.labels == ("tool_call", "tool_call", "request_for_info", "cannot_answer")


def test_the_clustered_options_are_the_sampled_calls_then_ask_and_refuse() -> None:
    from taskcal_agents.sampling._one_pass import call_options, one_pass_instruction

    calls = [("get_weather", 'get_weather(city="Paris")'), ("get_time", 'get_time(city="Paris")')]
    options = call_options(tool_decision(), calls)
    assert options.options == ("A", "B", "C", "D")  # one token each: one pass reads them all
    assert options.shown == (
        'get_weather(city="Paris")',
        'get_time(city="Paris")',
        "ask for missing information",
        "no offered tool can do this",
    )
    assert options.labels == ("tool_call", "tool_call", "request_for_info", "cannot_answer")
    instruction = one_pass_instruction(options)
    assert 'A. make exactly this call: get_weather(city="Paris")' in instruction
    assert "C. ask for missing information: a tool fits" in instruction
    with pytest.raises(ConfigurationError, match="distinct"):
        call_options(tool_decision(), [calls[0], calls[0]])


def test_the_belief_is_read_at_the_per_call_temperature() -> None:
    model = ScriptedServer().chat_openai().bind_tools([get_weather])
    runnable = TaskCalibratedRunnable(model, tool_decision(), calibrator=None, belief="one_pass")
    at_one = runnable.invoke("What's the weather in Paris?")
    at_half = runnable.invoke("What's the weather in Paris?", temperature=0.5)
    # p ∝ p_raw^(1/T): at T = 0.5 the leading option gains
    assert at_half.probs["tool_call"] > at_one.probs["tool_call"]
    with pytest.raises(ConfigurationError, match="must be > 0"):
        TaskCalibratedRunnable(model, tool_decision(), belief="one_pass", temperature=0.0)


def test_approved_and_fallback_decisions_say_they_were_one_pass() -> None:
    from langchain_core.messages import AIMessage

    server = ScriptedServer()
    model = server.chat_openai().bind_tools([get_weather])
    runnable = TaskCalibratedRunnable(model, tool_decision(), calibrator=None, belief="one_pass")
    question = [HumanMessage("What's the weather in Paris?")]
    confirm = runnable.invoke(question)
    assert confirm.action == "confirm" and confirm.message is not None
    approved = runnable.invoke([*question, confirm.message, HumanMessage("yes")])
    assert approved.approved and approved.belief == "one_pass"
    assert approved.action == "tool_call"
    failing = ScriptedServer(top={})  # no top token starts an option: a sampling error
    failing_model = failing.chat_openai().bind_tools([get_weather])
    broken = TaskCalibratedRunnable(
        failing_model, tool_decision(), calibrator=None, belief="one_pass"
    )
    with pytest.raises(SamplingError):
        broken.invoke(question)
    assert isinstance(confirm.message, AIMessage)


def test_an_agent_with_a_response_format_is_refused_one_pass() -> None:
    from langchain.agents import create_agent
    from pydantic import BaseModel

    class Answer(BaseModel):
        text: str

    middleware = TaskCalibrationMiddleware(
        task=tool_decision(), calibrator=None, options=SamplingOptions(belief="one_pass")
    )
    agent = create_agent(ScriptedServer().chat_openai(), tools=[get_weather],
                         middleware=[middleware], response_format=Answer)  # fmt: skip
    with pytest.raises(ConfigurationError, match="response_format"):
        agent.invoke({"messages": [HumanMessage("What's the weather in Paris?")]})


def test_the_decision_model_refuses_one_pass() -> None:
    from taskcal_agents.langchain import TaskCalibratedDecisionModel

    with pytest.raises(ConfigurationError, match="belief='samples'"):
        TaskCalibratedDecisionModel(chat_model=RecordingChatModel(responses=[]), belief="one_pass")


class SlowServer(ScriptedServer):
    """The scripted server, each request held for a moment, counting those in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.in_flight = 0
        self.most_in_flight = 0

    def _enter(self) -> None:
        with self.lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self.lock:
            self.in_flight -= 1

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self._enter()
        time.sleep(0.05)
        self._leave()
        return super().__call__(request)

    async def handle_async(self, request: httpx.Request) -> httpx.Response:
        self._enter()
        await asyncio.sleep(0.05)
        self._leave()
        return super().__call__(request)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_one_pass_batch_decides_its_inputs_concurrently(mode: str) -> None:
    questions = [f"What's the weather in Paris? ({i})" for i in range(4)]

    def run(max_concurrency: int | None) -> tuple[list[Any], int]:
        server = SlowServer()
        runnable = TaskCalibratedRunnable(
            server.chat_openai().bind_tools([get_weather]), tool_decision(), calibrator=None,
            belief="one_pass",
        )  # fmt: skip
        config: dict[str, Any] = {"max_concurrency": max_concurrency}
        if mode == "sync":
            decisions = runnable.batch(questions, config)  # type: ignore[arg-type]
        else:
            decisions = asyncio.run(runnable.abatch(questions, config))  # type: ignore[arg-type]
        assert len(server.requests) == 2 * len(questions)  # a choice and a greedy call each
        return decisions, server.most_in_flight

    decisions, most = run(None)
    assert most > 1
    assert [d.belief for d in decisions] == ["one_pass"] * 4
    assert all(d.forward_passes == 2 for d in decisions)
    np.testing.assert_allclose([list(d.probs.values()) for d in decisions],
                               [_expected_probs()] * 4)  # fmt: skip
    assert run(1)[1] == 1  # max_concurrency bounds the model calls
