from __future__ import annotations

import asyncio
import json
import re

import httpx
import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.prompt_values import ChatPromptValue
from langchain_core.runnables import RunnableLambda
from langchain_core.tracers.context import collect_runs
from langchain_openai import ChatOpenAI
from pydantic import ValidationError

from taskcal_agents.decision import _presets as tasks
from taskcal_agents.errors import ConfigurationError, SamplingError
from taskcal_agents.sampling import (
    asample_batch,
    asample_messages,
    chat_model_of,
    sample_batch,
    sample_messages,
    unwrap_binding,
)
from taskcal_agents.sampling._chat_models import supports_n
from taskcal_agents.sampling._messages import to_messages
from tests.unit_tests.taskcal_agents.helpers.chat_fakes import (
    WEATHER_SCHEMA,
    FakeOpenAIServer,
    RecordingChatModel,
    completion,
    get_weather,
    openai_choice,
    run_async,
    tool_call_message,
)

# ------------------------------------------------------------------------- helpers


def test_to_messages() -> None:
    assert to_messages("hi") == [HumanMessage(content="hi")]
    assert to_messages([("system", "s"), ("human", "h")]) == [
        SystemMessage(content="s"),
        HumanMessage(content="h"),
    ]
    value = ChatPromptValue(messages=[HumanMessage(content="x")])
    assert to_messages(value) == [HumanMessage(content="x")]


def test_unwrap_and_supports_n() -> None:
    server = FakeOpenAIServer()
    chat = server.chat_openai()
    bound = chat.bind_tools([get_weather]).bind(stop=["x"]).with_config(tags=["t"])
    core, kwargs, configs, factories = unwrap_binding(bound)
    assert core is chat
    assert set(kwargs) == {"tools", "stop"}
    assert {"tags": ["t"]} in configs
    assert factories is False
    assert chat_model_of(bound) is chat
    assert supports_n(bound) and supports_n(chat)
    assert not supports_n(ChatOpenAI(model="m", api_key="x", use_responses_api=True))  # type: ignore[arg-type]
    fake = RecordingChatModel(responses=["a"])
    assert chat_model_of(fake.bind(x=1)) is fake
    assert not supports_n(fake)
    assert chat_model_of(RunnableLambda(lambda x: x)) is None


# ------------------------------------------------------------------ ChatOpenAI: n


def test_chat_openai_one_request_with_n_keeps_tools() -> None:
    server = FakeOpenAIServer()
    chat = server.chat_openai(temperature=0.0)
    model = chat.bind_tools([get_weather])
    samples = sample_messages(model, "weather?", n=6, temperature=0.7, seed=3)
    assert len(server.requests) == 1
    body = server.requests[0]
    assert body["n"] == 6
    assert body["temperature"] == 0.7
    assert body["seed"] == 3
    assert body["stream"] is False
    assert [t["function"]["name"] for t in body["tools"]] == ["get_weather"]
    assert len(samples) == 6
    assert samples[0].tool_calls[0]["args"] == {"city": "Paris"}
    assert samples[1].content == "Which city?"
    assert chat.temperature == 0.0  # the caller's model is untouched
    assert chat.n is None


def test_chat_openai_invoke_with_n_returns_only_first_choice() -> None:
    # Why sample_messages uses generate(): invoke drops all choices but the first.
    server = FakeOpenAIServer()
    out = server.chat_openai(n=4).invoke("hi")
    assert server.requests[0]["n"] == 4
    assert isinstance(out, AIMessage)


@run_async
async def test_chat_openai_async_one_request() -> None:
    server = FakeOpenAIServer()
    samples = await asample_messages(server.chat_openai(), "hi", n=4, temperature=1.0)
    assert len(samples) == 4
    assert [r["n"] for r in server.requests] == [4]


def test_chat_openai_top_up_when_server_returns_fewer() -> None:
    server = FakeOpenAIServer(max_choices=3)
    samples = sample_messages(server.chat_openai(), "hi", n=7)
    assert len(samples) == 7
    assert [r["n"] for r in server.requests] == [7, 4, 1]


def test_chat_openai_server_ignoring_n() -> None:
    server = FakeOpenAIServer(max_choices=0)
    with pytest.raises(
        SamplingError,
        match=re.escape(
            "ChatOpenAI returned 0 of the 2 requested choices after 4 requests; check that the "
            "server supports the 'n' parameter or pass use_n=False."
        ),
    ):
        sample_messages(server.chat_openai(), "hi", n=2)


