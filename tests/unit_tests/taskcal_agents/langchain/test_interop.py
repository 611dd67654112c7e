"""Our decision model inside AutoMode, ModelRouter and HITL, through create_agent (fakes)."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AutoModeMiddleware,
    HumanInTheLoopMiddleware,
    ModelChoice,
    ModelRouterMiddleware,
)
from langchain.agents.middleware import auto_mode as lc_auto_mode
from langchain.agents.middleware import model_router as lc_model_router
from langchain_core.decisions import Noul
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command
from pydantic import Field

from calibrators import TemperatureScaling
from taskcal_agents.decision._options import SamplingOptions
from taskcal_agents.decision._presets import tool_decision
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.langchain._decision_model import TaskCalibratedDecisionModel, noul_probability
from taskcal_agents.langchain._interop import (
    AUTO_MODE_QUESTION_ID,
    HITL_QUESTION_ID,
    HITL_STORE_NAMESPACE,
    MODEL_ROUTER_QUESTION_ID,
    ReviewGate,
    block_threshold,
    hitl_when,
    risk_classifier,
    risk_costs,
)
from taskcal_agents.langchain._middleware import TaskCalibrationMiddleware
from tests.unit_tests.taskcal_agents.helpers.middleware_fakes import ScriptedChatModel, scripted

MODES = ["sync", "async"]
DELETED: list[str] = []


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    DELETED.append(path)
    return f"deleted {path}"


def call(path: str = "/etc/passwd", id_: str = "call_1") -> AIMessage:
    return AIMessage(
        content="", tool_calls=[{"name": "delete_file", "args": {"path": path}, "id": id_}]
    )


def run(agent: Any, inputs: Any, mode: str, config: Any = None) -> dict[str, Any]:
    if mode == "sync":
        return agent.invoke(inputs, config)  # type: ignore[no-any-return]
    return asyncio.run(agent.ainvoke(inputs, config))  # type: ignore[no-any-return]


def votes(yes: int, n: int = 10) -> ScriptedChatModel:
    """A sampler whose n replies hold ``yes`` "yes" answers."""
    return scripted(*(["Yes."] * yes + ["No."] * (n - yes)))


def test_question_ids_are_langchains() -> None:
    assert lc_auto_mode._QUESTION_ID == AUTO_MODE_QUESTION_ID
    assert lc_model_router._QUESTION_ID == MODEL_ROUTER_QUESTION_ID


# ----------------------------------------------------------- cost ratio -> 0.5


@pytest.mark.parametrize(("fn", "fp"), [(1, 1), (4, 1), (1, 4), (20, 1), (3, 0), (0, 2)])
def test_noul_is_at_least_half_exactly_when_q_reaches_the_threshold(fn: float, fp: float) -> None:
    threshold = block_threshold(cost_false_negative=fn, cost_false_positive=fp)
    assert threshold == pytest.approx(fp / (fp + fn))
    question = Noul(instructions="Is it risky?")
    for yes in range(11):
        model = risk_classifier(
            votes(yes), cost_false_negative=fn, cost_false_positive=fp, n_samples=10, alpha=0.0
        )
        decision = model.decide("state", AUTO_MODE_QUESTION_ID, question)
        q = decision.calibrated["yes"]
        answer = noul_probability(decision)
        assert (answer >= 0.5) == (q >= threshold - 1e-12) == (decision.action == "yes")
        if fn == fp:
            assert answer == pytest.approx(q)
        elif fn > 0 and fp > 0:
            assert answer == pytest.approx(q * fn / (q * fn + (1 - q) * fp))


def test_default_costs_keep_the_calibrated_probability() -> None:
    model = TaskCalibratedDecisionModel(chat_model=votes(3), n_samples=10, alpha=0.0)
    response = model.invoke({"state": "s", "questions": {"x": Noul(instructions="Risky?")}})
    assert response.nouls["x"].noul == pytest.approx(0.3)


def test_an_overridden_action_keeps_its_side_of_half() -> None:
    # All replies unparsed: the fallback action (minimax: 'yes' under c_FN > c_FP) decides.
    model = risk_classifier(
        scripted("hmm", "?"), cost_false_negative=1, cost_false_positive=3, n_samples=2
    )
    decision = model.decide("s", AUTO_MODE_QUESTION_ID, Noul(instructions="Risky?"))
    assert decision.fallback is True
    assert (noul_probability(decision) >= 0.5) == (decision.action == "yes")


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"cost_false_negative": -1, "cost_false_positive": 1}, "cost_false_negative"),
        ({"cost_false_negative": 1, "cost_false_positive": float("nan")}, "cost_false_positive"),
        ({"cost_false_negative": 0, "cost_false_positive": 0}, "must not both be 0"),
    ],
)
def test_invalid_costs_are_rejected(kw: dict[str, float], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        risk_costs(**kw)


def test_a_calibrated_noul_reports_the_calibrated_probability() -> None:
    rng = np.random.default_rng(0)
    # An overconfident raw belief: p(yes) near 0/1, right only 70% of the time.
    y = rng.integers(0, 2, 400)
    right = rng.random(400) < 0.7
    p_yes = np.where((y == 0) == right, 0.95, 0.05)
    P = np.column_stack([p_yes, 1 - p_yes])
    calibrator = TemperatureScaling().fit(P, y)
    model = risk_classifier(votes(8), calibrator=calibrator, n_samples=10, alpha=0.0)
    decision = model.decide("s", AUTO_MODE_QUESTION_ID, Noul(instructions="Risky?"))
    expected = calibrator.predict_proba(np.array([[0.8, 0.2]]))[0, 0]
    assert decision.probs["yes"] == pytest.approx(0.8)
    assert decision.calibrated["yes"] == pytest.approx(expected)
    assert 0.5 < expected < 0.75  # calibration pulled the overconfident belief in
    assert noul_probability(decision) == pytest.approx(expected)


# ----------------------------------------------------------------- AutoMode


def auto_mode_agent(classifier: TaskCalibratedDecisionModel, agent_model: Any, **kw: Any) -> Any:
    guard = AutoModeMiddleware(tools=[delete_file], classifier=classifier)
    return create_agent(agent_model, tools=[delete_file], middleware=[guard], **kw)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("fn", "blocked"), [(1, False), (4, True)])
def test_auto_mode_blocks_by_the_cost_ratio(mode: str, fn: float, blocked: bool) -> None:
    # q = 0.3: allowed under equal costs (threshold 0.5), blocked at c_FN=4 (threshold 0.2).
    classifier = risk_classifier(
        votes(3), cost_false_negative=fn, cost_false_positive=1, n_samples=10, alpha=0.0
    )
    agent = auto_mode_agent(classifier, scripted(call(), "Done."))
    DELETED.clear()
    result = run(agent, {"messages": [HumanMessage("Delete /etc/passwd.")]}, mode)
    tool_message = result["messages"][2]
    assert isinstance(tool_message, ToolMessage)
    if blocked:
        assert tool_message.status == "error"
        assert "blocked" in str(tool_message.content)
        assert "probability: 0.63" in str(tool_message.content)  # 0.3·4 / (0.3·4 + 0.7)
        assert DELETED == []
    else:
        assert tool_message.content == "deleted /etc/passwd"
        assert DELETED == ["/etc/passwd"]


FENCED = (
    'Here is the call:\n```json\n{"name": "delete_file", "arguments": {"path": "/etc/passwd"}}\n```'
)


def test_a_fenced_json_call_never_reaches_auto_mode_alone() -> None:
    sampler = votes(10)
    agent = auto_mode_agent(risk_classifier(sampler, n_samples=10), scripted(FENCED))
    DELETED.clear()
    result = agent.invoke({"messages": [HumanMessage("Delete /etc/passwd.")]})
    assert [type(m).__name__ for m in result["messages"]] == ["HumanMessage", "AIMessage"]
    assert result["messages"][-1].tool_calls == []
    assert sampler.calls == []  # AutoMode was never asked


@pytest.mark.parametrize("mode", MODES)
def test_our_middleware_turns_the_fenced_call_into_one_auto_mode_blocks(mode: str) -> None:
    sampler = votes(10)
    guard = AutoModeMiddleware(
        tools=[delete_file], classifier=risk_classifier(sampler, n_samples=10)
    )
    ours = TaskCalibrationMiddleware(
        task=tool_decision(tool_names=["delete_file"]), options=SamplingOptions(n_samples=3)
    )
    agent = create_agent(
        scripted(FENCED, FENCED, FENCED, "I did not delete it."),
        tools=[delete_file],
        middleware=[ours, guard],
    )
    DELETED.clear()
    result = run(agent, {"messages": [HumanMessage("Delete /etc/passwd.")]}, mode)
    first, tool_message = result["messages"][1], result["messages"][2]
    assert [(c["name"], c["args"]) for c in first.tool_calls] == [
        ("delete_file", {"path": "/etc/passwd"})
    ]
    assert isinstance(tool_message, ToolMessage)
    assert tool_message.status == "error"
    assert "blocked" in str(tool_message.content)
    assert len(sampler.calls) == 10
    assert DELETED == []
    assert result["taskcal_decisions"][0]["action"] == "tool_call"


# ---------------------------------------------------------------- ModelRouter

ROUTES = {"fast": "Short, simple requests.", "strong": "Multi-step reasoning or code."}


def router_agent(classifier: TaskCalibratedDecisionModel) -> tuple[Any, dict[str, Any]]:
    models = {"fast": scripted("fast reply"), "strong": scripted("strong reply")}
    router = ModelRouterMiddleware(
        choices={r: ModelChoice(model=models[r], criteria=c) for r, c in ROUTES.items()},
        instructions="Choose the least costly model suited to the request.",
        classifier=classifier,
    )
    return create_agent(scripted("default reply"), middleware=[router]), models


@pytest.mark.parametrize("mode", MODES)
def test_model_router_takes_the_mbr_route(mode: str) -> None:
    classifier = TaskCalibratedDecisionModel(
        chat_model=scripted("strong", "strong", "fast", "Strong."), n_samples=4, alpha=0.0
    )
    agent, _ = router_agent(classifier)
    result = run(agent, {"messages": [HumanMessage("Refactor this parser.")]}, mode)
    assert result["messages"][-1].content == "strong reply"
    route = result["model_route"]
    assert route.choice == "strong"
    assert route.probabilities == pytest.approx({"fast": 0.25, "strong": 0.75})


def test_model_router_costs_move_the_route() -> None:
    # Sending a simple request to the strong model costs 1; a hard one to the fast model 5:
    # with q(strong) = 0.25, fast expects 0.25·5 = 1.25 > strong's 0.75·1.
    classifier = TaskCalibratedDecisionModel(
        chat_model=scripted("fast", "fast", "fast", "strong"),
        n_samples=4,
        alpha=0.0,
        costs={MODEL_ROUTER_QUESTION_ID: [[0, 1], [5, 0]]},
    )
    agent, _ = router_agent(classifier)
    result = agent.invoke({"messages": [HumanMessage("Hi")]})
    assert result["model_route"].choice == "strong"
    assert result["messages"][-1].content == "strong reply"


# ----------------------------------------------------------------------- HITL


class FlippingSampler(BaseChatModel):
    """Answers 'yes' for its first ``n_yes`` calls, then 'no': a rerun decides otherwise."""

    n_yes: int = 4
    seen: list[Any] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "flipping"

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        self.seen.append(kw.get("seed"))
        text = "yes" if len(self.seen) <= self.n_yes else "no"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


class SeedSampler(BaseChatModel):
    """Answers from ``random.Random(seed)``; unseeded calls draw from a shared stream."""

    unseeded: Iterator[float] = Field(default_factory=lambda: iter(itertools.cycle([0.1, 0.9])))

    @property
    def _llm_type(self) -> str:
        return "seeded"

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        seed = kw.get("seed")
        u = random.Random(seed).random() if seed is not None else next(self.unseeded)
        text = "yes" if u < 0.5 else "no"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


def hitl_agent(
    gate: Any,
    model: BaseChatModel | None = None,
    checkpointer: InMemorySaver | None = None,
    store: InMemoryStore | None = None,
) -> Any:
    hitl = HumanInTheLoopMiddleware(
        interrupt_on={"delete_file": {"allowed_decisions": ["approve", "reject"], "when": gate}}
    )
    return create_agent(
        model or scripted(call(), "I did not delete it."),
        tools=[delete_file],
        middleware=[hitl],
        checkpointer=checkpointer or InMemorySaver(),
        store=store,
    )


def gate_for(sampler: BaseChatModel, **kw: Any) -> ReviewGate:
    classifier = risk_classifier(sampler, n_samples=4, question_id=HITL_QUESTION_ID)
    gate = hitl_when(classifier, **kw)
    assert isinstance(gate, ReviewGate)
    return gate


REJECT = Command(resume={"decisions": [{"type": "reject", "message": "No."}]})


@pytest.mark.parametrize("mode", MODES)
def test_hitl_interrupts_and_the_resume_sees_the_same_decision(mode: str) -> None:
    sampler = FlippingSampler()
    gate = gate_for(sampler, seeded=False)
    agent = hitl_agent(gate)
    config = {"configurable": {"thread_id": f"t-{mode}"}}
    DELETED.clear()
    paused = run(agent, {"messages": [HumanMessage("Delete /etc/passwd.")]}, mode, config)
    [interrupt] = paused["__interrupt__"]
    assert interrupt.value["action_requests"][0]["args"] == {"path": "/etc/passwd"}
    result = run(agent, REJECT, mode, config)
    assert gate.n_sampled == 1  # the rerun of `when` on resume came from the cache
    assert DELETED == []
    tool_message = result["messages"][2]
    assert isinstance(tool_message, ToolMessage)
    assert "User rejected the tool call" in str(tool_message.content)
    assert sampler.seen == [None] * 4


def test_without_the_cache_the_flipping_sampler_runs_a_rejected_call() -> None:
    # The control: the same run with the cache emptied before the resume decides 'no' on the
    # rerun, so LangChain skips the reviewer's rejection and the tool runs.
    gate = gate_for(FlippingSampler(), seeded=False)
    agent = hitl_agent(gate)
    config = {"configurable": {"thread_id": "control"}}
    DELETED.clear()
    agent.invoke({"messages": [HumanMessage("Delete /etc/passwd.")]}, config)
    gate._cache.clear()
    agent.invoke(REJECT, config)
    assert gate.n_sampled == 2
    assert DELETED == ["/etc/passwd"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("with_store", [True, False])
def test_a_store_keeps_the_decision_for_a_resume_in_another_process(
    mode: str, with_store: bool
) -> None:
    # Two gates with empty caches stand for two processes sharing the checkpointer and the
    # store; unseeded, the second would decide 'no' (FlippingSampler with n_yes=0).
    checkpointer, store = InMemorySaver(), InMemoryStore() if with_store else None
    config = {"configurable": {"thread_id": f"store-{mode}-{with_store}"}}
    first = gate_for(FlippingSampler(), seeded=False)
    DELETED.clear()
    paused = run(
        hitl_agent(first, checkpointer=checkpointer, store=store),
        {"messages": [HumanMessage("Delete /etc/passwd.")]},
        mode,
        config,
    )
    assert paused["__interrupt__"]
    second = gate_for(FlippingSampler(n_yes=0), seeded=False)
    resumed = hitl_agent(
        second, model=scripted("I did not delete it."), checkpointer=checkpointer, store=store
    )
    run(resumed, REJECT, mode, config)
    if store is None:  # the control: the rerun of `when` samples again and flips
        assert second.n_sampled == 1
        assert DELETED == ["/etc/passwd"]
        return
    assert second.n_sampled == 0  # read from the store
    assert DELETED == []
    [item] = store.search(HITL_STORE_NAMESPACE)
    assert item.key == first.key(hitl_request(call()))
    assert item.value["decision"]["action"] == "yes"


def test_a_seeded_gate_decides_the_same_in_a_fresh_process() -> None:
    request = hitl_request(call())
    # Two gates with empty caches stand for two processes; unseeded, they disagree.
    unseeded = [
        gate_for(SeedSampler(unseeded=itertools.repeat(u)), seeded=False) for u in (0.1, 0.9)
    ]
    assert unseeded[0](request) != unseeded[1](request)
    seeded = [gate_for(SeedSampler()) for _ in range(2)]
    assert seeded[0].decision(request).counts == seeded[1].decision(request).counts
    other = hitl_request(call(path="/tmp/x", id_="call_2"))
    assert seeded[0].key(other) != seeded[0].key(request)


def test_the_cache_is_bounded_and_keyed_by_the_call_in_context() -> None:
    gate = gate_for(SeedSampler(), cache_size=2)
    requests = [hitl_request(call(id_=f"call_{i}")) for i in range(3)]
    for request in requests:
        gate(request)
    assert gate.n_sampled == 3
    assert len(gate._cache) == 2
    gate(requests[2])
    assert gate.n_sampled == 3
    gate(requests[0])  # dropped, sampled again
    assert gate.n_sampled == 4
    later = hitl_request(call(id_="call_2"), extra=[HumanMessage("Yes, really delete it.")])
    assert gate.key(later) != gate.key(requests[2])


def hitl_request(message: AIMessage, extra: Sequence[BaseMessage] = ()) -> Any:
    messages = [HumanMessage("Delete /etc/passwd."), *extra, message]
    return ToolCallRequest(
        tool_call=message.tool_calls[0], tool=None, state={"messages": messages}, runtime=None
    )


def test_hitl_when_checks_its_arguments() -> None:
    with pytest.raises(ConfigurationError, match="TaskCalibratedDecisionModel"):
        hitl_when(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="cache_size"):
        hitl_when(risk_classifier(votes(1)), cache_size=0)
    for namespace in [(), ("taskcal", ""), ["taskcal", "hitl"]]:
        with pytest.raises(ConfigurationError, match="store_namespace"):
            hitl_when(risk_classifier(votes(1)), store_namespace=namespace)  # type: ignore[arg-type]
