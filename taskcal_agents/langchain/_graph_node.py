"""A LangGraph node that decides call / ask / abstain, and a router on its decision.

``decision_node(model, task)`` is a node for a ``StateGraph`` whose state has ``messages``
(e.g. :class:`DecisionState`): it samples ``model`` on the conversation, decides through
the front doors' core (:class:`~taskcal_agents.langchain.DecisionSession`) and
appends the reply (the sampled call, the question, the refusal) with the decision record
in ``taskcal_decisions``. :func:`route_on_decision` returns the decided action, for
``add_conditional_edges``::

    graph = StateGraph(DecisionState)
    graph.add_node("decide", decision_node(llm.bind_tools(tools), tool_decision()))
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "decide")
    graph.add_conditional_edges("decide", route_on_decision, {"tool_call": "tools",
                                "confirm": END, "request_for_info": END,
                                "cannot_answer": END})
"""

from __future__ import annotations

import operator
import os
from typing import Annotated, Any

from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

from taskcal_agents.errors import ConfigurationError

try:
    from langgraph.graph import MessagesState
except ImportError as exc:
    _msg = (
        "taskcal_agents.langchain._graph_node needs langgraph, the 'agents' extra: "
        f"pip install 'taskcal-agents[agents]' ({exc})"
    )
    raise ImportError(_msg, name=exc.name) from exc

from taskcal_agents.decision import Decision, Draw, Drawn, RetryPolicy, SamplingOptions, Task
from taskcal_agents.langchain._session import (
    DecisionSession,
    PendingDecision,
    decided,
    unknown_arguments,
)
from taskcal_agents.production import DecisionLogLike, model_name_of
from taskcal_agents.sampling import (
    asample_batch,
    bound_tool_names,
    bound_tools,
    chat_model_of,
    sample_batch,
    split_retry,
)

__all__ = ["DecisionState", "decision_node", "route_on_decision"]


class DecisionState(MessagesState):
    """The conversation and the decision records of :func:`decision_node`."""

    taskcal_decisions: Annotated[list[dict[str, Any]], operator.add]


def route_on_decision(state: dict[str, Any]) -> str:
    """The action of the latest decision (for ``add_conditional_edges``)."""
    return str(state["taskcal_decisions"][-1]["action"])


def _update(pending: PendingDecision, result: Decision | Exception) -> dict[str, Any]:
    """The state update of a decision: its reply and its record."""
    decision = decided(result)
    return {"messages": [pending.reply(decision)], "taskcal_decisions": [decision.to_metadata()]}


def decision_node(
    model: Runnable[Any, Any],
    task: Task | str | os.PathLike[str],
    calibrator: Any = "auto",
    *,
    options: SamplingOptions | None = None,
    decision_log: DecisionLogLike | None = None,
    reload_artefact: bool = False,
    seed: int | None = None,
    strict_calibrator: bool = False,
    **unknown: Any,
) -> Runnable[dict[str, Any], dict[str, Any]]:
    """A node that decides on ``state["messages"]`` with ``model`` (sync and async).

    ``task`` is a task or a task file; ``calibrator``, ``options`` (N, temperature, adaptive
    N, retries, ``on_error``), ``decision_log``, ``reload_artefact``, ``seed`` and
    ``strict_calibrator`` are those of the other front doors. The node's model and
    settings are fixed: build another node for other ones.

    Raises:
        UnknownArgumentError: For an argument the node does not take.
        ConfigurationError: If an argument is invalid (as at the other front doors).
    """
    if unknown:
        known = (
            "model", "task", "calibrator", "options", "decision_log", "reload_artefact", "seed",
            "strict_calibrator",
        )  # fmt: skip
        owner = "decision_node"
        raise unknown_arguments(owner, sorted(unknown), known)
    if options is not None and not isinstance(options, SamplingOptions):
        msg = (
            f"decision_node parameter 'options' must be a SamplingOptions or None, got "
            f"{options!r}; pass options=SamplingOptions(n_samples=..., ...)."
        )
        raise ConfigurationError(msg)
    model, retry = split_retry(model)  # sampled through the layer's policy, as the Runnable
    session = DecisionSession(
        task, calibrator, options=options or SamplingOptions(), owner="decision_node",
        model=model, decision_log=decision_log,
        reload_artefact=reload_artefact, seed=seed, strict=strict_calibrator,
        retry=None if retry is None else RetryPolicy.of_runnable_retry(retry),
    )  # fmt: skip
    name = model_name_of(chat_model_of(model) or model)
    tools, tool_names = bound_tools(model), bound_tool_names(model)  # the node's model is fixed

    def node(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        pending = session.begin([list(state["messages"])], tools=tools, tool_names=tool_names)

        def draw(d: Draw) -> Drawn:
            return sample_batch(model, [pending.prompt(d, 0)] * len(d.items), config=config,
                                **pending.sample_args(d))  # fmt: skip

        return _update(pending, pending.run(draw, model_name=name)[0])

    async def anode(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        pending = session.begin([list(state["messages"])], tools=tools, tool_names=tool_names)

        async def draw(d: Draw) -> Drawn:
            return await asample_batch(model, [pending.prompt(d, 0)] * len(d.items),
                                       config=config, **pending.sample_args(d))  # fmt: skip

        return _update(pending, (await pending.arun(draw, model_name=name))[0])

    return RunnableLambda(node, afunc=anode, name="taskcal_decision")
