from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.messages import AIMessage
from pydantic import ValidationError

from calibrators import minimax_action
from taskcal_agents.decision._task import ParserSpec, Task
from taskcal_agents.errors import ConfigurationError, DataFileError
from taskcal_agents.parsing._labels import ToolDecisionParser


def make(**overrides: Any) -> Task:
    fields: dict[str, Any] = {
        "name": "t",
        "labels": ["tool_call", "request_for_info", "cannot_answer"],
        "cost": [[0, 1, 2], [4, 0, 1], [5, 2, 0]],
        "parser": "tool_decision",
    }
    fields.update(overrides)
    return Task(**fields)


def test_defaults_filled_in() -> None:
    task = make()
    assert task.actions == task.labels
    assert task.fallback_action == "request_for_info"  # column maxima 5, 2, 2 -> first of ties
    assert task.parser == ParserSpec(name="tool_decision", options={})
    assert task.unparsed == "drop"
    assert task.unparsed_as is None
    assert isinstance(task.get_parser(), ToolDecisionParser)


def test_cost_matrix_is_read_only() -> None:
    cost = make().cost_matrix()
    assert cost.shape == (3, 3)
    assert cost.dtype == np.float64
    with pytest.raises(ValueError, match="read-only"):
        cost[0, 0] = 1.0


def test_frozen() -> None:
    task = make()
    with pytest.raises(ValidationError, match="Instance is frozen"):
        task.name = "other"  # type: ignore[misc]


def test_minimax_action() -> None:
    cost = np.array([[0.0, 3.0, 1.0], [9.0, 0.0, 1.5]])
    brute = min(range(3), key=lambda a: (max(cost[:, a]), a))
    assert minimax_action(cost) == brute == 2


def test_actions_differ_from_labels() -> None:
    task = make(
        labels=["answer", "abstain"],
        actions=["answer", "abstain", "ask"],
        cost=[[0, 1, 0.5], [4, 0, 0.5]],
        parser="answer_or_abstain",
    )
    assert task.cost_matrix().shape == (2, 3)
    assert task.fallback_action == "ask"
    assert task.action_index("ask") == 2
    assert task.label_index("abstain") == 1


def test_index_errors() -> None:
    task = make()
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "Task 't' has no label 'x'; labels are ['tool_call', 'request_for_info', "
            "'cannot_answer']."
        ),
    ):
        task.label_index("x")
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "Task 't' has no action 'x'; actions are ['tool_call', 'request_for_info', "
            "'cannot_answer']."
        ),
    ):
        task.action_index("x")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"cost": [[0, 1], [1, 0]]},
            "field 'cost' must have shape (len(labels), len(actions)) = (3, 3) (row = true "
            "label, column = action), got shape (2, 2).",
        ),
        (
            {"cost": [[0, 1, 2], [4, 0, 1], [5, 2]]},
            "field 'cost' must have shape (len(labels), len(actions)) = (3, 3) (row = true "
            "label, column = action), got ragged rows.",
        ),
        (
            {"cost": [[0, 1, 2], [4, 0, -1], [5, 2, 0]]},
            "field 'cost' must be finite and >= 0, got [[0.0, 1.0, 2.0], [4.0, 0.0, -1.0], "
            "[5.0, 2.0, 0.0]].",
        ),
        (
            {"cost": [[0, 1, 2], [4, 0, float("inf")], [5, 2, 0]]},
            "field 'cost' must be finite and >= 0, got [[0.0, 1.0, 2.0], [4.0, 0.0, inf], "
            "[5.0, 2.0, 0.0]].",
        ),
        (
            {"labels": ["a", "a", "b"]},
            "field 'labels' must hold at least 2 distinct non-empty names, got ['a', 'a', 'b'].",
        ),
        (
            {"actions": []},
            "field 'actions' must hold at least 1 distinct non-empty names, got [].",
        ),
        (
            {"fallback_action": "x"},
            "field 'fallback_action' must be one of the actions ['tool_call', "
            "'request_for_info', 'cannot_answer'], got 'x'.",
        ),
        (
            {"ask_action": "x"},
            "field 'ask_action' must be one of the actions ['tool_call', "
            "'request_for_info', 'cannot_answer'], got 'x'.",
        ),
        (
            {"unparsed": "as:nope"},
            "field 'unparsed' must be 'drop', 'other' or 'as:<label>' with a label in "
            "['tool_call', 'request_for_info', 'cannot_answer'], got 'as:nope'.",
        ),
        (
            {"unparsed": "keep"},
            "field 'unparsed' must be 'drop', 'other' or 'as:<label>' with a label in "
            "['tool_call', 'request_for_info', 'cannot_answer'], got 'keep'.",
        ),
        (
            {"unparsed": "as:other"},
            "field 'unparsed' must be 'drop', 'other' or 'as:<label>' with a label in "
            "['tool_call', 'request_for_info', 'cannot_answer'], got 'as:other'.",
        ),
        (
            {"parser": {"name": "tool_decision", "options": {"direct_answer": True}}},
            "parser 'tool_decision' can return labels ['direct_answer'] that are not "
            "among the task labels ['tool_call', 'request_for_info', 'cannot_answer']; add them "
            "to 'labels' or change the parser options.",
        ),
        (
            {"parser": {"name": "rating", "options": {"n": 3}}},
            "parser 'rating' got unknown option(s) ['n']; accepted options are "
            "['k', 'labels', 'low'].",
        ),
        (
            {"extra": 1},
            "field 'extra': Extra inputs are not permitted (got 1; the fields are ['name', "
            "'labels', 'actions', 'cost', 'parser', 'unparsed', 'fallback_action', "
            "'call_action', 'ask_action', 'abstain_action', 'sampled_actions', 'ask_text', "
            "'abstain_text', 'prompt', 'description', 'answer_clusters', 'grounding', "
            "'effects', 'confirm_action', 'trust']).",
        ),
    ],
)
def test_validation_errors(overrides: dict[str, Any], message: str) -> None:
    full = "^" + re.escape("Task 't' is invalid (1 error): " + message) + "$"
    with pytest.raises(ConfigurationError, match=full) as raised:
        make(**overrides)
    assert isinstance(raised.value.__cause__, ValidationError)
    with pytest.raises(ConfigurationError, match=full):
        Task.model_validate({**make().model_dump(), **overrides})


