"""Agent middleware: the reply after a tool result, and a run a limit cut short.

:class:`ToolReplyMiddleware` goes beside
:class:`~taskcal_agents.langchain.TaskCalibrationMiddleware` in ``create_agent``
and looks after what that middleware does not decide:

* ``after_model``: the model's own reply right after a tool result (with
  ``decide_on="user_turn"``, where those replies are not decided). A reply that repeats a
  call already answered, writes a call as text, is empty or is off topic
  (:func:`~taskcal_agents.parsing._tool_turns.unusable_reply`) is replaced by a message that
  reports what the tools returned (``response_metadata["taskcal_replaced_reply"]`` says
  why); of parallel calls only the repeated ones are dropped
  (``taskcal_dropped_repeats``). A reply kept is marked ``taskcal_vetted``.
* ``after_agent``: a run that ended on tool results (a limit, a hook's ``jump_to``), or
  on a message another middleware wrote right after them (a limit's "limits exceeded"
  note), gets a closing message that reports what the tools returned; unless every one of
  those results is from a ``return_direct`` tool, whose result is the answer by design.

Decided replies (``response_metadata["taskcal_decision"]``) and the library's confirmation
question (``response_metadata["taskcal_confirm"]``) are never touched. Put it last
in ``middleware``, so that the other middlewares' ``after_model`` hooks see the vetted reply
(a stream of the agent's updates shows the model's reply before the replacement).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool
from typing_extensions import override

try:
    from langchain.agents.middleware.types import (
        AgentMiddleware,
        AgentState,
        ContextT,
        ResponseT,
        ToolCallRequest,
    )
    from langgraph.runtime import Runtime
    from langgraph.types import Command
except ImportError as exc:
    _msg = (
        "taskcal_agents.langchain._reply_guard needs langchain and langgraph, the 'agents' "
        f"extra: pip install 'taskcal-agents[agents]' ({exc})"
    )
    raise ImportError(_msg, name=exc.name) from exc

from taskcal_agents.langchain._session import DECISION_METADATA_KEY
from taskcal_agents.parsing import (
    CONFIRM_METADATA_KEY,
    answered_tool_calls,
    canonical_tool_calls,
    is_tool_result_turn,
    tool_result_reply,
    unusable_reply,
)

__all__ = ["ToolReplyMiddleware", "vetted_reply"]

_MARKS = ("taskcal_vetted", "taskcal_replaced_reply", "taskcal_dropped_repeats")
"""The ``response_metadata`` keys of a reply this middleware has seen."""
_OWN = (DECISION_METADATA_KEY, CONFIRM_METADATA_KEY, *_MARKS)
"""The marks of a reply never touched: a decided one, the library's confirmation question
(:class:`~taskcal_agents.langchain.TaskCalibrationMiddleware` asks it when a passed-through
call takes an untrusted value), and one already vetted."""


def vetted_reply(reply: AIMessage, messages: Sequence[BaseMessage]) -> AIMessage:
    """``reply`` to the tool results that end ``messages``, kept (marked), trimmed or replaced.

    The result keeps the reply's id, so that it replaces the reply in the agent's state.
    """
    why = unusable_reply(reply, messages)
    if why is None:
        metadata = {**reply.response_metadata, "taskcal_vetted": True}
        return reply.model_copy(update={"response_metadata": metadata})
    if why.startswith("repeats") and reply.tool_calls:
        answered = answered_tool_calls(messages)
        new = [c for c in reply.tool_calls if canonical_tool_calls([c]) not in answered]
        if new:  # parallel calls: only the repeated ones are dropped
            dropped = len(reply.tool_calls) - len(new)
            metadata = {**reply.response_metadata, "taskcal_dropped_repeats": dropped}
            return reply.model_copy(update={"tool_calls": new, "response_metadata": metadata})
    message = tool_result_reply(messages)
    metadata = {"taskcal_replaced_reply": f"the model's reply {why}"}
    return message.model_copy(update={"response_metadata": metadata, "id": reply.id})


class ToolReplyMiddleware(AgentMiddleware[AgentState[ResponseT], ContextT, ResponseT]):
    """Vet the model's reply after a tool result; close a run a limit cut short.

    Example:
        ```python
        agent = create_agent(
            model,
            tools=[get_weather],
            middleware=[TaskCalibrationMiddleware(task=tool_decision()), ToolReplyMiddleware()],
        )
        ```
    """

    def __init__(self) -> None:
        """Start with no ``return_direct`` tools seen."""
        super().__init__()
        self._return_direct: frozenset[str] = frozenset()
        self._lock = threading.Lock()  # the agent runs parallel tool calls in threads

    def _note_tool(self, tool: BaseTool | None) -> None:
        """Remember the name of a ``return_direct`` tool (its result ends the run)."""
        if tool is not None and tool.return_direct and tool.name not in self._return_direct:
            with self._lock:
                self._return_direct = self._return_direct | {tool.name}

    def _after_model(self, messages: Sequence[BaseMessage]) -> dict[str, Any] | None:
        reply = messages[-1] if messages else None
        if (
            not isinstance(reply, AIMessage)
            or any(k in reply.response_metadata for k in _OWN)
            or not is_tool_result_turn(messages[:-1])
        ):
            return None
        return {"messages": [vetted_reply(reply, messages[:-1])]}

    def _closing(self, state: AgentState[Any]) -> dict[str, Any] | None:
        messages = state["messages"]
        if len(messages) < 2 or state.get("structured_response") is not None:
            return None  # (a structured response ends the run on its own tool message)
        last = messages[-1]
        if isinstance(last, ToolMessage):
            tail = []
            for message in reversed(messages):
                if not isinstance(message, ToolMessage):
                    break
                tail.append(message)
            if all(m.name in self._return_direct for m in tail):
                return None
            return {"messages": [tool_result_reply(messages, stopped="a limit")]}
        if (
            isinstance(last, AIMessage)
            and not last.tool_calls
            and not any(k in last.response_metadata for k in _OWN)
            and isinstance(messages[-2], ToolMessage)
        ):
            return {"messages": [tool_result_reply(messages[:-1])]}
        return None

    @override
    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Note a ``return_direct`` tool as it runs; the call is the handler's."""
        self._note_tool(request.tool)
        return handler(request)

    @override
    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Async :meth:`wrap_tool_call`."""
        self._note_tool(request.tool)
        return await handler(request)

    @override
    def after_model(
        self, state: AgentState[ResponseT], runtime: Runtime[ContextT]
    ) -> dict[str, Any] | None:
        """Vet the model's undecided reply right after a tool result (see the module)."""
        return self._after_model(state["messages"])

    @override
    async def aafter_model(
        self, state: AgentState[ResponseT], runtime: Runtime[ContextT]
    ) -> dict[str, Any] | None:
        """Async :meth:`after_model`."""
        return self._after_model(state["messages"])

    @override
    def after_agent(
        self, state: AgentState[ResponseT], runtime: Runtime[ContextT]
    ) -> dict[str, Any] | None:
        """Close a run that ended on tool results or on a note after them (see the module)."""
        return self._closing(state)

    @override
    async def aafter_agent(
        self, state: AgentState[ResponseT], runtime: Runtime[ContextT]
    ) -> dict[str, Any] | None:
        """Async :meth:`after_agent`."""
        return self._closing(state)
