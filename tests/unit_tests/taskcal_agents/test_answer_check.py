"""BFCL's possible answers: the AST rules, and the executed call that evaluation scores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from taskcal_agents.datasets import DatasetItem, call_matches_answer, write_dataset
from taskcal_agents.decision.decider import Decider
from taskcal_agents.parsing.grounding import GroundingContext
from taskcal_agents.workflow import eval_arrays, evaluate_arrays, read_samples
from taskcal_agents.workflow._data import dataset_items
from taskcal_agents.workflow._runner import message_from_dict

from .test_workflow_fakes import tool_task
from .test_workflow_runtime import LOOKUP, _samples_file

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