def test_constructor_lists_each_bad_field_with_its_input() -> None:
    message = (
        "Task 't' is invalid (3 errors): field 'cost[1]': Input should be a valid list, got 4; "
        "field 'grounding.belief': Input should be 'features', 'relabel' or 'off', got 'all'; "
        "field 'extra': Extra inputs are not permitted (got 1; the fields are ['name', "
        "'labels', 'actions', 'cost', 'parser', 'unparsed', 'fallback_action', 'call_action', "
        "'ask_action', 'abstain_action', 'sampled_actions', 'ask_text', 'abstain_text', "
        "'prompt', 'description', 'answer_clusters', 'grounding', 'effects', 'confirm_action', "
        "'trust'])."
    )
    with pytest.raises(ConfigurationError, match=f"^{re.escape(message)}$") as raised:
        make(cost=[[0, 1, 2], 4, [5, 2, 0]], grounding={"belief": "all"}, extra=1)
    cause = raised.value.__cause__
    assert isinstance(cause, ValidationError) and cause.error_count() == 3


def test_model_validate_raises_a_configuration_error() -> None:
    message = (
        "Task is invalid (2 errors): field 'name': Field required; field 'labels[1]': Input "
        "should be a valid string, got 2."
    )
    with pytest.raises(ConfigurationError, match=f"^{re.escape(message)}$") as raised:
        Task.model_validate(
            {"labels": ["a", 2], "cost": [[0, 1], [1, 0]], "parser": "answer_or_abstain"}
        )
    assert isinstance(raised.value.__cause__, ValidationError)
    message = (
        "Task is invalid (1 error): Input should be a valid dictionary or instance of Task, "
        "got ['tool_call']."
    )
    with pytest.raises(ConfigurationError, match=f"^{re.escape(message)}$"):
        Task.model_validate(["tool_call"])


def test_model_validate_json_raises_a_configuration_error() -> None:
    text = json.dumps({**make().model_dump(mode="json"), "unparsed": "keep"})
    message = (
        "Task 't' is invalid (1 error): field 'unparsed' must be 'drop', 'other' or "
        "'as:<label>' with a label in ['tool_call', 'request_for_info', 'cannot_answer'], "
        "got 'keep'."
    )
    with pytest.raises(ConfigurationError, match=f"^{re.escape(message)}$"):
        Task.model_validate_json(text)
    message = (
        "Task is invalid (1 error): Invalid JSON: EOF while parsing a value at line 1 "
        "column 8, got '{\"name\":'."
    )
    with pytest.raises(ConfigurationError, match=f"^{re.escape(message)}$"):
        Task.model_validate_json('{"name":')
    assert Task.model_validate_json(make().model_dump_json()) == make()


