from __future__ import annotations

import numpy as np
import pytest
from langchain_core.messages import AIMessage

from taskcal_agents.decision import _presets as tasks
from taskcal_agents.parsing._labels import ChoiceParser, RatingParser, ToolDecisionParser


def test_tool_decision_default() -> None:
    task = tasks.tool_decision()
    assert task.labels == ["tool_call", "request_for_info", "cannot_answer"]
    assert task.actions == ["tool_call", "confirm", "request_for_info", "cannot_answer"]
    np.testing.assert_array_equal(task.cost_matrix(), [[0, 0.25, 1, 2], [4, 1, 0, 2], [4, 1, 1, 0]])
    for effect, wrong in (("read", 1), ("write", 4), ("irreversible", 10)):
        assert task.cost_matrix(effect)[:, 0].tolist() == [0, wrong, wrong]
    assert task.confirm_action == "confirm"
    assert task.fallback_action == "request_for_info"
    assert task.ask_action == "request_for_info"
    assert task.abstain_action == "cannot_answer"
    assert isinstance(task.get_parser(), ToolDecisionParser)


def test_the_flat_tool_decision() -> None:
    task = tasks.tool_decision(cost=tasks.FLAT_TOOL_DECISION_COST)
    assert task.labels == task.actions == ["tool_call", "request_for_info", "cannot_answer"]
    np.testing.assert_array_equal(task.cost_matrix(), [[0, 1, 2], [4, 0, 1], [5, 2, 0]])
    assert task.effects is None and task.confirm_action is None
    np.testing.assert_array_equal(task.cost_matrix("read"), task.cost_matrix())


def test_tool_decision_direct_answer_and_tools() -> None:
    task = tasks.tool_decision(direct_answer=True, tool_names=["get_weather"], prompt="p")
    assert task.labels[-1] == "direct_answer"
    assert task.cost_matrix().shape == (4, 4)
    assert task.prompt == "p"
    assert task.parse(AIMessage(content="It is sunny.")) == "direct_answer"
    assert task.get_parser() == ToolDecisionParser(direct_answer=True, tool_names=("get_weather",))


def test_tool_decision_custom_cost() -> None:
    task = tasks.tool_decision(cost=[[0, 1, 1], [1, 0, 1], [1, 1, 0]])
    np.testing.assert_array_equal(task.cost_matrix(), 1 - np.eye(3))


def test_answer_or_abstain() -> None:
    task = tasks.answer_or_abstain(wrong_answer_cost=3, abstain_cost=0.5)
    assert task.labels == ["answer", "abstain"]
    np.testing.assert_array_equal(task.cost_matrix(), [[0, 0.5], [3, 0]])
    assert task.fallback_action == "abstain"
    assert task.parse(AIMessage(content="I don't know")) == "abstain"


@pytest.mark.parametrize("k", [2, 5, 10])
def test_rating_l1(k: int) -> None:
    task = tasks.rating(k=k)
    i, j = np.indices((k, k))
    np.testing.assert_array_equal(task.cost_matrix(), np.abs(i - j))
    assert task.labels == [str(v) for v in range(1, k + 1)]
    assert task.get_parser() == RatingParser(k=k)


def test_multiple_choice_list_and_mapping() -> None:
    task = tasks.multiple_choice(["Paris", "London", "Rome"])
    assert task.labels == ["A", "B", "C"]
    np.testing.assert_array_equal(task.cost_matrix(), 1 - np.eye(3))
    assert task.parse(AIMessage(content="Rome")) == "C"
    mapped = tasks.multiple_choice({"x": "yes", "y": "no"})
    assert mapped.labels == ["x", "y"]
    assert mapped.get_parser() == ChoiceParser(labels=("x", "y"), texts=("yes", "no"))
    assert mapped.parse(AIMessage(content="(y)")) == "y"


@pytest.mark.parametrize(
    "factory",
    [
        tasks.tool_decision,
        tasks.answer_or_abstain,
        tasks.rating,
        lambda: tasks.multiple_choice(["a", "b"]),
    ],
)
def test_factories_round_trip(tmp_path, factory) -> None:  # type: ignore[no-untyped-def]
    from taskcal_agents.decision._task import Task

    task = factory()
    assert Task.from_file(task.to_file(tmp_path / "t.yaml")) == task


def test_rating_zero_based() -> None:
    task = tasks.rating(k=6, low=0)
    assert task.labels == ["0", "1", "2", "3", "4", "5"]
    assert task.get_parser() == RatingParser(k=6, low=0)
    assert task.parse(AIMessage(content="Score: 0")) == "0"
    assert task.cost_matrix()[0, 5] == 5
    assert type(task).model_validate_json(task.model_dump_json()) == task
