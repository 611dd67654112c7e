"""Faults of an OpenAI-compatible server, over real HTTP on 127.0.0.1 (the fake server).

500s, 429s with ``Retry-After``, bodies cut short, stalls and connection resets, against
:class:`OpenAISampler` and against the Runnable over ``ChatOpenAI``: retried with backoff
where the client's ``max_retries`` allows, then one clear error naming the URL
(:class:`ServerError`), never a ``JSONDecodeError`` traceback and never a hang.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from langchain_openai import ChatOpenAI

from taskcal_agents import TaskCalibratedRunnable, tasks
from taskcal_agents.errors import (
    ConfigurationError,
    SamplingError,
    SamplingServerError,
    ServerError,
)
from taskcal_agents.sampling import OpenAISampler
from taskcal_agents.testing import FakeOpenAIServer, start_process

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


_SAMPLERS: list[OpenAISampler] = []


@pytest.fixture(autouse=True)
def _close_samplers() -> Iterator[None]:
    """Close every sampler a test made with :func:`sampler` (no socket left open)."""
    yield
    while _SAMPLERS:
        _SAMPLERS.pop().close()


def sampler(server: FakeOpenAIServer, **kwargs: Any) -> OpenAISampler:
    made = OpenAISampler(server.base_url, server.model, **{"timeout": 5.0, **kwargs})
    _SAMPLERS.append(made)
    return made


def chat(server: FakeOpenAIServer, **kwargs: Any) -> ChatOpenAI:
    params: dict[str, Any] = {"max_retries": 0, "timeout": 5.0}
    return ChatOpenAI(
        base_url=server.base_url, model=server.model, api_key="EMPTY", **(params | kwargs)
    )


def runnable(server: FakeOpenAIServer, **kwargs: Any) -> TaskCalibratedRunnable:
    model = chat(server, **kwargs.pop("chat", {})).bind_tools([WEATHER])
    return TaskCalibratedRunnable(model, tasks.tool_decision(), n_samples=4, **kwargs)


# -- the fake server itself ----------------------------------------------------------------


def test_fake_server_answers_n_choices_the_tool_parser_reads(
    fake_openai: FakeOpenAIServer,
) -> None:
    messages = sampler(fake_openai, max_retries=0).sample("weather in Paris?", n=3, tools=[WEATHER])
    assert [m.tool_calls[0]["args"] for m in messages] == [{"city": "Paris"}] * 3
    assert fake_openai.requests == 1
    assert fake_openai.payloads[-1]["n"] == 3
    decision = runnable(fake_openai).invoke("weather in Paris?")
    assert (decision.action, decision.fallback) == ("tool_call", False)


def test_fake_server_refuses_unknown_faults() -> None:
    with pytest.raises(ValueError, match=r"unknown faults \['teapot'\]"):
        FakeOpenAIServer().fail("teapot")


def _post_at_once(base_url: str, count: int) -> float:
    """*count* chat completions from as many threads at once: seconds until all answered."""
    body = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}
    barrier = threading.Barrier(count)

    def post(_: int) -> int:
        barrier.wait()
        return httpx.post(f"{base_url}/chat/completions", json=body, timeout=30.0).status_code

    start = time.perf_counter()
    with ThreadPoolExecutor(count) as pool:
        statuses = list(pool.map(post, range(count)))
    assert statuses == [200] * count
    return time.perf_counter() - start


@pytest.mark.parametrize("capacity", [1, 2, None], ids=["capacity-1", "capacity-2", "unlimited"])
def test_fake_server_serves_at_most_capacity_requests_at_once(
    loopback: None, capacity: int | None
) -> None:
    latency = 0.25
    with FakeOpenAIServer(latency=latency, capacity=capacity) as server:
        took = _post_at_once(server.base_url, 4)
    assert server.requests == 4
    assert server.in_flight == 0
    if capacity is None:  # the control: without a capacity they overlap
        assert server.max_in_flight >= 2
    else:
        assert server.max_in_flight == capacity
        rounds = 4 // capacity  # served one round of `capacity` requests after another
        assert took >= 0.95 * rounds * latency


def test_fake_server_capacity_does_not_limit_health_checks(loopback: None) -> None:
    with FakeOpenAIServer(capacity=1, stall=10.0) as server:
        server.fail("stall")  # holds the only slot for 10 s
        with ThreadPoolExecutor(1) as pool:
            stalled = pool.submit(_post_at_once, server.base_url, 1)
            deadline = time.monotonic() + 5
            while server.in_flight < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert server.in_flight == 1
            assert (
                httpx.get(f"http://127.0.0.1:{server.port}/health", timeout=3.0).status_code == 200
            )
            server.stop()  # releases the stall: the client sees the connection closed
            with pytest.raises(httpx.HTTPError):
                stalled.result(timeout=10)


@pytest.mark.parametrize("capacity", [0, -1, 1.5, True, "2"])
def test_fake_server_refuses_a_capacity_below_one(capacity: Any) -> None:
    msg = "FakeOpenAIServer parameter 'capacity' must be an integer >= 1"
    with pytest.raises(ValueError, match=re.escape(msg)):
        FakeOpenAIServer(capacity=capacity)


def test_fake_server_process_takes_a_capacity(loopback: None) -> None:
    latency = 0.25
    process, base_url = start_process(latency=latency, capacity=1)
    try:
        took = _post_at_once(base_url, 3)
    finally:
        process.kill()
        process.wait()
    assert took >= 0.95 * 3 * latency  # one after another


# -- OpenAISampler -------------------------------------------------------------------------


def test_429_retry_after_is_honoured_then_the_request_succeeds(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.retry_after = 1.0
    fake_openai.fail("429")
    start = time.monotonic()
    messages = sampler(fake_openai, max_retries=1).sample("hi", n=2)
    assert len(messages) == 2
    assert fake_openai.requests == 2
    assert time.monotonic() - start >= 0.95  # waited the server's Retry-After, not 0.5 s


def test_429_beyond_openais_retry_after_cap_fails_at_once(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.retry_after = 600.0
    fake_openai.fail("429")
    start = time.monotonic()
    with pytest.raises(ServerError, match=r"is rate limiting \(HTTP 429\): injected rate limit"):
        sampler(fake_openai, max_retries=3).sample("hi")
    assert time.monotonic() - start < 3.0
    assert fake_openai.requests == 1


def test_500s_are_retried_with_backoff_then_a_server_error_names_the_url(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.fault = "500"
    start = time.monotonic()
    expected = (
        f"OpenAISampler: the server at '{fake_openai.base_url}' failed with HTTP 500: "
        "injected internal server error"
    )
    with pytest.raises(SamplingServerError, match=re.escape(expected)) as info:
        sampler(fake_openai, max_retries=2).sample("hi")
    assert isinstance(info.value, SamplingError) and isinstance(info.value, ServerError)
    assert fake_openai.requests == 3
    assert time.monotonic() - start >= 0.5 * 0.75 + 1.0 * 0.75  # backoff 0.5 s, 1 s (jitter)


def test_500_then_success_recovers(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.fail("500", "reset")
    assert len(sampler(fake_openai, max_retries=2).sample("hi", n=2)) == 2
    assert fake_openai.requests == 3


def test_truncated_json_is_a_server_error_not_a_json_traceback(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.fail("truncated")
    pattern = (
        rf"OpenAISampler: the server at '{re.escape(fake_openai.base_url)}' answered with a "
        r"body that is not valid JSON \(cut short\?\): .+; check the server \(or a proxy in "
        r"between\) and retry\."
    )
    with pytest.raises(ServerError, match=pattern):
        sampler(fake_openai).sample("hi")


def test_connection_reset_is_a_server_error(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.fault = "reset"
    expected = f"OpenAISampler: could not reach the server at '{fake_openai.base_url}' ("
    with pytest.raises(ServerError, match=re.escape(expected)):
        sampler(fake_openai, max_retries=1).sample("hi")
    assert fake_openai.requests == 2


def test_a_stall_ends_at_the_request_timeout(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.fault = "stall"
    start = time.monotonic()
    expected = f"OpenAISampler: the server at '{fake_openai.base_url}' did not answer in time"
    with pytest.raises(ServerError, match=re.escape(expected)):
        sampler(fake_openai, timeout=0.5, max_retries=0).sample("hi")
    assert 0.4 < time.monotonic() - start < 3.0


def test_async_faults_end_in_the_same_errors(fake_openai: FakeOpenAIServer) -> None:
    async def run() -> None:
        async with sampler(fake_openai, timeout=0.5, max_retries=0) as s:
            fake_openai.fail("stall")
            with pytest.raises(ServerError, match=r"did not answer in time"):
                await s.asample("hi")
            fake_openai.fail("truncated")
            with pytest.raises(ServerError, match=r"body that is not valid JSON"):
                await s.asample("hi")
            assert len(await s.asample("hi", n=2)) == 2

    asyncio.run(run())


@pytest.mark.parametrize("timeout", [None, float("inf"), 0, -1.0])
def test_sampler_timeout_must_be_finite(timeout: Any) -> None:
    expected = (
        "OpenAISampler parameter 'timeout' must be a finite number of seconds > 0 (no "
        f"request may hang forever), got {timeout!r}."
    )
    with pytest.raises(ConfigurationError, match=re.escape(expected)):
        OpenAISampler("http://127.0.0.1:1/v1", "m", timeout=timeout)


# -- the Runnable over ChatOpenAI ----------------------------------------------------------


def test_dead_server_raise_gives_a_server_error_naming_the_url(loopback: None) -> None:
    server = FakeOpenAIServer().start()
    server.stop()  # the port is closed: the server died
    expected = (
        "TaskCalibratedRunnable could not sample 4 completions from _ChatModelBinding after 1 "
        f"attempt(s): SamplingServerError: ChatOpenAI: could not reach the server at "
        f"'{server.base_url}' (Connection error.); is it running?; raise max_retries or pass "
        "on_error='fallback' to take the task's fallback action instead."
    )
    with pytest.raises(ServerError, match=re.escape(expected)):
        runnable(server).invoke("weather?")
    # raised while sampling: a SamplingError too, as the front doors document
    with pytest.raises(SamplingError, match=re.escape(expected)):
        asyncio.run(runnable(server).ainvoke("weather?"))


def test_dead_server_fallback_gives_the_declared_fallback_flagged(loopback: None) -> None:
    server = FakeOpenAIServer().start()
    server.stop()
    r = runnable(server, on_error="fallback")
    for decision in (r.invoke("weather?"), asyncio.run(r.ainvoke("weather?"))):
        assert decision.fallback is True
        assert decision.action == r.task.fallback_action == "request_for_info"
        assert decision.fallback_reason is not None
        assert server.base_url in decision.fallback_reason


def test_server_dying_mid_batch_falls_back_per_input(fake_openai: FakeOpenAIServer) -> None:
    r = runnable(fake_openai, on_error="fallback")
    first = r.batch(["a", "b"], config={"max_concurrency": 1})
    fake_openai.stop()
    second = r.batch(["c", "d"], config={"max_concurrency": 1})
    assert [d.fallback for d in first] == [False, False]
    assert [d.fallback for d in second] == [True, True]


def test_runnable_retries_through_chat_openai_retries(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.fail("500", "429")
    fake_openai.retry_after = 0.2
    decision = runnable(fake_openai, chat={"max_retries": 2}).invoke("weather?")
    assert (decision.action, decision.fallback) == ("tool_call", False)
    assert fake_openai.requests == 3


def test_runnable_stall_ends_at_the_request_timeout(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.fault = "stall"
    start = time.monotonic()
    with pytest.raises(ServerError, match=r"ChatOpenAI: the server at .+ did not answer in time"):
        runnable(fake_openai, chat={"timeout": 0.5}).invoke("weather?")
    assert time.monotonic() - start < 3.0


def test_runnable_truncated_json_is_a_server_error(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.fault = "truncated"
    with pytest.raises(ServerError, match=r"answered with a body that is not valid JSON"):
        runnable(fake_openai).invoke("weather?")
    decision = runnable(fake_openai, on_error="fallback").invoke("weather?")
    assert decision.fallback is True
    assert "not valid JSON" in (decision.fallback_reason or "")


def test_clients_built_by_the_package_have_a_finite_timeout(fake_openai: Any) -> None:
    from taskcal_agents._endpoint import REQUEST_TIMEOUT_S
    from taskcal_agents.sampling import OpenAISampler
    from taskcal_agents.serving import ExternalServer

    server = ExternalServer.connect(fake_openai.base_url, fake_openai.model)
    assert server.chat_model().request_timeout == REQUEST_TIMEOUT_S
    assert server.chat_model(timeout=5).request_timeout == 5  # the caller's choice wins
    sampler = OpenAISampler.from_endpoint(server.endpoint)
    assert sampler.timeout == REQUEST_TIMEOUT_S
    sampler.close()


def test_default_sampler_retries_a_dropped_connection(fake_openai: FakeOpenAIServer) -> None:
    # A server that drops a kept-alive connection must not fail an item: sampling is safe
    # to retry, and the default retries do (seen live: one item of a rerun failed without).
    fake_openai.fail("reset")
    assert len(sampler(fake_openai).sample("hi", n=2)) == 2
    assert fake_openai.requests == 2