def test_a_configuration_error_of_a_validator_is_listed_once() -> None:
    message = (
        "Task 't' is invalid (1 error): parser 'rating' got unknown option(s) ['n']; "
        "accepted options are ['k', 'labels', 'low']."
    )
    with pytest.raises(ConfigurationError, match=f"^{re.escape(message)}$") as raised:
        make(parser={"name": "rating", "options": {"n": 3}})
    cause = raised.value.__cause__
    assert isinstance(cause, ValidationError)
    [error] = cause.errors()
    assert isinstance(error["ctx"]["error"], ConfigurationError)  # get_parser's own error


def test_a_nested_task_fails_as_its_owner() -> None:
    """Inside another pydantic model, a task keeps pydantic's semantics."""
    from pydantic import BaseModel

    class Owner(BaseModel):
        task: Task

    assert Owner(task=make().model_dump()).task == make()
    with pytest.raises(ValidationError, match=r"1 validation error for Owner\ntask\.labels\n"):
        Owner(task={**make().model_dump(), "labels": "tool_call"})


def test_from_file_names_the_file_and_the_bad_field(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({**make().model_dump(mode="json"), "cost": "cheap"}))
    message = (
        f"{path}: Task 't' is invalid (1 error): field 'cost': Input should be a valid list, "
        "got 'cheap'. Correct the task file."
    )
    with pytest.raises(DataFileError, match=f"^{re.escape(message)}$") as raised:
        Task.from_file(path)
    assert isinstance(raised.value.__cause__, ConfigurationError)


def test_parse_policies() -> None:
    question = AIMessage(content="Which city?")
    junk = AIMessage(content="Sunny.")
    drop = make()
    assert drop.parse(question) == "request_for_info"
    assert drop.parse(junk) is None
    assert drop.parse_completion(junk) is None
    mapped = make(unparsed="as:cannot_answer")
    assert mapped.unparsed_as == "cannot_answer"
    assert mapped.parse(junk) == "cannot_answer"
    assert mapped.parse_completion(junk) is None


def test_other_policy() -> None:
    junk = AIMessage(content="Sunny.")
    task = make(unparsed="other")
    assert (task.unparsed_as, task.unparsed_evidence, task.n_features) == (None, True, 4)
    assert task.parse(junk) is None
    assert (make().unparsed_evidence, make().n_features) == (False, 3)
    assert make(unparsed="as:cannot_answer").n_features == 3
    msgs = [AIMessage(content="Which city?"), junk, AIMessage(content="")]
    belief = task.belief(msgs, alpha=0)
    assert belief.unparsed_evidence
    assert belief.counts.tolist() == [0.0, 1.0, 0.0]
    assert (belief.n, belief.n_unparsed) == (3, 2)
    np.testing.assert_allclose(belief.probs, [2 / 9, 1 / 3 + 2 / 9, 2 / 9])
    np.testing.assert_allclose(belief.features, [0, 1 / 3, 0, 2 / 3])
    same = task.belief_from_labels([task.parse_completion(m) for m in msgs], alpha=0)
    np.testing.assert_array_equal(same.features, belief.features)


def test_out_of_set_parser_output_is_unparsed() -> None:
    task = make(labels=["spam", "ham"], cost=[[0, 1], [1, 0]], parser="schema")
    assert task.parse(AIMessage(content='{"label": "eggs"}')) is None
    assert task.parse(AIMessage(content='{"label": "ham"}')) == "ham"


def test_belief_counts_unparsed() -> None:
    task = make(unparsed="as:cannot_answer")
    msgs = [AIMessage(content="Which city?"), AIMessage(content="Sunny."), AIMessage(content="")]
    belief = task.belief(msgs, alpha=0)
    assert belief.counts.tolist() == [0.0, 1.0, 2.0]
    assert (belief.n, belief.n_unparsed) == (3, 2)


