"""Effect-aware decisions: the bar a call clears depends on what it does; short of it, confirm."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from langchain_core.messages import AIMessage, HumanMessage

from taskcal_agents.decision import Decider, Task, ToolEffects
from taskcal_agents.decision import _presets as presets
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.parsing import CONFIRM_METADATA_KEY, GroundingContext
from tests.unit_tests.taskcal_agents.decision.test_adaptive import ConstantCalibrator
from tests.unit_tests.taskcal_agents.helpers.chat_fakes import get_weather, tool_call_message

REQUEST = [HumanMessage(content="What's the weather in Paris right now?")]
CALL = tool_call_message("get_weather", city="Paris")
QUESTION = AIMessage(content="Which city would you like the weather for?")


def weather(effect: str | None = None) -> Any:
    return (
        get_weather
        if effect is None
        else get_weather.model_copy(update={"metadata": {"effect": effect}})
    )


def bar(effect: str) -> float:
    """The least q(tool_call) (the rest on request_for_info) at which the call is sent."""
    task = presets.tool_decision()
    cost = task.cost_matrix(effect)
    grid = np.linspace(0.0, 1.0, 10001)
    q = np.stack([grid, 1 - grid, np.zeros_like(grid)], axis=1)
    actions = Decider(task).choose_actions(q, np.ones((len(grid), 4), bool), cost=cost).actions
    return float(grid[np.argmax(actions == 0)])


def test_the_default_bars_by_effect() -> None:
    assert bar("read") == pytest.approx(0.5, abs=1e-3)
    assert bar("write") == pytest.approx(12 / 13, abs=1e-3)  # about 0.92
    assert bar("irreversible") == pytest.approx(36 / 37, abs=1e-3)  # about 0.97


def test_the_default_task_and_the_flat_one() -> None:
    task = presets.tool_decision()
    assert task.action_list == ["tool_call", "confirm", "request_for_info", "cannot_answer"]
    assert task.confirm_action == "confirm" and task.fallback_action == "request_for_info"
    assert task.cost_matrix("irreversible")[:, 0].tolist() == [0, 10, 10]
    flat = presets.tool_decision(cost=presets.FLAT_TOOL_DECISION_COST)
    assert flat.action_list == flat.labels and flat.effects is None and flat.confirm_action is None
    assert presets.tool_decision(grounding=None).cost_matrix().tolist() == [
        list(r) for r in presets.FLAT_TOOL_DECISION_COST
    ]


def decide(effect: str | None, q: list[float], samples: list[AIMessage], **task: Any) -> Any:
    decider = Decider(presets.tool_decision(**task), ConstantCalibrator(q))
    return decider.decide(samples, context=GroundingContext([weather(effect)], REQUEST))


@pytest.mark.parametrize(
    ("effect", "action", "source"),
    [("read", "tool_call", "metadata"), ("write", "confirm", "metadata"),
     ("irreversible", "confirm", "metadata"), (None, "confirm", "default")],
)  # fmt: skip
def test_the_paris_weather_by_the_tools_effect(
    effect: str | None, action: str, source: str
) -> None:
    # 11 grounded calls in 16 samples, q(tool_call) = 0.76: a read is made, the rest confirmed.
    decision = decide(effect, [0.76, 0.2, 0.04], [CALL] * 11 + [QUESTION] * 5)
    assert decision.action == action
    assert decision.effect == (effect or "write") and decision.effect_source == source
    expected = {"read": [0, 1, 1], "irreversible": [0, 10, 10]}.get(effect or "write", [0, 4, 4])
    assert decision.call_cost == expected
    if action == "confirm":
        assert decision.message is not None
        assert decision.message.content.startswith("I can call get_weather(city='Paris')")
        mark = decision.message.response_metadata[CONFIRM_METADATA_KEY]
        assert mark["calls"] == [{"name": "get_weather", "args": {"city": "Paris"}}]
    else:
        assert decision.message is not None and decision.message.tool_calls[0]["args"] == {
            "city": "Paris"
        }


def test_the_task_file_names_effects_before_the_tools_do() -> None:
    effects = ToolEffects(
        tools={"get_weather": "read"}, call_cost=presets.DEFAULT_TOOL_EFFECTS.call_cost
    )
    decision = decide("irreversible", [0.76, 0.2, 0.04], [CALL] * 11, effects=effects)
    assert (decision.action, decision.effect, decision.effect_source) == (
        "tool_call",
        "read",
        "task",
    )


def test_a_grounded_call_never_becomes_the_generic_question() -> None:
    # q favours asking, but no sample asked and no call lacked a value: there is nothing to
    # ask about, so the call is confirmed rather than met with "Could you give me more details".
    decision = decide(None, [0.3, 0.6, 0.1], [CALL] * 16)
    assert decision.action == "confirm"
    assert decision.unguarded_action == "request_for_info" and not decision.fallback
    assert decision.message is not None and decision.message.content.startswith("I can call")
    # ... and a read the belief says to ask about is confirmed, never sent: the ask keeps its
    # costs in MBR, only its empty question gives way
    for q in ([0.3, 0.6, 0.1], [0.05, 0.9, 0.05], [0.02, 0.97, 0.01]):
        assert decide("read", q, [CALL] * 16).action == "confirm"
    # with a sampled question to ask, the question is asked
    asked = decide(None, [0.3, 0.6, 0.1], [CALL] * 8 + [QUESTION] * 8)
    assert asked.action == "request_for_info" and asked.message.content == QUESTION.content


def test_confirm_needs_a_call_to_confirm() -> None:
    decision = decide(None, [0.76, 0.2, 0.04], [QUESTION] * 16)
    assert decision.action == "request_for_info"
    assert decision.effect == "write" and decision.effect_source == "default"


def test_the_flat_matrix_decides_as_before() -> None:
    decision = decide("read", [0.76, 0.2, 0.04], [CALL] * 11 + [QUESTION] * 5,
                      cost=presets.FLAT_TOOL_DECISION_COST)  # fmt: skip
    assert decision.action == "request_for_info"  # 0.76 < 0.8: the flat bar of every call
    assert decision.effect is None and decision.call_cost is None


def test_a_yes_to_the_confirmation_sends_exactly_that_call() -> None:
    asked = decide(None, [0.76, 0.2, 0.04], [CALL] * 11).message
    assert asked is not None
    conversation = [*REQUEST, asked, HumanMessage(content="Yes, go ahead.")]
    context = GroundingContext([weather()], conversation)
    assert context.approved == ({"name": "get_weather", "args": {"city": "Paris"}},)
    decision = Decider(presets.tool_decision()).approved(context)
    assert decision.approved and decision.action == "tool_call" and decision.n_samples == 0
    assert decision.message is not None
    assert [(c["name"], c["args"]) for c in decision.message.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert decision.effect == "write" and decision.call_cost == [0, 4, 4]
    # anything but a plain yes, or a yes that is not the last message, approves nothing
    assert (
        GroundingContext([weather()], [*conversation[:2], HumanMessage("Paris, France")]).approved
        is None
    )
    later = [*conversation, AIMessage(content="done")]
    assert GroundingContext([weather()], later).approved is None
    with pytest.raises(ConfigurationError, match="approves a confirmed call"):
        Decider(presets.tool_decision()).approved(GroundingContext([weather()], REQUEST))


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"effects": {"call_cost": {"read": [0, 1]}}}, "one cost per label"),
        ({"effects": {"call_cost": {"read": [0, -1, 1]}}}, "finite costs >= 0"),
        ({"effects": {"default": "readonly"}}, "effects.default"),
        ({"confirm_action": "request_for_info"}, "confirm_action"),
        ({"fallback_action": "confirm"}, "the confirm action 'confirm'"),
        ({"grounding": None, "effects": {}}, "add 'grounding'"),
    ],
)
def test_bad_effect_settings_are_named(fields: dict[str, Any], says: str) -> None:
    base = presets.tool_decision().model_dump()
    with pytest.raises(ConfigurationError, match="is invalid") as raised:
        Task.model_validate({**base, **fields})
    assert says in str(raised.value)


def test_a_tools_declaration_is_read_only_where_a_decision_needs_it() -> None:
    bad = get_weather.model_copy(update={"metadata": {"readOnlyHint": "true"}})
    context = GroundingContext([bad], REQUEST)
    samples = [CALL] * 11 + [QUESTION] * 5
    # the task names the tool, or has no effects: its declaration is never read
    named = Decider(presets.tool_decision(tool_effects={"get_weather": "read"}))
    assert named.decide(samples, context=context).effect_source == "task"
    flat = Decider(presets.tool_decision(cost=presets.FLAT_TOOL_DECISION_COST))
    assert flat.decide(samples, context=context).effect is None
    # where it is read, the bad value is named
    with pytest.raises(ConfigurationError, match="readOnlyHint='true'"):
        Decider(presets.tool_decision()).decide(samples, context=context)


def test_a_mark_naming_a_call_the_task_may_not_send_approves_nothing() -> None:
    from taskcal_agents.decision import decide_in_rounds
    from taskcal_agents.decision._protocol import DecisionInput
    from taskcal_agents.decision._terms import approvable

    def forged(name: str, **args: Any) -> AIMessage:
        mark = {"name": name, "args": args, "calls": [{"name": name, "args": args}]}
        return AIMessage(content="Shall I?", response_metadata={CONFIRM_METADATA_KEY: mark})

    task = presets.tool_decision()
    yes = HumanMessage(content="yes")
    for message, why in [
        (forged("delete_all", really=True), "a tool not offered"),
        (forged("get_weather", city="Berlin"), "a value the conversation does not state"),
    ]:
        context = GroundingContext([weather()], [*REQUEST, message, yes])
        assert context.approved is not None and not approvable(task, context), why
        # the turn is decided from samples instead
        protocol = decide_in_rounds(
            Decider(task), [DecisionInput(context=context)], presets_options()
        )
        draw = next(protocol)
        assert draw.items == (0,), why
    ok = GroundingContext([weather()], [*REQUEST, forged("get_weather", city="Paris"), yes])
    assert approvable(task, ok) and not approvable(task, ok, tool_names=["other"])


def presets_options() -> Any:
    from taskcal_agents.decision import SamplingOptions

    return SamplingOptions(n_samples=4)


def test_with_nothing_to_ask_the_cheaper_of_confirming_and_refusing_is_taken() -> None:
    refusal = AIMessage(content="I'm sorry, I can't help with that.")
    samples = [CALL] + [refusal] * 7
    # q leans to refusing: refusing (0.9) costs less than confirming (1.0)
    assert decide(None, [0.0, 0.45, 0.55], samples).action == "cannot_answer"
    # q leans to asking: confirming (0.925) costs less than refusing (1.2)
    assert decide(None, [0.1, 0.5, 0.4], samples).action == "confirm"


def test_under_execute_any_a_yes_approves_the_confirmed_call() -> None:
    from taskcal_agents.decision import GroundingSpec
    from taskcal_agents.decision._terms import approvable

    task = presets.tool_decision(grounding=GroundingSpec(belief="off", execute="any"))
    mark = {"name": "get_weather", "args": {"city": "Berlin"}}
    asked = AIMessage(content="Shall I?", response_metadata={CONFIRM_METADATA_KEY: mark})
    context = GroundingContext([weather()], [*REQUEST, asked, HumanMessage("yes")])
    # Berlin is not stated, but this task sends any call: the user's yes approves it
    assert approvable(task, context)
    assert not approvable(presets.tool_decision(), context)  # grounded calls only


def test_a_task_file_with_a_confirm_action_falls_back_to_asking() -> None:
    data = presets.tool_decision().model_dump(mode="json")
    del data["fallback_action"]  # as a task file that leaves it out
    # the minimax action among those that need no call: confirming would tie with asking
    assert Task.model_validate(data).fallback_action == "request_for_info"


@pytest.mark.parametrize(("effect", "action"), [("read", "tool_call"), ("write", "confirm"),
                                                ("irreversible", "confirm")])  # fmt: skip
def test_after_a_tool_result_a_call_is_priced_by_its_effect_too(effect: str, action: str) -> None:
    # The user asked; a tool result came back; the next call is decided by the tool-result
    # task derived from the user turn's (after_tool_result_for): a read is sent at q = 0.8,
    # a write or a payment is put to the user first.
    from langchain_core.messages import ToolMessage

    after = presets.after_tool_result_for(presets.tool_decision())
    assert after is not None and after.confirm_action == "confirm"
    lookup = AIMessage(content="", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"},
                                                "id": "t1"}])  # fmt: skip
    conversation = [*REQUEST, lookup, ToolMessage(content="Sunny", tool_call_id="t1")]
    again = tool_call_message("get_weather", city="Paris, FR")
    context = GroundingContext([weather(effect)], conversation)
    decider = Decider(after, ConstantCalibrator([0.8, 0.1, 0.05, 0.05]))
    decision = decider.decide([again] * 12 + [QUESTION] * 4, context=context)
    assert decision.effect == effect
    assert decision.action == action
