"""LangGraph routing on a calibrated decision: run the tools, ask the user, or end.

The ``decide`` node samples N completions through ``TaskCalibratedRunnable`` and stores
the :class:`~taskcal_agents.Decision`; a three-way conditional edge routes on its action:

* ``tool_call``        → ``tools`` (a ``ToolNode``), then back to ``decide``;
* ``request_for_info`` (a question) and ``confirm`` (the exact call to approve) →
  ``ask_user``, which pauses the graph with ``interrupt`` until the user answers (resumed
  with ``Command(resume=...)``), then back to ``decide``, where a plain "yes" to a
  confirmation sends exactly that call;
* ``cannot_answer`` / ``direct_answer`` → the end.

Right after a tool result ``decide`` uses a second runnable with the task's own
tool-result task, :func:`~taskcal_agents.decision.after_tool_result_for` (answer from the
result, call another tool, ask, abstain), which keeps the task's ``trust`` policy: a call
that takes a value only a tool result supplies (a URL or an IBAN an injected page names) is
not run, and the user is asked to confirm it. A sampled call that repeats one already
answered in this user turn is never run again (``Decision.n_repeats``). Every run ends
with a message for the user: when no sample wrote the answer, or ``MAX_TOOL_ROUNDS`` stops
the run, it reports the last tool result.

Run against a running OpenAI-compatible server, or let the script start the CPU default::

    python examples/langgraph_routing.py --base-url http://127.0.0.1:8000/v1
    python examples/langgraph_routing.py            # starts VLLMServer()
"""

from __future__ import annotations

import argparse
import sys
import uuid
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, interrupt

from taskcal_agents import TaskCalibratedRunnable
from taskcal_agents.decision import after_tool_result_for, tool_decision
from taskcal_agents.parsing import is_tool_result_turn, tool_result_reply
from taskcal_agents.serving import BASE_URL_ENV, MODEL_ENV, connect, server_from_env

MAX_TOOL_ROUNDS = 2


@tool
def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    weather = {"paris": "sunny, 21 °C", "london": "light rain, 14 °C"}
    return weather.get(str(city).strip().lower(), f"no weather data for {city}")


TOOLS = [get_weather]


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    decision: dict[str, Any] | None
    tool_rounds: int


def build_graph(llm: Any, *, n_samples: int) -> Any:
    """Compile the decide → {tools, ask_user, end} graph."""
    # Amounts, recipients, addresses, credentials, URLs and paths only from the user; a
    # write would also need the user's request to ask for its tool (a warrant), but a
    # weather lookup is a read.
    task = tool_decision(
        direct_answer=True, trust="by_kind", effects={"tools": {"get_weather": "read"}}
    )
    decider = TaskCalibratedRunnable(llm.bind_tools(TOOLS), task, n_samples=n_samples)
    # After a tool result, where an injected value first appears: the same policy.
    after_task = after_tool_result_for(task)
    after = TaskCalibratedRunnable(llm.bind_tools(TOOLS), after_task, n_samples=n_samples)

    def decide(state: State) -> dict[str, Any]:
        messages = state["messages"]
        after_result = is_tool_result_turn(messages)
        decision = (after if after_result else decider).invoke(messages)
        message = decision.message
        if message is None:  # an answer no sample wrote (e.g. every sample repeated the call)
            message = tool_result_reply(messages) if after_result else AIMessage(task.ask_text)
        if message.tool_calls and state.get("tool_rounds", 0) >= MAX_TOOL_ROUNDS:
            # Say that the run stopped, and what it has, rather than end on an unrun call.
            message = tool_result_reply(
                messages, stopped=f"the limit of {MAX_TOOL_ROUNDS} tool rounds"
            )
        meta = {**message.response_metadata, "taskcal_decision": decision.to_metadata()}
        message = message.model_copy(update={"response_metadata": meta})
        return {"messages": [message], "decision": decision.to_metadata()}

    def route(state: State) -> Literal["tools", "ask_user", "__end__"]:
        action = (state["decision"] or {}).get("action")
        last = state["messages"][-1]
        if action == "tool_call" and isinstance(last, AIMessage) and last.tool_calls:
            return "tools"
        if action in ("request_for_info", "confirm"):  # a question, or the call to approve
            return "ask_user"
        return END

    def ask_user(state: State) -> dict[str, Any]:
        question = str(state["messages"][-1].content)
        reply = interrupt({"question": question})  # pauses until Command(resume=...)
        return {"messages": [HumanMessage(content=str(reply))]}

    tool_node = ToolNode(TOOLS)

    def tools(state: State) -> dict[str, Any]:
        update = tool_node.invoke(state)
        return {**update, "tool_rounds": state.get("tool_rounds", 0) + 1}

    graph = StateGraph(State)
    graph.add_node("decide", decide)
    graph.add_node("tools", tools)
    graph.add_node("ask_user", ask_user)
    graph.add_edge(START, "decide")
    graph.add_conditional_edges("decide", route, ["tools", "ask_user", END])
    graph.add_edge("tools", "decide")
    graph.add_edge("ask_user", "decide")
    return graph.compile(checkpointer=InMemorySaver())


REQUESTS = ("What's the weather like today?", "What's the weather in Paris?")


def main(
    base_url: str,
    model: str,
    *,
    n_samples: int = 8,
    max_tokens: int = 64,
    reply: str = "Paris, please.",
    limit: int | None = None,
) -> int:
    llm = ChatOpenAI(
        base_url=base_url, model=model, api_key="EMPTY", max_tokens=max_tokens, timeout=300
    )
    graph = build_graph(llm, n_samples=n_samples)
    for request in REQUESTS[:limit]:
        config = {"configurable": {"thread_id": str(uuid.uuid4())}, "recursion_limit": 20}
        print(f"\nuser: {request}")
        result = graph.invoke({"messages": [HumanMessage(request)], "tool_rounds": 0}, config)
        for _ in range(2):  # answer at most two clarifying questions
            if "__interrupt__" not in result:
                break
            print(f"  ask_user: {result['__interrupt__'][0].value['question'][:160]!r}")
            print(f"  user replies: {reply!r}")
            result = graph.invoke(Command(resume=reply), config)
        for message in result["messages"]:
            decision = message.response_metadata.get("taskcal_decision")
            if decision is not None:
                probs = ", ".join(f"{k}={v:.2f}" for k, v in decision["calibrated"].items())
                print(
                    f"  decide -> {decision['action']} ({probs}; fallback={decision['fallback']}, "
                    f"repeats={decision['n_repeats']})"
                )
            if isinstance(message, AIMessage) and message.tool_calls:
                print(f"    tools: {[(c['name'], c['args']) for c in message.tool_calls]}")
            elif message.type == "tool":
                print(f"    tool result: {message.content!r}")
        ended = "paused" if "__interrupt__" in result else "ended"
        print(f"  {ended}: {str(result['messages'][-1].content)[:160]!r}")
    return 0


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help=f"server URL (default ${BASE_URL_ENV})")
    parser.add_argument("--model", help=f"served model name (default ${MODEL_ENV})")
    parser.add_argument("--n-samples", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--reply", default="Paris, please.", help="the simulated user's answer")
    parser.add_argument("--limit", type=int, default=None, help="only the first LIMIT requests")
    args = parser.parse_args(argv)
    with connect(*server_from_env(args.base_url, args.model)) as (base_url, model):
        return main(
            base_url,
            model,
            n_samples=args.n_samples,
            max_tokens=args.max_tokens,
            reply=args.reply,
            limit=args.limit,
        )


if __name__ == "__main__":
    sys.exit(cli())
