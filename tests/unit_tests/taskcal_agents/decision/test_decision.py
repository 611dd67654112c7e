from __future__ import annotations

import itertools
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from langchain_core.messages import AIMessage, HumanMessage

from calibrators import expected_costs
from taskcal_agents.decision import _presets as tasks
from taskcal_agents.decision._artefact import check_calibrator
from taskcal_agents.decision._belief import Belief
from taskcal_agents.decision._decider import (
    Decider,
    Decision,
    carried_actions,
    decide_from_messages,
    executable_mbr,
    grounded_flags,
    mbr_action,
)
from taskcal_agents.errors import ConfigurationError, LabelMismatchError
from taskcal_agents.parsing._grounding import GroundingContext
from tests.unit_tests.taskcal_agents.helpers.calibration import FakeCalibrator

FLAT = tasks.FLAT_TOOL_DECISION_COST
"""The matrix before effects: these tests are about messages and beliefs, not costs."""


def call(name: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": None}])


def tool(name: str, required: tuple[str, ...] = (), **properties: Any) -> dict[str, Any]:
    """An OpenAI tool schema (the tools a request offers, for grounding)."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"Run {name}.",
            "parameters": {"type": "object", "properties": properties, "required": list(required)},
        },
    }


F_TOOL = tool("f", x={"type": "integer"})
WEATHER_TOOL = tool(
    "get_weather", ("city",), city={"type": "string"}, unit={"type": "string", "enum": ["c", "f"]}
)
# The default tool_decision() grounds each sampled call in the request's tools and
# conversation: a direct decide() passes them as context=.
F_CONTEXT = GroundingContext([F_TOOL], [HumanMessage("Please run f.")])


# ---------------------------------------------------------------------------- MBR


@given(
    st.integers(2, 5).flatmap(
        lambda k: st.tuples(
            arrays(np.float64, k, elements=st.floats(0.001, 1)),
            st.integers(1, 5).flatmap(
                lambda m: arrays(np.float64, (k, m), elements=st.floats(0, 10))
            ),
        )
    )
)
def test_mbr_matches_brute_force(q_cost: tuple[np.ndarray, np.ndarray]) -> None:
    q, cost = q_cost
    q = q / q.sum()
    k, m = cost.shape
    brute = [sum(q[ell] * cost[ell, a] for ell in range(k)) for a in range(m)]
    np.testing.assert_allclose(expected_costs(q, cost), brute, atol=1e-12)
    best = min(brute)
    assert brute[mbr_action(q, cost)] <= best + 1e-9


def test_mbr_ties_go_to_first_action() -> None:
    assert mbr_action(np.array([0.5, 0.5]), np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]])) == 0


def test_decision_is_mbr_over_all_count_vectors() -> None:
    task = tasks.tool_decision()
    cost = task.cost_matrix()
    question, refusal = AIMessage(content="Which city?"), AIMessage(content="I can't.")
    for counts in itertools.product(range(4), repeat=3):
        if sum(counts) == 0:
            continue
        msgs = [call("f")] * counts[0] + [question] * counts[1] + [refusal] * counts[2]
        decision = decide_from_messages(task, msgs, alpha=0.1, context=F_CONTEXT)
        p = (np.array(counts) + 0.1) / (sum(counts) + 0.3)
        costs = p @ cost
        assert decision.action == task.actions[int(np.argmin(costs))]
        np.testing.assert_allclose(list(decision.expected_cost.values()), costs)
        np.testing.assert_allclose(list(decision.probs.values()), p)


# -------------------------------------------------------------------- decisions


HERMES = (
    '<tool_call>{"name": "get_weather", "arguments": {"unit": "c", "city": "Paris"}}</tool_call>'
)


def test_decision_fields_and_tool_call_message() -> None:
    # "drop": the unparsed "Sunny." is left out of p̂ (under "other" it would weaken the call).
    task = tasks.tool_decision(unparsed="drop", cost=FLAT)
    msgs = [
        call("get_weather", city="Paris", unit="c"),
        AIMessage(content=HERMES),
        call("get_weather", city="Rome"),
        call("get_weather", city="Rome", unit="c"),
        call("get_weather", unit="c", city="Paris"),
        AIMessage(content="Which city?"),
        AIMessage(content="Sunny."),
    ]
    # The user names both cities; "c" is an optional enum value: every call is grounded.
    context = GroundingContext(
        [WEATHER_TOOL], [HumanMessage("What's the weather in Paris or Rome?")]
    )
    decision = decide_from_messages(task, msgs, context=context)
    assert decision.action == "tool_call"
    assert (decision.n_ungrounded, decision.call_agreement) == (0, 3)
    assert decision.task == "tool_decision"
    assert (decision.n_samples, decision.n_unparsed, decision.fallback) == (7, 1, False)
    assert decision.counts == {"tool_call": 5.0, "request_for_info": 1.0, "cannot_answer": 0.0}
    assert decision.calibrated == decision.probs
    assert decision.samples is None and decision.sample_labels is None
    message = decision.message
    assert message is not None
    assert [(c["name"], c["args"]) for c in message.tool_calls] == [
        ("get_weather", {"city": "Paris", "unit": "c"})
    ]
    assert re.fullmatch(r"call_[0-9a-f]{24}", message.tool_calls[0]["id"] or "")
    assert message is not msgs[0]


def test_tool_call_message_from_content_only() -> None:
    task = tasks.tool_decision()
    content = '<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>'
    context = GroundingContext([F_TOOL], [HumanMessage("Run f with x = 1.")])
    decision = decide_from_messages(task, [AIMessage(content=content)] * 3, context=context)
    assert decision.message is not None
    assert decision.message.content == ""
    assert decision.message.tool_calls[0]["args"] == {"x": 1}


def test_native_tool_call_ids_are_kept() -> None:
    task = tasks.tool_decision(cost=FLAT)
    msg = AIMessage(content="", tool_calls=[{"name": "f", "args": {}, "id": "abc"}])
    decision = decide_from_messages(task, [msg], context=F_CONTEXT)
    assert decision.message is not None
    assert decision.message.tool_calls[0]["id"] == "abc"


def test_ask_message_is_most_typical_question() -> None:
    task = tasks.tool_decision()
    msgs = [
        AIMessage(content="Which date?"),
        AIMessage(content="Which city?"),
        AIMessage(content="which  city"),
        AIMessage(content="Which city?"),
    ]
    decision = decide_from_messages(task, msgs, context=F_CONTEXT)
    assert decision.action == "request_for_info"
    assert decision.message is not None
    assert decision.message.content == "Which city?"


def test_abstain_message_is_configured_text() -> None:
    task = tasks.tool_decision(abstain_text="Nope, sorry.")
    decision = decide_from_messages(
        task, [AIMessage(content="I'm sorry, I can't do that.")] * 4, context=F_CONTEXT
    )
    assert decision.action == "cannot_answer"
    assert decision.message is not None
    assert decision.message.content == "Nope, sorry."


def test_ask_without_sampled_question_uses_ask_text() -> None:
    task = tasks.tool_decision(cost=[[0, 0, 9], [9, 0, 9], [9, 0, 9]])  # ask is free
    decision = decide_from_messages(task, [call("f")], context=F_CONTEXT)
    assert decision.action == "request_for_info"
    assert decision.message is not None
    assert decision.message.content == task.ask_text


def test_action_without_samples_has_no_message() -> None:
    task = tasks.rating(k=3)
    decision = decide_from_messages(task, [AIMessage(content="1"), AIMessage(content="3")])
    assert decision.action == "2"
    assert decision.message is None


def test_return_samples() -> None:
    task = tasks.tool_decision()
    msgs = [AIMessage(content="Which city?"), AIMessage(content="Sunny.")]
    decision = decide_from_messages(task, msgs, return_samples=True, context=F_CONTEXT)
    assert decision.samples == msgs
    assert decision.sample_labels == ["request_for_info", None]


def test_to_metadata_is_json_without_messages() -> None:
    import json

    decision = decide_from_messages(
        tasks.tool_decision(cost=FLAT), [call("f")], return_samples=True, context=F_CONTEXT
    )
    meta = decision.to_metadata()
    assert "message" not in meta and "samples" not in meta
    assert json.loads(json.dumps(meta))["action"] == "tool_call"
    assert Decision.model_validate(meta).action == "tool_call"


# --------------------------------------------------------------------- fallbacks


def test_fallback_no_samples() -> None:
    task = tasks.tool_decision()
    decision = decide_from_messages(task, [], context=F_CONTEXT)
    assert decision.fallback is True
    assert decision.fallback_reason == "no samples were drawn"
    assert decision.action == task.fallback_action == "request_for_info"
    assert decision.probs == pytest.approx(dict.fromkeys(task.labels, 1 / 3))
    assert decision.calibrated == decision.probs
    assert (decision.n_samples, decision.n_unparsed) == (0, 0)
    assert decision.message is not None
    assert decision.message.content == task.ask_text


def test_fallback_all_unparsed() -> None:
    task = tasks.tool_decision(fallback_action="cannot_answer")
    decision = decide_from_messages(
        task, [AIMessage(content="Sunny.")] * 3, return_samples=True, context=F_CONTEXT
    )
    assert decision.fallback is True
    assert decision.fallback_reason == "all 3 samples were unparsed by parser 'tool_decision'"
    assert decision.action == "cannot_answer"
    assert (decision.n_samples, decision.n_unparsed) == (3, 3)
    assert decision.sample_labels == [None, None, None]


def test_unparsed_as_label_avoids_fallback() -> None:
    task = tasks.tool_decision(unparsed="as:cannot_answer")
    decision = decide_from_messages(task, [AIMessage(content="Sunny.")] * 3, context=F_CONTEXT)
    assert decision.fallback is False
    assert decision.action == "cannot_answer"
    assert (decision.n_unparsed, decision.counts["cannot_answer"]) == (3, 3.0)


def test_explicit_fallback_reason() -> None:
    decider = Decider(tasks.rating())
    decision = decider.fallback("model error: boom")
    assert (decision.action, decision.fallback_reason, decision.message) == (
        "3",
        "model error: boom",
        None,
    )


# -------------------------------------------------------------------- calibrator


def test_calibrator_is_applied_to_belief() -> None:
    task = tasks.tool_decision(cost=FLAT)
    cal = FakeCalibrator(3, fixed=[0.9, 0.05, 0.05])
    msgs = [AIMessage(content="Which city?")] * 4
    decision = decide_from_messages(task, msgs, calibrator=cal, alpha=0.1, context=F_CONTEXT)
    np.testing.assert_allclose(cal.calls[0], [[0.1 / 4.3, 4.1 / 4.3, 0.1 / 4.3]])
    assert decision.calibrated == pytest.approx(
        {"tool_call": 0.9, "request_for_info": 0.05, "cannot_answer": 0.05}
    )
    # MBR picks tool_call; no sample made a call, so the next-cheapest action is taken
    assert min(decision.expected_cost, key=decision.expected_cost.get) == "tool_call"
    assert (decision.action, decision.fallback) == ("request_for_info", True)
    assert decision.probs["request_for_info"] == pytest.approx(4.1 / 4.3)


def test_calibrator_output_is_renormalised() -> None:
    decider = Decider(tasks.tool_decision(), FakeCalibrator(3, fixed=[2.0, 1.0, 1.0]))
    np.testing.assert_allclose(decider.calibrate(np.full(3, 1 / 3)), [0.5, 0.25, 0.25])


def test_calibrator_bad_output() -> None:
    decider = Decider(tasks.tool_decision(), FakeCalibrator(3, fixed=[0.5, float("nan"), 0.5]))
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "calibrator FakeCalibrator.predict_proba must return one row of 3 finite "
            "probabilities >= 0 for task 'tool_decision', got [[0.5, nan, 0.5]]."
        ),
    ):
        decider.decide([call("f")], context=F_CONTEXT)


def test_check_calibrator_class_count() -> None:
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "calibrator FakeCalibrator was fitted on 4 classes but task 'tool_decision' has 3 "
            "labels ['tool_call', 'request_for_info', 'cannot_answer']; fit the calibrator on "
            "this task's beliefs."
        ),
    ):
        Decider(tasks.tool_decision(), FakeCalibrator(4))


@pytest.mark.parametrize("attr", ["labels_", "labels"])
def test_check_calibrator_labels(attr: str) -> None:
    task = tasks.tool_decision()
    cal = FakeCalibrator(3, **{attr: ["request_for_info", "tool_call", "cannot_answer"]})
    with pytest.raises(
        LabelMismatchError,
        match=re.escape(
            "calibrator FakeCalibrator has labels ['request_for_info', 'tool_call', "
            "'cannot_answer'] but task 'tool_decision' has labels ['tool_call', "
            "'request_for_info', 'cannot_answer'] (same order required); fit the calibrator on "
            "this task's beliefs."
        ),
    ) as info:
        check_calibrator(task, cal)
    assert info.value.expected == task.labels
    assert isinstance(info.value, ValueError)
    check_calibrator(task, FakeCalibrator(3, **{attr: list(task.labels)}))


def test_check_calibrator_unfitted_and_not_a_calibrator() -> None:
    task = tasks.tool_decision()

    class Unfitted:
        def predict_proba(self, P: np.ndarray) -> np.ndarray:
            return P

    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "calibrator Unfitted for task 'tool_decision' is not fitted (it has no n_classes_ or "
            "classes_); fit it on beliefs of this task first."
        ),
    ):
        check_calibrator(task, Unfitted())
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "calibrator for task 'tool_decision' must have a predict_proba method, got 'x'; pass "
            "a fitted calibrators estimator or None."
        ),
    ):
        check_calibrator(task, "x")


def test_decider_bad_task_and_alpha() -> None:
    with pytest.raises(
        ConfigurationError, match=re.escape("Decider parameter 'task' must be a Task, got 'x'.")
    ):
        Decider("x")  # type: ignore[arg-type]
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "Decider parameter 'alpha' must be a finite number >= 0, got -1; use alpha=0.1 (the "
            "default) or 0 for raw frequencies."
        ),
    ):
        Decider(tasks.rating(), alpha=-1)


def test_decide_belief_directly() -> None:
    task = tasks.rating(k=3)
    decision = Decider(task).decide_belief(Belief([0, 0, 5], task.labels))
    assert decision.action == "3"
    assert decision.message is None


def test_decide_belief_refuses_a_belief_over_other_labels() -> None:
    # All the mass on "call", but positionally under cannot_answer: never decided silently.
    task = tasks.tool_decision()
    with pytest.raises(LabelMismatchError, match=r"^belief labels \['refuse', 'ask', 'call'\]"):
        Decider(task).decide_belief(Belief([0, 0, 16], ["refuse", "ask", "call"]))


def test_real_calibrator() -> None:
    from calibrators import make_calibrator as make

    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(3), size=200)
    y = np.array([rng.choice(3, p=p) for p in P])
    cal = make("temperature").fit(P, y)
    decision = decide_from_messages(
        tasks.tool_decision(), [call("f")] * 3, calibrator=cal, context=F_CONTEXT
    )
    assert sum(decision.calibrated.values()) == pytest.approx(1.0)


def test_sampled_action_without_sample_takes_next_cheapest() -> None:
    task = tasks.tool_decision(cost=[[0, 3, 3], [3, 0, 3], [3, 3, 0]])
    assert task.sampled_actions == ["tool_call"]

    class AlwaysCall:
        n_classes_ = 3

        def predict_proba(self, P: np.ndarray) -> np.ndarray:
            return np.array([[0.8, 0.15, 0.05]])

    decision = decide_from_messages(
        task, [AIMessage(content="Which city?")], AlwaysCall(), context=F_CONTEXT
    )
    assert decision.expected_cost["tool_call"] < decision.expected_cost["request_for_info"]
    assert decision.action == "request_for_info"
    assert decision.fallback
    assert decision.fallback_reason == (
        "MBR chose 'tool_call', but no sample carried it out; took the cheapest action that "
        "can be carried out, 'request_for_info'"
    )
    assert decision.message is not None and decision.message.content == "Which city?"


def test_sampled_actions_validated() -> None:
    message = (
        "Task 'tool_decision' is invalid (1 error): field 'sampled_actions' must list actions "
        "other than the ask and abstain actions, from ['tool_call', 'confirm', "
        "'request_for_info', 'cannot_answer']; got ['nope']."
    )
    with pytest.raises(ConfigurationError, match=f"^{re.escape(message)}$"):
        tasks.tool_decision(sampled_actions=["nope"])


# ---------------------------------------------------------------------------- executability


def test_executable_mbr_restricts_rows_and_flags_replacements() -> None:
    ec = np.array([[0.1, 0.2, 0.3], [0.1, 0.2, 0.3], [0.5, 0.2, 0.2], [0.1, 0.2, 0.3]])
    ok = np.array([[1, 1, 1], [0, 1, 1], [1, 0, 1], [0, 0, 0]], dtype=bool)
    actions, replaced = executable_mbr(ec, ok)
    # row 2: the unrestricted argmin (1) is not executable, ties of the rest go first (2);
    # row 3: nothing is executable, the unrestricted MBR action stays, unflagged.
    assert actions.tolist() == [0, 1, 2, 0]
    assert replaced.tolist() == [False, True, True, False]
    assert actions.dtype == np.intp
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "executable_mbr needs expected_costs and executable of the same shape (n, m), "
            "got (4, 3) and (3,)."
        ),
    ):
        executable_mbr(ec, ok[0])


@given(
    arrays(np.float64, (6, 4), elements=st.floats(0, 10)),
    arrays(np.bool_, (6, 4)),
)
def test_executable_mbr_matches_brute_force(ec: np.ndarray, ok: np.ndarray) -> None:
    actions, replaced = executable_mbr(ec, ok)
    for i in range(ec.shape[0]):
        allowed = [j for j in range(4) if ok[i, j]] or list(range(4))
        best = min(allowed, key=lambda j: (ec[i, j], j))
        assert actions[i] == best
        assert replaced[i] == (bool(ok[i].any()) and not ok[i, int(np.argmin(ec[i]))])


def test_carried_actions_needs_an_extractable_tool_call() -> None:
    task = tasks.tool_decision(direct_answer=True)
    assert task.action_list == ["tool_call", "request_for_info", "cannot_answer", "direct_answer"]
    cut_off = AIMessage(content='<tool_call>{"name": "lookup", "argu')
    messages = [cut_off, AIMessage(content="Which city?"), AIMessage(content="  ")]
    labels = ["tool_call", "request_for_info", "direct_answer"]
    # The task sends only grounded calls: carried_actions takes each sample's flag.
    context = GroundingContext([tool("lookup", ("q",), q={"type": "string"})], [HumanMessage("x")])

    def grounded(samples: list[AIMessage]) -> list[bool] | None:
        return grounded_flags(context.ground_samples(samples))

    # the cut-off call and the blank answer carry nothing out; non-sampled actions always
    assert carried_actions(task, messages, labels, grounded=grounded(messages)).tolist() == [
        False,
        True,
        True,
        False,
    ]
    messages += [call("lookup", q="x"), AIMessage(content="42")]
    labels += ["tool_call", "direct_answer"]
    assert carried_actions(task, messages, labels, grounded=grounded(messages)).tolist() == [
        True,
        True,
        True,
        True,
    ]
    # a sample carries out only the action it is labelled with
    lone = [call("lookup", q="x")]
    assert carried_actions(task, lone, ["cannot_answer"], grounded=grounded(lone)).tolist() == [
        False,
        True,
        True,
        False,
    ]
    assert carried_actions(task, [], [], grounded=[]).tolist() == [False, True, True, False]


def test_cut_off_tool_call_is_never_sent() -> None:
    task = tasks.tool_decision(cost=[[0, 3, 3], [3, 0, 3], [3, 3, 0]])
    cut_off = AIMessage(content='<tool_call>{"name": "lookup", "argu')
    decider = Decider(task)
    belief = Belief.from_labels(["tool_call"] * 3 + ["request_for_info"], task.labels)
    messages = [cut_off] * 3 + [AIMessage(content="Which city?")]
    labels = ["tool_call"] * 3 + ["request_for_info"]
    groundings = F_CONTEXT.ground_samples(messages)  # a cut-off call has no call to ground
    decision = decider.decide_belief(
        belief, messages=messages, labels=labels, groundings=groundings
    )
    assert (decision.action, decision.fallback) == ("request_for_info", True)
    assert decision.message is not None and decision.message.content == "Which city?"
    assert decider.representative("tool_call", messages, labels, groundings=groundings) is None


def test_answer_or_abstain_falls_back_when_no_sample_answers() -> None:
    task = tasks.answer_or_abstain()
    assert task.sampled_actions == ["answer"]
    favour_answer = FakeCalibrator(2, fixed=[0.99, 0.01])
    messages = [AIMessage(content="I don't know.")] * 4
    decision = Decider(task, favour_answer).decide_belief(
        Belief.from_labels(["abstain"] * 4, task.labels),
        messages=messages,
        labels=["abstain"] * 4,
    )
    assert min(decision.expected_cost, key=decision.expected_cost.get) == "answer"
    assert (decision.action, decision.fallback) == ("abstain", True)
    assert decision.fallback_reason == (
        "MBR chose 'answer', but no sample carried it out; took the cheapest action that "
        "can be carried out, 'abstain'"
    )
    assert decision.message is not None and decision.message.content == task.abstain_text
    answered = Decider(task, favour_answer).decide_belief(
        Belief.from_labels(["answer", "abstain"], task.labels),
        messages=[AIMessage(content="Paris."), AIMessage(content="No idea.")],
        labels=["answer", "abstain"],
    )
    assert (answered.action, answered.fallback) == ("answer", False)
    assert answered.message is not None and answered.message.content == "Paris."
    assert tasks.answer_or_abstain(sampled_actions=[]).sampled_actions == []


def test_decide_with_offered_tools_drops_calls_to_other_tools() -> None:
    # Parser-level check of the offered tool names (tool_names=), without grounding, which
    # would also refuse the unoffered rm_rf call (its schema is unknown).
    task = tasks.tool_decision(cost=[[0, 1, 2], [4, 0, 2], [4, 1, 0]], grounding=None)
    offered = AIMessage(content="", tool_calls=[{"name": "lookup", "args": {}, "id": "a"}])
    other = AIMessage(content="", tool_calls=[{"name": "rm_rf", "args": {}, "id": "b"}])
    decider = Decider(task)
    anything = decider.decide([other] * 3)
    assert (anything.action, anything.counts["tool_call"]) == ("tool_call", 3.0)
    checked = decider.decide([other] * 3, tool_names=["lookup"])
    assert checked.counts["tool_call"] == 0 and checked.n_unparsed == 3
    assert checked.action != "tool_call"
    mixed = decider.decide([offered] * 5 + [other], tool_names=["lookup"])
    assert mixed.action == "tool_call"
    assert mixed.message is not None
    assert [c["name"] for c in mixed.message.tool_calls] == ["lookup"]
    assert carried_actions(task, [other], ["tool_call"], tool_names=["lookup"]).tolist() == [
        False,
        True,
        True,
    ]
