"""The one sampling interface: the Sampler protocol, its adapters, the sans-IO drivers,
and the OpenAISampler's client ownership and closed state."""

from __future__ import annotations

import ast
import asyncio
import gc
import inspect
import sys
import threading
import time
from collections.abc import Generator, Iterator
from typing import Any

import httpx
import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage

from taskcal_agents.parsing import _answer_clusters as answer_clusters
from taskcal_agents.parsing import _entailment
from taskcal_agents.sampling import ChatModelSampler, OpenAISampler, Sampler
from taskcal_agents.sampling._choices import choice_message
from taskcal_agents.sampling._drive import adrive, drive
from taskcal_agents.sampling._offline import OfflineSampler, completion_to_message
from taskcal_agents.testing._fake_openai import FakeOpenAIServer

BASE_URL = "http://fake-vllm.test/v1"
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'


def _reply(request: httpx.Request) -> httpx.Response:
    body = {
        "id": "cmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "ok"},
                "finish_reason": "stop",
            }
        ],
    }
    return httpx.Response(200, json=body)


# ------------------------------------------------------------------- protocol and adapters


def test_every_adapter_is_a_sampler() -> None:
    adapters = [
        ChatModelSampler(FakeListChatModel(responses=["a"])),
        OpenAISampler(BASE_URL, "m"),
        OfflineSampler("unused-model"),
    ]
    for adapter in adapters:
        assert isinstance(adapter, Sampler), type(adapter).__name__
    assert not isinstance(object(), Sampler)


def test_chat_model_sampler_draws_the_same_sync_and_async() -> None:
    sampler = ChatModelSampler(FakeListChatModel(responses=["a", "b", "c"]))

    sync = sampler.sample("hi", n=3)
    async_ = asyncio.run(
        ChatModelSampler(FakeListChatModel(responses=["a", "b", "c"])).asample("hi", n=3)
    )

    assert sorted(m.content for m in sync) == ["a", "b", "c"]
    assert sorted(m.content for m in async_) == ["a", "b", "c"]
    assert all(isinstance(m, AIMessage) for m in sync + async_)


def test_offline_and_server_choices_get_the_same_treatment() -> None:
    offline = completion_to_message(
        f"Let me check.\n{CALL}", finish_reason="stop", index=0, request_id="r", parse_tools=True
    )
    served = choice_message(f"Let me check.\n{CALL}", finish_reason="stop", read_content=True)

    assert offline.tool_calls == served.tool_calls
    assert offline.tool_calls[0]["args"] == {"city": "Paris"}
    assert offline.content == served.content == "Let me check."
    assert offline.response_metadata["finish_reason"] == "tool_calls"
    assert served.response_metadata["finish_reason"] == "tool_calls"


def test_a_server_call_wins_over_the_content_and_keeps_its_finish_reason() -> None:
    raw = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}

    message = choice_message(CALL, finish_reason="stop", raw_tool_calls=[raw], read_content=True)

    assert [c["name"] for c in message.tool_calls] == ["f"]
    assert message.content == CALL
    assert message.response_metadata["finish_reason"] == "stop"


@pytest.mark.parametrize("module", [answer_clusters, _entailment])
def test_answer_clusters_imports_nothing_from_sampling(module: Any) -> None:
    """The clustering and its judge (which calls a sampler) stay below the sampling package."""
    tree = ast.parse(inspect.getsource(module))
    imported = [
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module is not None
    ] + [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    ]
    assert not [name for name in imported if name.startswith("taskcal_agents.sampling")]


# ------------------------------------------------------------------------------ the drivers


def _protocol() -> Generator[int, int, list[Any]]:
    """Asks for 1 and 2; a failure of 2 is caught and answered with -1."""
    first = yield 1
    try:
        second = yield 2
    except KeyError:
        second = -1
    return [first, second]


def _call(request: int) -> int:
    if request == 2:
        raise KeyError(request)
    return request * 10


async def _acall(request: int) -> int:
    return _call(request)


def test_drivers_send_responses_and_throw_errors_into_the_protocol() -> None:
    assert drive(_protocol(), _call) == [10, -1]
    assert asyncio.run(adrive(_protocol(), _acall)) == [10, -1]


def test_drivers_pass_on_an_error_the_protocol_does_not_handle() -> None:
    def failing(request: int) -> int:
        raise ValueError(f"no {request}")

    async def afailing(request: int) -> int:
        return failing(request)

    with pytest.raises(ValueError, match=r"^no 1$"):
        drive(_protocol(), failing)
    with pytest.raises(ValueError, match=r"^no 1$"):
        asyncio.run(adrive(_protocol(), afailing))


# --------------------------------------------------------- OpenAISampler: clients and state


def test_a_handed_http_client_stays_open_after_close() -> None:
    http_client = httpx.Client(transport=httpx.MockTransport(_reply))
    with OpenAISampler(BASE_URL, "m", http_client=http_client) as sampler:
        assert sampler.sample("hi")[0].content == "ok"

    assert not http_client.is_closed
    assert http_client.post(f"{BASE_URL}/chat/completions", json={}).status_code == 200
    http_client.close()


def test_a_handed_async_http_client_stays_open_after_aclose() -> None:
    async def run() -> httpx.AsyncClient:
        http_client = httpx.AsyncClient(transport=httpx.MockTransport(_reply))
        async with OpenAISampler(BASE_URL, "m", async_http_client=http_client) as sampler:
            assert (await sampler.asample("hi"))[0].content == "ok"
        assert not http_client.is_closed
        await http_client.aclose()
        return http_client

    assert asyncio.run(run()).is_closed