def test_chat_openai_use_n_false_makes_n_calls() -> None:
    server = FakeOpenAIServer()
    samples = sample_messages(server.chat_openai(), "hi", n=3, use_n=False, temperature=0.5)
    assert len(samples) == 3
    assert len(server.requests) == 3
    assert all("n" not in r and r["temperature"] == 0.5 for r in server.requests)


def test_chat_openai_child_run_is_one_llm_run() -> None:
    server = FakeOpenAIServer()
    with collect_runs() as cb:
        sample_messages(server.chat_openai(), "hi", n=5, config={"tags": ["x"]})
    assert len(cb.traced_runs) == 1
    run = cb.traced_runs[0]
    assert run.run_type == "llm"
    assert "x" in (run.tags or [])
    assert len(run.outputs["generations"][0]) == 5


def test_chat_openai_many_inputs() -> None:
    server = FakeOpenAIServer()
    results = sample_batch(
        server.chat_openai(), ["a", "b", "c"], n=2, config={"max_concurrency": 2}
    )
    assert [len(r) for r in results] == [2, 2, 2]  # type: ignore[arg-type]
    assert len(server.requests) == 3


# ----------------------------------------------------------- generic: N calls


def test_generic_model_n_concurrent_calls_with_temperature() -> None:
    model = RecordingChatModel(responses=["a", "b", "c"])
    samples = sample_messages(model, "hi", n=3, temperature=0.3)
    assert sorted(str(s.content) for s in samples) == ["a", "b", "c"]
    assert [c.get("temperature") for c in model.calls] == [0.3, 0.3, 0.3]
    assert all("n" not in c for c in model.calls)


def test_generic_model_without_temperature_passes_nothing() -> None:
    model = RecordingChatModel(responses=["a"])
    sample_messages(model, "hi", n=2)
    assert model.calls == [{}, {}]


def test_seed_differs_per_sample() -> None:
    model = RecordingChatModel(responses=["a"])
    sample_messages(model, "hi", n=4, seed=10)
    assert sorted(c["seed"] for c in model.calls) == [10, 11, 12, 13]


@run_async
async def test_seed_differs_per_sample_async() -> None:
    model = RecordingChatModel(responses=["a"])
    await asample_messages(model, "hi", n=3, seed=0, temperature=1.0)
    assert sorted(c["seed"] for c in model.calls) == [0, 1, 2]


def test_bound_kwargs_are_kept() -> None:
    model = RecordingChatModel(responses=["a"])
    sample_messages(model.bind_tools([get_weather]), "hi", n=2, stop=["END"])
    assert model.calls == [{"tools": [WEATHER_SCHEMA], "stop": ["END"]}] * 2


def test_generic_fake_with_tool_calls() -> None:
    model = GenericFakeChatModel(messages=iter([tool_call_message(), "Which city?"] * 2))
    samples = sample_messages(
        model, [HumanMessage(content="hi")], n=4, config={"max_concurrency": 1}
    )
    assert [bool(s.tool_calls) for s in samples] == [True, False, True, False]


@pytest.mark.parametrize("max_concurrency", [1, 2])
def test_max_concurrency_bounds_all_calls(max_concurrency: int) -> None:
    model = RecordingChatModel(responses=["a"], delay=0.02)
    results = sample_batch(model, ["x", "y", "z"], n=3, config={"max_concurrency": max_concurrency})
    assert all(isinstance(r, list) and len(r) == 3 for r in results)
    assert model.peak == max_concurrency


@pytest.mark.parametrize("max_concurrency", [1, 2])
@run_async
async def test_max_concurrency_bounds_all_calls_async(max_concurrency: int) -> None:
    model = RecordingChatModel(responses=["a"], delay=0.01)
    await asample_batch(model, ["x", "y"], n=3, config={"max_concurrency": max_concurrency})
    assert model.peak == max_concurrency


@run_async
async def test_seeded_async_respects_max_concurrency() -> None:
    model = RecordingChatModel(responses=["a"], delay=0.01)
    await asample_messages(model, "x", n=4, seed=1, config={"max_concurrency": 2})
    assert model.peak == 2


def test_samples_are_child_runs() -> None:
    model = RecordingChatModel(responses=["a"])
    with collect_runs() as cb:
        sample_messages(model, "hi", n=3)
    assert [r.run_type for r in cb.traced_runs] == ["llm"] * 3


def test_runnable_returning_strings() -> None:
    chain = RunnableLambda(lambda x: f"echo {x}")
    samples = sample_messages(chain, "hi", n=2)
    assert samples == [AIMessage(content="echo hi")] * 2


