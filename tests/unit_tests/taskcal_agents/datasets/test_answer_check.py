"""BFCL's possible answers: the AST rules, and the executed call that evaluation scores."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.messages import AIMessage

from taskcal_agents.datasets import DatasetItem, call_matches_answer, write_dataset
from taskcal_agents.decision._decider import Decider
from taskcal_agents.parsing._grounding import GroundingContext
from taskcal_agents.workflow import SampleSettings, read_samples, sample_header
from taskcal_agents.workflow._data import dataset_items, eval_arrays, load_eval_arrays
from taskcal_agents.workflow._evaluate import evaluate_arrays
from taskcal_agents.workflow._runner import message_from_dict, message_to_dict
from taskcal_agents.workflow._store import SamplesStore
from tests.unit_tests.taskcal_agents.helpers.workflow_fakes import LOOKUP, _samples_file, tool_task

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "nights": {"type": "integer"},
        "budget": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "room": {"type": "object"},
        "smoking": {"type": "boolean"},
    },
    "required": ["city"],
}
ANSWER = {
    "book": {
        "city": ["New York, NY", "NYC"],
        "nights": [3, ""],
        "budget": [120.0, ""],
        "tags": [["Quiet", "high floor"], ""],
        "room": [{"beds": [2], "view": ["sea", ""]}, ""],
        "smoking": ["", False],
    }
}


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("book", {"city": "new york ny"}, True),  # standardised: spaces, commas, case
        ("book", {"city": "NYC", "nights": 3, "budget": 120}, True),  # int for a number
        ("book", {"city": "NYC", "tags": ["quiet", "High-Floor"]}, True),
        ("book", {"city": "NYC", "room": {"beds": 2}}, True),  # "" marks view optional
        ("book", {"city": "NYC", "smoking": False}, True),
        ("hotel", {"city": "NYC"}, False),  # another function
        ("book", {"nights": 3}, False),  # a required parameter missing
        ("book", {"city": "Boston"}, False),  # a value not accepted
        ("book", {"city": "NYC", "nights": "3"}, False),  # the wrong type
        ("book", {"city": "NYC", "nights": 3.0}, False),  # a float for an integer
        ("book", {"city": "NYC", "smoking": 0}, False),  # an int for a boolean
        ("book", {"city": "NYC", "pets": True}, False),  # a parameter the answer lacks
        ("book", {"city": "NYC", "tags": ["quiet"]}, False),
        ("book", {"city": "NYC", "room": {"beds": 2, "floor": 9}}, False),
        ("book", {"city": "NYC", "room": {"view": "sea"}}, False),  # beds is not optional
    ],
)
def test_bfcl_ast_rules(name: str, args: dict[str, Any], expected: bool) -> None:
    assert call_matches_answer(name, args, ANSWER, SCHEMA) is expected


@pytest.mark.parametrize(
    ("schema", "value", "accepted", "expected"),
    [
        ({"type": "array", "items": {"type": "integer"}}, [], [[1], ""], True),  # "" → []
        ({"type": "array", "items": {"type": "object"}}, [], [[{"k": [1]}], ""], True),
        ({"type": "array", "items": {"type": "number"}}, [1, 2], [[1.0, 2.0]], False),
        ({"type": "array", "items": {"type": "integer"}}, [1.0], [[1]], False),
        ({"type": "array", "items": {"type": "string"}}, ["a", 1], [["a", 1]], False),
        ({"type": "array", "items": {"type": "string"}}, ["A b"], [["ab"]], True),
        ({"type": "array"}, [["A b"]], [[["ab"]]], False),  # one level standardised
        ({"type": "string"}, None, ["", None], True),  # BFCL's "variable": the answer's type
        ({"type": "integer"}, 5.0, [5.0], True),
        ({"type": "integer"}, True, [1], False),
        ({}, True, [1], False),  # untyped is BFCL's "any", a string
        ({}, {"k": 1}, [{"k": 1}], True),  # no crash on an untyped object
        ({}, [{"k": 1}], [[{"k": 1}]], True),
        ({"type": "object"}, {"k": "A b", "j": 2}, [{"k": ["ab"], "j": [2], "i": [""]}], True),
        ({"type": "object"}, {"k": 1}, [{"k": [1], "j": [2]}], False),  # j not optional
        ({"type": "array", "items": {"type": "object"}}, [{"k": 1}], [[{"k": [1]}]], True),
        ({"type": "array", "items": {"type": "object"}}, [{"k": 2}], [[{"k": [1]}]], False),
    ],
)
def test_bfcl_value_rules(
    schema: dict[str, Any], value: Any, accepted: list[Any], expected: bool
) -> None:
    params = {"type": "object", "properties": {"p": schema}, "required": []}
    assert call_matches_answer("f", {"p": value}, {"f": {"p": accepted}}, params) is expected


def test_a_parameter_without_the_optional_mark_must_be_sent() -> None:
    answer = {"book": {"city": ["NYC"], "nights": [3]}}
    assert not call_matches_answer("book", {"city": "NYC"}, answer, SCHEMA)
    assert call_matches_answer("book", {"city": "NYC", "nights": 3}, answer, SCHEMA)


def test_without_a_schema_only_the_values_decide() -> None:
    assert call_matches_answer("book", {"city": "NYC", "nights": 3}, ANSWER)
    assert not call_matches_answer("book", {"nights": 3}, ANSWER)  # city is not optional


def test_evaluation_scores_the_call_the_runtime_would_send(tmp_path: Path) -> None:
    # Items with a possible answer: the even ones accept their own query, the odd ones
    # another; the call scored is the Decider's representative call for that item.
    path = _samples_file(tmp_path, n=90)
    samples = read_samples(path)
    items = []
    for item_id, record in sorted(samples.records.items()):
        i = int(item_id.split("-")[1])
        meta = {"possible_answer": {"lookup": {"q": [f"x{i}" if i % 2 == 0 else "other"]}}}
        items.append(
            DatasetItem(
                id=item_id, messages=record["messages"], tools=[LOOKUP], label=record["label"],
                meta=meta if record["label"] == "tool_call" else {},
            )
        )  # fmt: skip
    data_path = tmp_path / "items.jsonl"
    write_dataset(items, data_path)
    task = tool_task()
    data = eval_arrays(task, samples, alpha=0.1, items=dataset_items(samples, data_path))
    assert data.call_correct is not None
    answers = {item.id: item.meta.get("possible_answer") for item in items}
    decider = Decider(task, alpha=0.1)
    scored = 0
    for i, item_id in enumerate(data.ids):
        record = samples.records[item_id]
        decision = decider.decide(
            [message_from_dict(m) for m in record["samples"]],
            tool_names=record["tool_names"],
            context=GroundingContext(record["tools"], record["messages"]),
        )
        if record["label"] != "tool_call" or decision.action != "tool_call":
            continue
        scored += 1
        assert decision.message is not None
        sent = decision.message.tool_calls[0]
        expected = call_matches_answer(sent["name"], sent["args"], answers[item_id])
        assert data.call_correct[i] == float(expected), item_id
    assert scored >= 3
    unanswered = data.y != task.labels.index("tool_call")
    assert np.isnan(data.call_correct[unanswered]).all()
    evaluation = evaluate_arrays(data, calibrators=(), n_folds=3, n_permutations=0)
    raw = next(r for r in evaluation.rows if r["decoder"] == "mbr_raw")
    assert 0.0 < raw["executed_call_correct"] < 1.0


PAGED = copy.deepcopy(LOOKUP)  # the same tool with an optional page
PAGED["function"]["parameters"]["properties"]["page"] = {"type": "integer"}


def _call(q: str, **extra: Any) -> AIMessage:
    return AIMessage(
        content="", tool_calls=[{"name": "lookup", "args": {"q": q, **extra}, "id": q}]
    )


def test_the_scored_call_is_the_modal_grounded_one_as_sent(tmp_path: Path) -> None:
    # One sample calls with a value the user never gave (first), seven with the user's value and
    # an invented page: the runtime sends lookup(q="x1") (the invented page dropped), which
    # BFCL accepts; the first sample's call, or the call with its page, it would not.
    task = tool_task()
    samples = [_call("x9")] + [_call("x1", page=7)] * 7
    conversation = [{"role": "user", "content": "Please look up x1."}]
    path = tmp_path / "s.jsonl"
    with SamplesStore.open(path, sample_header(task, SampleSettings(n=8), None)) as store:
        store.append(
            {
                "id": "item-0", "label": "tool_call", "labels": ["tool_call"] * 8,
                "samples": [message_to_dict(m) for m in samples], "greedy": None,
                "greedy_label": None, "tool_names": ["lookup"], "tools": [PAGED],
                "messages": conversation,
            }
        )  # fmt: skip
    answer = {"lookup": {"q": ["x1"], "page": ["", 1]}}
    item = DatasetItem(
        id="item-0", messages=conversation, tools=[PAGED], label="tool_call",
        meta={"possible_answer": answer},
    )  # fmt: skip
    write_dataset([item], tmp_path / "items.jsonl")
    records = read_samples(path)
    data = eval_arrays(task, records, items=dataset_items(records, tmp_path / "items.jsonl"))
    assert data.call_correct is not None and data.call_correct.tolist() == [1.0]
    decision = Decider(task).decide(
        samples, tool_names=["lookup"], context=GroundingContext([PAGED], conversation)
    )
    assert decision.action == "tool_call" and decision.message is not None
    assert decision.message.tool_calls[0]["args"] == {"q": "x1"}
    assert not call_matches_answer(
        "lookup", {"q": "x1", "page": 7}, answer, PAGED["function"]["parameters"]
    )


def test_a_dataset_of_other_conversations_scores_no_call(tmp_path: Path) -> None:
    path = _samples_file(tmp_path, n=6)
    samples = read_samples(path)
    items = [
        DatasetItem(
            id=item_id, messages=[{"role": "user", "content": "something else"}], tools=[LOOKUP],
            label=record["label"], meta={"possible_answer": {"lookup": {"q": ["x0"]}}},
        )
        for item_id, record in samples.records.items()
    ]  # fmt: skip
    write_dataset(items, tmp_path / "other.jsonl")
    with pytest.warns(UserWarning, match="another conversation"):
        data = eval_arrays(
            tool_task(), samples, items=dataset_items(samples, tmp_path / "other.jsonl")
        )
    assert data.call_correct is None  # no call scored against another dataset's answers


def test_load_eval_arrays_reads_the_answers_of_the_dataset_the_header_names(
    tmp_path: Path,
) -> None:
    path = _samples_file(tmp_path, n=30)
    samples = read_samples(path)
    assert load_eval_arrays(path)[2].call_correct is None  # the header names no dataset here
    items = [
        DatasetItem(
            id=item_id, messages=record["messages"], tools=[LOOKUP], label=record["label"],
            meta={"possible_answer": {"lookup": {"q": [f"x{int(item_id[-3:])}"]}}},
        )
        for item_id, record in samples.records.items()
    ]  # fmt: skip
    write_dataset(items, tmp_path / "items.jsonl")
    data = load_eval_arrays(path, data=tmp_path / "items.jsonl")[2]
    assert data.call_correct is not None
    assert np.nanmin(data.call_correct) == 1.0  # every sampled call is the item's own query