def test_the_samplers_own_client_is_closed() -> None:
    sampler = OpenAISampler(BASE_URL, "m")
    client = sampler.client

    sampler.close()

    assert client.is_closed()
    assert sampler.closed


CLOSED = (
    r"^OpenAISampler\.{name}: the sampler is closed; create a new OpenAISampler \(for "
    r"example OpenAISampler\('http://fake-vllm\.test/v1', 'm'\)\)\.$"
)


def test_a_closed_sampler_refuses_to_sample() -> None:
    http_client = httpx.Client(transport=httpx.MockTransport(_reply))
    sampler = OpenAISampler(BASE_URL, "m", http_client=http_client)
    sampler.sample("hi")
    sampler.close()

    with pytest.raises(RuntimeError, match=CLOSED.format(name="sample")):
        sampler.sample("hi")
    with pytest.raises(RuntimeError, match=CLOSED.format(name="client")):
        _ = sampler.client
    with pytest.raises(RuntimeError, match=CLOSED.format(name="asample")):
        asyncio.run(sampler.asample("hi"))
    with pytest.raises(RuntimeError, match=CLOSED.format(name="async_client")):
        _ = sampler.async_client
    http_client.close()


def test_a_sampler_closed_async_refuses_both_paths() -> None:
    async def run() -> OpenAISampler:
        async with OpenAISampler(BASE_URL, "m") as sampler:
            _ = sampler.async_client
        return sampler

    sampler = asyncio.run(run())

    with pytest.raises(RuntimeError, match=CLOSED.format(name="asample")):
        asyncio.run(sampler.asample("hi"))
    with pytest.raises(RuntimeError, match=CLOSED.format(name="sample")):
        sampler.sample("hi")


# ----------------------------------------- OpenAISampler: closed while requests are in flight


@pytest.fixture
def unraisable(monkeypatch: pytest.MonkeyPatch, loopback: None) -> Iterator[list[str]]:
    """What the garbage collector could not raise (an unclosed socket's ResourceWarning)."""
    seen: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda hook: seen.append(repr(hook.exc_value)))
    yield seen


def _wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def test_close_lets_requests_in_flight_finish_then_closes_their_connections(
    unraisable: list[str],
) -> None:
    # run_sampling stops after too many failures without waiting for the requests in flight,
    # and `taskcal sample` then closes the sampler: those requests must still finish.
    with FakeOpenAIServer(latency=2.0) as server:  # wide enough for a loaded machine
        sampler = OpenAISampler(server.base_url, "fake-model", max_retries=0, timeout=30)
        client = sampler.client
        replies: list[Any] = []

        def one() -> None:
            try:
                replies.append(sampler.sample("hi", n=2)[0].content)
            except Exception as exc:  # a test thread: record, the assert below reports it
                replies.append(exc)

        threads = [threading.Thread(target=one) for _ in range(4)]
        for thread in threads:
            thread.start()
        _wait_for(lambda: server.in_flight == 4, "the 4 requests never reached the server")
        sampler.close()
        assert sampler.closed and not client.is_closed()  # 4 requests still use it
        for thread in threads:
            thread.join(timeout=30)
        gc.collect()

    assert [type(reply) for reply in replies] == [str] * 4, replies
    assert client.is_closed()  # the last request closed it
    assert unraisable == []


def _sample_until_refused(sampler: OpenAISampler, refused: list[Exception]) -> None:
    while True:
        try:
            sampler.sample("hi")
        except RuntimeError as exc:  # the sampler is closed
            refused.append(exc)
            return


def test_closing_during_a_stream_of_requests_leaks_no_socket(unraisable: list[str]) -> None:
    # Threads sample until the sampler refuses; close lands while requests are being sent.
    # httpx's own close leaks the socket a racing request opens (8 in 8 rounds before).
    with FakeOpenAIServer(latency=0.02) as server:
        for _ in range(8):
            sampler = OpenAISampler(server.base_url, "fake-model", max_retries=0, timeout=10)
            client = sampler.client
            start = server.requests
            refused: list[Exception] = []
            threads = [
                threading.Thread(target=_sample_until_refused, args=(sampler, refused))
                for _ in range(4)
            ]
            for thread in threads:
                thread.start()
            _wait_for(lambda n=start + 8: server.requests >= n, "the requests did not arrive")
            sampler.close()
            for thread in threads:
                thread.join(timeout=10)
            assert len(refused) == 4 and all("is closed" in str(exc) for exc in refused)
            assert client.is_closed()
        gc.collect()

    assert unraisable == []


def test_aclose_lets_async_requests_in_flight_finish(unraisable: list[str]) -> None:
    async def run(server: FakeOpenAIServer) -> tuple[list[Any], Any]:
        sampler = OpenAISampler(server.base_url, "fake-model", max_retries=0, timeout=30)
        client = sampler.async_client
        tasks = [asyncio.create_task(sampler.asample("hi")) for _ in range(3)]
        deadline = time.monotonic() + 10
        while server.in_flight < 3:
            assert time.monotonic() < deadline, "the 3 requests never reached the server"
            await asyncio.sleep(0.005)
        await sampler.aclose()
        assert not client.is_closed()
        replies = await asyncio.gather(*tasks, return_exceptions=True)
        return replies, client

    with FakeOpenAIServer(latency=2.0) as server:
        replies, client = asyncio.run(run(server))
        gc.collect()

    assert [type(reply) for reply in replies] == [list] * 3, replies
    assert client.is_closed()
    assert unraisable == []