def test_runnable_with_temperature_is_rejected() -> None:
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "cannot pass temperature/seed to RunnableLambda, which is not a chat model (or a "
            "binding of one); pass temperature=None and seed=None to sample it with its own "
            "settings."
        ),
    ):
        sample_messages(RunnableLambda(lambda x: x), "hi", n=2, temperature=1.0)


def test_bad_output_type() -> None:
    with pytest.raises(
        SamplingError,
        match=re.escape(
            "the sampled model must return AIMessage (or str) outputs, got int: 5; wrap a chat "
            "model or a chain ending in one."
        ),
    ):
        sample_messages(RunnableLambda(lambda x: 5), "hi", n=1)


def test_errors_propagate_and_are_per_input() -> None:
    boom = RuntimeError("boom")
    model = RecordingChatModel(responses=["a", boom, "b"])
    with pytest.raises(RuntimeError, match=r"^boom$"):
        sample_messages(model, "hi", n=3, config={"max_concurrency": 1})
    model = RecordingChatModel(responses=["a", "a", boom, "b"])
    results = sample_batch(model, ["x", "y"], n=2, config={"max_concurrency": 1})
    assert isinstance(results[0], list)
    assert results[1] is boom


def test_bad_arguments() -> None:
    model = RecordingChatModel(responses=["a"])
    with pytest.raises(
        ConfigurationError,
        match=re.escape("sample_messages parameter 'n' must be an integer >= 1, got 0."),
    ):
        sample_messages(model, "hi", n=0)
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "use_n=True needs a ChatOpenAI-compatible model that returns n choices per request, "
            "got RecordingChatModel; pass use_n=None to fall back to concurrent calls."
        ),
    ):
        sample_messages(model, "hi", n=2, use_n=True)
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "sample_batch parameter 'config' must be one config or one per input (2), got 1."
        ),
    ):
        sample_batch(model, ["a", "b"], n=1, config=[{}])


class MalformedOnceServer(FakeOpenAIServer):
    """Choice 0 of the first response, and the first single redraw, carry list arguments."""

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        choices = [openai_choice(i) for i in range(body.get("n", 1))]
        if len(self.requests) <= 2:
            bad = openai_choice(0)
            bad["tool_calls"][0]["function"]["arguments"] = json.dumps([{"x": 1}])
            choices[0] = bad
        return httpx.Response(200, json=completion(choices))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_chat_openai_malformed_choice_is_redrawn_then_counted_unparsed(mode: str) -> None:
    # langchain-openai fails the whole n-response on tool-call arguments that are not an
    # object; the other choices are redrawn one by one and the bad one becomes unparsed.
    server = MalformedOnceServer()
    model = server.chat_openai().bind_tools([get_weather])
    if mode == "sync":
        samples = sample_messages(model, "weather?", n=4)
    else:
        samples = asyncio.run(asample_messages(model, "weather?", n=4))
    assert [r["n"] for r in server.requests] == [4, 1, 1, 1, 1]
    assert len(samples) == 4
    bad = [m for m in samples if "taskcal_malformed" in m.response_metadata]
    assert len(bad) == 1 and bad[0].content == "" and not bad[0].tool_calls
    assert tasks.tool_decision().parse(bad[0]) is None


@pytest.mark.parametrize("seed", [None, 7])  # one batch call, or one seeded invoke per sample
def test_a_call_failing_on_a_malformed_output_is_one_unparsed_sample(seed: int | None) -> None:
    try:  # langchain-openai's error for a choice whose tool-call arguments are a list
        AIMessage(content="", tool_calls=[{"name": "get_weather", "args": [1], "id": "c"}])
    except ValidationError as exc:
        malformed = exc
    model = RecordingChatModel(responses=["fine", malformed, "fine", "fine"])
    samples = sample_messages(model, "hi", n=4, seed=seed)
    assert len(model.calls) == 4
    assert [m.content for m in samples].count("fine") == 3
    bad = [m for m in samples if "taskcal_malformed" in m.response_metadata]
    assert len(bad) == 1 and bad[0].content == ""
    assert "validation error for AIMessage" in bad[0].response_metadata["taskcal_malformed"]
    # An error in the content is not a malformed call: it fails the draw, as before.
    try:
        AIMessage(content=5)  # type: ignore[arg-type]
    except ValidationError as exc:
        garbled = exc
    model = RecordingChatModel(responses=["fine", garbled, "fine", "fine"])
    with pytest.raises(ValidationError, match="validation errors for AIMessage\ncontent"):
        sample_messages(model, "hi", n=4, seed=seed)
