"""Fake chat models and a fake OpenAI endpoint shared by the sampling and front-door tests."""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import httpx
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_openai import ChatOpenAI
from pydantic import Field


def run_async(fn: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Any]:
    """Run an async test body with asyncio.run (no async pytest plugin needed)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


class RecordingChatModel(BaseChatModel):
    """Fake chat model: cycles through ``responses``, records call kwargs and concurrency."""

    responses: list[Any]  # AIMessage | str | Exception
    delay: float = 0.0
    calls: list[dict[str, Any]] = Field(default_factory=list)
    inputs: list[list[BaseMessage]] = Field(default_factory=list)
    active: int = 0
    peak: int = 0
    i: int = 0

    def model_post_init(self, context: Any) -> None:
        self._lock = threading.Lock()

    def _next(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> ChatResult:
        with self._lock:
            self.calls.append(dict(kwargs))
            self.inputs.append(list(messages))
            response = self.responses[self.i % len(self.responses)]
            self.i += 1
        if isinstance(response, Exception):
            raise response
        message = AIMessage(content=response) if isinstance(response, str) else response
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            if self.delay:
                time.sleep(self.delay)
            return self._next(messages, {**kwargs, **({"stop": stop} if stop else {})})
        finally:
            with self._lock:
                self.active -= 1

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            return self._next(messages, {**kwargs, **({"stop": stop} if stop else {})})
        finally:
            self.active -= 1

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, AIMessage]:
        # As ChatOpenAI does: the tools' OpenAI schemas, which grounding checks calls against.
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    @property
    def _llm_type(self) -> str:
        return "recording"


class NamedChatModel(RecordingChatModel):
    """A recording chat model with a served model name (what ``calibrator="auto"`` matches)."""

    model_name: str = "recording"


def tool_call_message(name: str = "get_weather", **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"id_{name}"}])


def completion(choices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {"index": i, "message": {"role": "assistant", **c}, "finish_reason": "stop"}
            for i, c in enumerate(choices)
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8},
    }


def openai_choice(i: int) -> dict[str, Any]:
    if i % 2:
        return {"content": "Which city?"}
    return {
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})},
            }
        ],
    }


class FakeOpenAIServer:
    """An httpx MockTransport handler that answers chat completions with ``n`` choices."""

    def __init__(self, max_choices: int | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self.max_choices = max_choices

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        n = body.get("n", 1)
        if self.max_choices is not None:
            n = min(n, self.max_choices)
        return httpx.Response(200, json=completion([openai_choice(i) for i in range(n)]))

    async def handle_async(self, request: httpx.Request) -> httpx.Response:
        """The async client's handler: the sync one, unless a subclass awaits something."""
        return self(request)

    def chat_openai(self, **kwargs: Any) -> ChatOpenAI:
        return ChatOpenAI(
            model="m",
            api_key="EMPTY",  # type: ignore[arg-type]
            base_url="http://fake.invalid/v1",
            http_client=httpx.Client(transport=httpx.MockTransport(self)),
            http_async_client=httpx.AsyncClient(transport=httpx.MockTransport(self.handle_async)),
            max_retries=0,
            **kwargs,
        )


@tool
def get_weather(city: str) -> str:
    """Get the weather for a city."""
    return f"sunny in {city}"


WEATHER_SCHEMA = convert_to_openai_tool(get_weather)
"""What RecordingChatModel.bind_tools([get_weather]) binds."""
