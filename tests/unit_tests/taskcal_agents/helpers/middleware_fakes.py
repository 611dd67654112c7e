"""Fakes for TaskCalibrationMiddleware: scripted models and handlers, requests, the hooks."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from langchain.agents.middleware.types import (
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.runtime import Runtime
from pydantic import Field

from taskcal_agents.decision._options import SamplingOptions
from taskcal_agents.decision._presets import tool_decision
from taskcal_agents.langchain._chat_model import DECISION_METADATA_KEY
from taskcal_agents.langchain._middleware import TaskCalibrationMiddleware

CALL = AIMessage(
    content="",
    tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1"}],
)
QUESTION = "Which city do you want the weather for?"
REFUSAL = "I'm sorry, I can't help with that."
FINAL = "It is sunny in Paris."


class ScriptedChatModel(GenericFakeChatModel):
    """A fake chat model that returns scripted messages, records kwargs, binds tools."""

    calls: list[dict[str, Any]] = Field(default_factory=list)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> Any:
        self.calls.append(kwargs)
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        return self.bind(**kwargs)


def scripted(*messages: AIMessage | str) -> ScriptedChatModel:
    return ScriptedChatModel(messages=iter(list(messages)))


@tool
def get_weather(city: str) -> str:
    """Return the weather in a city."""
    return f"Sunny in {city}."


class CountingHandler:
    """A wrap_model_call handler returning scripted messages (thread-safe)."""

    def __init__(self, messages: Sequence[AIMessage | str]) -> None:
        self._messages: Iterator[AIMessage | str] = iter(list(messages))
        self._lock = threading.Lock()
        self.requests: list[ModelRequest[Any]] = []

    def _next(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        with self._lock:
            self.requests.append(request)
            item = next(self._messages)
        message = AIMessage(content=item) if isinstance(item, str) else item
        return ModelResponse(result=[message])

    def __call__(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        return self._next(request)

    async def acall(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        return self._next(request)


def make_request(messages: list[BaseMessage] | None = None, **kw: Any) -> ModelRequest[Any]:
    # The user names the city, so CALL (get_weather(city="Paris")) is grounded: the
    # default tool_decision() sends only calls the conversation supports.
    messages = messages if messages is not None else [HumanMessage("What's the weather in Paris?")]
    return ModelRequest(
        model=scripted(),
        messages=messages,
        tools=[get_weather],
        state={"messages": messages},
        runtime=Runtime(),
        **kw,
    )


def middleware(**kw: Any) -> TaskCalibrationMiddleware[Any, Any]:
    """The middleware under test; the sampling options among ``kw`` go to ``options``."""
    kw.setdefault("task", tool_decision())
    kw.setdefault("sampling", "handler")
    options = {k: kw.pop(k) for k in list(kw) if k in SamplingOptions.model_fields}
    options.setdefault("n_samples", 4)
    return TaskCalibrationMiddleware(options=SamplingOptions(**options), **kw)


def unwrap(result: Any) -> tuple[AIMessage, dict[str, Any]]:
    assert isinstance(result, ExtendedModelResponse)
    [message] = result.model_response.result
    assert isinstance(message, AIMessage)
    assert result.command is not None
    [record] = result.command.update["taskcal_decisions"]
    assert message.response_metadata[DECISION_METADATA_KEY] == record
    return message, record


def run_hook(
    mw: TaskCalibrationMiddleware[Any, Any],
    handler: CountingHandler,
    request: ModelRequest[Any],
    mode: str,
) -> Any:
    if mode == "sync":
        return mw.wrap_model_call(request, handler)
    return asyncio.run(mw.awrap_model_call(request, handler.acall))


def passed_through(
    mw: TaskCalibrationMiddleware[Any, Any],
    handler: CountingHandler,
    request: ModelRequest[Any],
    mode: str,
) -> AIMessage:
    """The reply an agent keeps for a call the middleware passes through.

    The model call (``wrap_model_call``), then ``after_model`` on the state it leaves (the
    trust check of an undecided reply lives there), as ``create_agent`` runs them.
    """
    out = run_hook(mw, handler, request, mode)
    update: dict[str, Any] = {}
    if isinstance(out, ExtendedModelResponse):  # the state update the agent applies
        update = dict(out.command.update) if out.command is not None else {}
        out = out.model_response
    [reply] = out.result
    reply = reply.model_copy(update={"id": reply.id or "reply-1"})
    state: Any = {**update, "messages": [*request.messages, reply]}
    hook = (
        mw.after_model(state, Runtime())
        if mode == "sync"
        else asyncio.run(mw.aafter_model(state, Runtime()))
    )
    if hook is None:
        return reply
    [kept] = hook["messages"]
    assert kept.id == reply.id  # replaces the reply in the agent's state
    return kept