@pytest.mark.parametrize("unparsed", ["as:cannot_answer", "other"])
@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".json"])
def test_file_round_trip(tmp_path: Path, suffix: str, unparsed: str) -> None:
    task = make(
        parser={"name": "tool_decision", "options": {"tool_names": ["get_weather"]}},
        unparsed=unparsed,
        prompt="Decide.",
    )
    path = task.to_file(tmp_path / f"task{suffix}")
    loaded = Task.from_file(path)
    assert loaded == task
    assert (loaded.unparsed, loaded.unparsed_evidence) == (unparsed, unparsed == "other")
    assert loaded.model_dump() == task.model_dump()
    assert loaded.get_parser() == task.get_parser()
    text = path.read_text()
    data = json.loads(text) if suffix == ".json" else None
    if data is not None:
        assert data["format_version"] == 1
    else:
        assert text.startswith("format_version: 1\n")


def test_from_file_yaml_by_hand(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(
        "name: rate\nlabels: ['1', '2', '3']\n"
        "cost: [[0, 1, 2], [1, 0, 1], [2, 1, 0]]\n"
        "parser: {name: rating, options: {k: 3}}\n"
    )
    task = Task.from_file(path)
    assert task.fallback_action == "2"
    assert task.parse(AIMessage(content="I'd rate it 3/3")) == "3"


def test_from_file_errors(tmp_path: Path) -> None:
    bad_suffix = tmp_path / "t.txt"
    with pytest.raises(
        DataFileError,
        match=re.escape(
            f"{bad_suffix}: task file must end in .yaml, .yml or .json, got suffix '.txt'."
        ),
    ):
        Task.from_file(bad_suffix)
    missing = tmp_path / "missing.yaml"
    with pytest.raises(DataFileError, match=re.escape(f"{missing}: cannot read task file: ")):
        Task.from_file(missing)
    listy = tmp_path / "list.json"
    listy.write_text("[1, 2]")
    with pytest.raises(
        DataFileError, match=re.escape(f"{listy}: a task file must hold a mapping, got list.")
    ):
        Task.from_file(listy)
    future = tmp_path / "future.json"
    future.write_text(json.dumps({"format_version": 2, **make().model_dump()}))
    with pytest.raises(
        DataFileError,
        match=re.escape(
            f"{future}: task file has format_version 2, this version of taskcal-agents reads "
            "format_version 1."
        ),
    ):
        Task.from_file(future)


def test_to_file_bad_suffix(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            f"Task.to_file parameter 'path' must end in .yaml, .yml or .json, got "
            f"'{tmp_path / 't.toml'}'."
        ),
    ):
        make().to_file(tmp_path / "t.toml")


class _SendOrAsk:
    """g_T of a task whose call action is not named ``tool_call``."""

    labels = ("send", "ask")

    def __call__(self, message: AIMessage) -> str | None:
        return "send" if message.tool_calls else "ask"


def test_the_call_action_is_a_role_of_the_task() -> None:
    from taskcal_agents.decision._decider import Decider
    from taskcal_agents.decision._presets import tool_decision
    from taskcal_agents.decision._task import GroundingSpec
    from taskcal_agents.parsing._grounding import GroundingContext
    from taskcal_agents.parsing._registry import register_parser

    legacy = tool_decision()
    assert legacy.call_action == "tool_call"
    assert "call_action" not in legacy.model_dump()  # dumps (and hashes) as before the field
    assert Task.model_validate(legacy.model_dump()) == legacy

    register_parser(f"{__name__}:send_or_ask", _SendOrAsk)
    task = Task(
        name="send_or_ask", labels=["send", "ask"], cost=[[0, 1], [4, 0]],
        parser=f"{__name__}:send_or_ask", call_action="send", ask_action="ask",
        sampled_actions=["send"], grounding=GroundingSpec(belief="relabel"),
    )  # fmt: skip
    assert task.model_dump()["call_action"] == "send"
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
    }}}  # fmt: skip
    call = AIMessage(content="", tool_calls=[{"name": "get_weather", "args": {}, "id": "1"}])
    context = GroundingContext([tool], [("user", "What is the weather?")])
    decision = Decider(task).decide([call] * 4, context=context)
    # the call lacks its required argument: under grounding it reads as the ask action
    assert decision.action == "ask" and decision.counts == {"send": 0.0, "ask": 4.0}
    message = (
        "Task 'bad' is invalid (1 error): field 'call_action' must be one of the actions "
        "['send', 'ask'], got 'call'."
    )
    with pytest.raises(ConfigurationError, match=f"^{re.escape(message)}$"):
        Task(
            name="bad", labels=["send", "ask"], cost=[[0, 1], [4, 0]],
            parser=f"{__name__}:send_or_ask", call_action="call",
        )  # fmt: skip
