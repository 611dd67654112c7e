"""Sampling a ChatOpenAI-compatible model at temperature 0 (greedy): N requests of one.

vLLM refuses ``n`` > 1 under greedy sampling (HTTP 400, "n must be 1 when using greedy
sampling"), so with ``use_n=None`` a model that samples at temperature 0 — the call's
temperature, else the bound one, else the model's own — gets N requests without ``n``;
``use_n=True`` still sends one request with ``n``.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from langchain_openai import ChatOpenAI

from taskcal_agents.decision import _presets as tasks
from taskcal_agents.errors import SamplingError
from taskcal_agents.langchain._runnable import TaskCalibratedRunnable
from taskcal_agents.sampling import asample_messages, sample_messages
from taskcal_agents.testing import FakeOpenAIServer as LoopbackOpenAIServer
from tests.unit_tests.taskcal_agents.helpers.chat_fakes import (
    FakeOpenAIServer,
    get_weather,
    run_async,
)

N = 4


class GreedyRefusingServer(FakeOpenAIServer):
    """Answers as vLLM does: HTTP 400 for ``n`` > 1 at a temperature below 1e-5."""

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        n = body.get("n", 1)
        if body.get("temperature", 1.0) < 1e-5 and n > 1:
            self.requests.append(body)
            error = {"message": f"n must be 1 when using greedy sampling, got {n}.", "code": 400}
            return httpx.Response(400, json={"error": error})
        return super().__call__(request)


def n_of(body: dict[str, Any]) -> int:
    return int(body.get("n") or 1)  # an absent n is 1


@pytest.mark.parametrize(
    ("model_kwargs", "bound", "call"),
    [
        ({}, {}, {"temperature": 0.0}),  # the call's
        ({}, {"temperature": 0}, {}),  # the bound one
        ({"temperature": 0.0}, {}, {}),  # the model's own
        ({"temperature": 0.9}, {"temperature": 0.9}, {"temperature": 0.0}),  # the call's wins
    ],
)
def test_greedy_sampling_sends_n_requests_of_one(
    model_kwargs: dict[str, Any], bound: dict[str, Any], call: dict[str, Any]
) -> None:
    server = GreedyRefusingServer()
    model = server.chat_openai(**model_kwargs).bind_tools([get_weather])
    if bound:
        model = model.bind(**bound)
    samples = sample_messages(model, "weather?", n=N, **call)
    assert len(samples) == N
    assert len(server.requests) == N
    assert all(n_of(r) == 1 and r["temperature"] == 0 for r in server.requests)
    assert all(
        [t["function"]["name"] for t in r["tools"]] == ["get_weather"] for r in server.requests
    )


def test_a_call_temperature_above_zero_sends_one_request_with_n() -> None:
    server = GreedyRefusingServer()
    model = server.chat_openai(temperature=0.0).bind(temperature=0)
    samples = sample_messages(model, "hi", n=N, temperature=0.7)
    assert len(samples) == N
    assert [(r["n"], r["temperature"]) for r in server.requests] == [(N, 0.7)]


def test_an_unknown_temperature_sends_one_request_with_n() -> None:
    # No temperature anywhere: the server's default, not known to be greedy.
    server = GreedyRefusingServer()
    assert len(sample_messages(server.chat_openai(), "hi", n=N)) == N
    assert [r["n"] for r in server.requests] == [N]
    assert "temperature" not in server.requests[0]


def test_one_sample_at_temperature_0_is_one_request() -> None:
    server = GreedyRefusingServer()
    assert len(sample_messages(server.chat_openai(), "hi", n=1, temperature=0.0)) == 1
    assert len(server.requests) == 1


def test_use_n_true_still_forces_one_request_at_temperature_0() -> None:
    server = GreedyRefusingServer()
    with pytest.raises(SamplingError, match=r"HTTP 400: n must be 1 when using greedy sampling"):
        sample_messages(server.chat_openai(), "hi", n=N, temperature=0.0, use_n=True)
    assert [r["n"] for r in server.requests] == [N]


@run_async
async def test_async_greedy_sampling_sends_n_requests_of_one() -> None:
    server = GreedyRefusingServer()
    samples = await asample_messages(server.chat_openai(temperature=0.0), "hi", n=N)
    assert len(samples) == N
    assert [n_of(r) for r in server.requests] == [1] * N


@pytest.mark.parametrize("runnable_temperature", [0.0, None])
def test_runnable_over_a_greedy_model(runnable_temperature: float | None) -> None:
    """The reported failure: TaskCalibratedRunnable over ChatOpenAI(temperature=0)."""
    server = GreedyRefusingServer()
    model = server.chat_openai(temperature=0.0).bind_tools([get_weather])
    runnable = TaskCalibratedRunnable(
        model, tasks.tool_decision(), n_samples=N, temperature=runnable_temperature
    )
    decision = runnable.invoke("What's the weather in Paris?")
    assert decision.n_samples == N
    assert [n_of(r) for r in server.requests] == [1] * N


def test_runnable_sampling_above_zero_over_a_greedy_model_is_one_request() -> None:
    server = GreedyRefusingServer()
    model = server.chat_openai(temperature=0.0).bind_tools([get_weather])
    runnable = TaskCalibratedRunnable(model, tasks.tool_decision(), n_samples=N, temperature=0.7)
    runnable.invoke("What's the weather in Paris?")
    assert [(r["n"], r["temperature"]) for r in server.requests] == [(N, 0.7)]


def test_over_http_every_greedy_request_has_n_1(fake_openai: LoopbackOpenAIServer) -> None:
    """The same against the loopback FakeOpenAIServer, through a real HTTP client."""
    chat = ChatOpenAI(
        model="fake-model", base_url=fake_openai.base_url, api_key="EMPTY",  # type: ignore[arg-type]
        temperature=0.0, max_retries=0,
    )  # fmt: skip
    runnable = TaskCalibratedRunnable(
        chat.bind_tools([get_weather]), tasks.tool_decision(), n_samples=N, temperature=None
    )
    decision = runnable.invoke("What's the weather in Paris?")
    assert decision.action == "tool_call"
    assert fake_openai.requests == N
    assert [n_of(p) for p in fake_openai.payloads] == [1] * N
    assert all(p["temperature"] == 0 for p in fake_openai.payloads)
