"""OpenAISampler on the live server: n in one request, vLLM sampling extras, constraints."""

from __future__ import annotations

import asyncio
import json
from typing import Literal

import pytest
from langchain_core.messages import AIMessage
from pydantic import BaseModel

from taskcal_agents.parsing._constraints import choice_constraint, json_constraint
from taskcal_agents.sampling import OpenAISampler
from taskcal_agents.serving import ExternalServer, VLLMServer

pytestmark = pytest.mark.integration

# Labels the model would never write on its own: if every sample is one of them, the
# constraint fired (the old guided_choice field would have been ignored silently).
ODD_LABELS = ["zebra-7", "quartz"]
PROMPT = "Pick one word: zebra-7 or quartz?"


def test_one_request_returns_n_messages(vllm_server: VLLMServer | ExternalServer) -> None:
    with OpenAISampler.from_endpoint(vllm_server.endpoint) as sampler:
        messages = sampler.sample("Tell me a fact.", n=8, max_tokens=6)
    assert len(messages) == 8
    assert [m.response_metadata["choice_index"] for m in messages] == list(range(8))
    assert len({m.id for m in messages}) == 8
    assert messages[0].response_metadata["request_usage"]["completion_tokens"] <= 8 * 6


def test_the_choice_constraint_really_fires(vllm_server: VLLMServer | ExternalServer) -> None:
    with OpenAISampler.from_endpoint(vllm_server.endpoint) as sampler:
        constrained = sampler.sample(
            PROMPT, n=16, max_tokens=8, structured_outputs=choice_constraint(ODD_LABELS)
        )
        free = sampler.sample(PROMPT, n=4, max_tokens=8)
    assert {m.content for m in constrained} <= set(ODD_LABELS)
    assert not {m.content for m in free} <= set(ODD_LABELS)


def test_the_json_schema_constraint_really_fires(vllm_server: VLLMServer | ExternalServer) -> None:
    class Verdict(BaseModel):
        answer: Literal["yes", "no"]

    with OpenAISampler.from_endpoint(vllm_server.endpoint) as sampler:
        messages = sampler.sample(
            "Is the sky blue? Reply in JSON.",
            n=4,
            max_tokens=32,
            structured_outputs=json_constraint(Verdict),
        )
    finished = [m for m in messages if m.response_metadata["finish_reason"] == "stop"]
    assert finished
    for message in finished:
        Verdict.model_validate(json.loads(message.content))
    for message in messages:  # the rest was cut off by max_tokens inside the JSON
        assert message.content.lstrip().startswith("{")


def test_top_k_reaches_the_server_and_async_works(
    vllm_server: VLLMServer | ExternalServer,
) -> None:
    # One token only: every sequence sees the same logits (the shared prompt), so top_k=1
    # must give one distinct first token, while free sampling gives several.
    async def run() -> tuple[list[AIMessage], list[AIMessage]]:
        async with OpenAISampler.from_endpoint(vllm_server.endpoint) as sampler:
            top1 = await sampler.asample("Tell me a fact.", n=8, max_tokens=1, top_k=1)
            free = await sampler.asample("Tell me a fact.", n=16, max_tokens=1)
        return top1, free

    top1, free = asyncio.run(run())
    assert len({m.content for m in top1}) == 1
    assert len({m.content for m in free}) > 1
