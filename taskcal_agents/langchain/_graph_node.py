"""A LangGraph node that decides call / ask / abstain, and a router on its decision.

``decision_node(model, task)`` is a node for a ``StateGraph`` whose state has ``messages``
(e.g. :class:`DecisionState`): it samples ``model`` on the conversation, decides through
the front doors' core (:class:`~taskcal_agents.production.DecisionSession`) and
appends the reply (the sampled call, the question, the refusal) with the decision record
in ``taskcal_decisions``. :func:`route_on_decision` returns the decided action, for
``add_conditional_edges``::

    graph = StateGraph(DecisionState)
    graph.add_node("decide", decision_node(llm.bind_tools(tools), tool_decision()))
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "decide")
    graph.add_conditional_edges("decide", route_on_decision, {"tool_call": "tools",
                                "request_for_info": END, "cannot_answer": END})
"""

from __future__ import annotations

import operator
import os
from typing import Annotated, Any

from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

try:
    from langgraph.graph import MessagesState
except ImportError as exc:
    _msg = (
        "taskcal_agents.langchain._graph_node needs langgraph, the 'agents' extra: "
        f"pip install 'taskcal-agents[agents]' ({exc})"
    )
    raise ImportError(_msg, name=exc.name) from exc

from taskcal_agents.decision import RetryPolicy, SamplingOptions, Task
from taskcal_agents.production import DecisionLogLike, DecisionSession, model_name_of
from taskcal_agents.sampling import (
    adrive_rounds,
    asample_batch,
    bound_tool_names,
    bound_tools,
    chat_model_of,
    drive_rounds,
    sample_batch,
    split_retry,
    with_task_prompt,
)

__all__ = ["DecisionState", "decision_node", "route_on_decision"]


class DecisionState(MessagesState):
    """The conversation and the decision records of :func:`decision_node`."""

    taskcal_decisions: Annotated[list[dict[str, Any]], operator.add]


def route_on_decision(state: dict[str, Any]) -> str:
    """The action of the latest decision (for ``add_conditional_edges``)."""
    return str(state["taskcal_decisions"][-1]["action"])


def decision_node(
    model: Runnable[Any, Any],
    task: Task | str | os.PathLike[str],
    calibrator: Any = "auto",
    *,
    options: SamplingOptions | None = None,
    decision_log: DecisionLogLike | None = None,
    reload_artefact: bool = False,
    seed: int | None = None,
) -> Runnable[dict[str, Any], dict[str, Any]]:
    """A node that decides on ``state["messages"]`` with ``model`` (sync and async).

    ``task`` is a task or a task file; ``calibrator``, ``options`` (N, temperature, adaptive
    N, retries, ``on_error``),
    ``decision_log``, ``reload_artefact`` and ``seed`` are those of the other front doors.
    """
    model, retry = split_retry(model)  # sampled through the layer's policy, as the Runnable
    session = DecisionSession(
        task, calibrator, options=options or SamplingOptions(), owner="decision_node",
        model=None if reload_artefact else model, decision_log=decision_log,
        reload_artefact=reload_artefact, seed=seed,
        retry=None if retry is None else RetryPolicy.of_runnable_retry(retry),
    )  # fmt: skip
    task = session.task  # loaded from a file, or the artefact's
    name = model_name_of(chat_model_of(model) or model)
    tools, tool_names = bound_tools(model), bound_tool_names(model)  # the node's model is fixed

    def start(state: dict[str, Any]) -> Any:
        messages = list(state["messages"])
        prompt = with_task_prompt(messages, task.prompt) if task.prompt else messages
        in_force = session.in_force()
        item = session.item(task, messages, tools)
        protocol = session.protocol(in_force, [item], tool_names=tool_names)
        return messages, prompt, in_force, protocol

    def finish(messages: list[Any], in_force: Any, result: Any) -> dict[str, Any]:
        decision = session.decided(result, in_force, model_name=name)
        reply = session.reply(decision, task, messages)
        return {"messages": [reply], "taskcal_decisions": [decision.to_metadata()]}

    def node(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        messages, prompt, in_force, protocol = start(state)
        results = drive_rounds(
            protocol,
            lambda d: sample_batch(
                model, [prompt] * len(d.items), config=config, **session.sample_args(d)
            ),
        )
        return finish(messages, in_force, results[0])

    async def anode(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        messages, prompt, in_force, protocol = start(state)

        async def draw(d: Any) -> Any:
            return await asample_batch(
                model, [prompt] * len(d.items), config=config, **session.sample_args(d)
            )

        return finish(messages, in_force, (await adrive_rounds(protocol, draw))[0])

    return RunnableLambda(node, afunc=anode, name="taskcal_decision")
