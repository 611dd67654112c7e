"""The BFCL tool-decision corpus: phrase deletion, hard negatives, the source, the splits."""

from __future__ import annotations

import hashlib
import json
import random
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from taskcal_agents.datasets import convert, default_task
from taskcal_agents.datasets._bfcl import SPLITS
from taskcal_agents.datasets._bfcl_asks import delete_argument
from taskcal_agents.datasets._bfcl_negatives import hard_negatives
from taskcal_agents.datasets._bfcl_source import BFCL_WHEELS, Request, read_requests
from taskcal_agents.errors import ConfigurationError, DataFileError
from tests.unit_tests.taskcal_agents.helpers.data import write_category


def weather(required: tuple[str, ...] = ("city",)) -> dict[str, Any]:
    return {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "dict",
            "properties": {
                "city": {"type": "string", "description": "The city."},
                "nights": {"type": "integer", "description": "Nights."},
                "receiver": {"type": "string", "description": "Email of the receiver."},
            },
            "required": list(required),
        },
    }


def delete(question: str, answer: dict[str, list[Any]], required: tuple[str, ...] = ("city",)):
    return delete_argument(question, weather(required), answer, random.Random(0))


@pytest.mark.parametrize(
    ("question", "param", "value", "expected", "phrase"),
    [
        ("What's the weather in Paris today?", "city", "Paris", "What's the weather today?",
         "in Paris"),
        ("Book a room for 3 nights in Rome.", "nights", 3, "Book a room in Rome.",
         "for 3 nights"),
        ("Find me a one-way flight to Portland, OR on Friday.", "city", "Portland",
         "Find me a one-way flight on Friday.", "to Portland, OR"),
        ("Send the report to my boss. Their email is boss@example.com.", "receiver",
         "boss@example.com", "Send the report to my boss.",
         "Their email is boss@example.com."),
        ("I live in Berlin. What's the weather like?", "city", "Berlin",
         "What's the weather like?", "I live in Berlin."),  # the sentence, not "I live."
        ("Start from a speed of 10 m/s, accelerate for 5 s.", "nights", 10,
         "Start from a speed, accelerate for 5 s.", "of 10 m/s"),
    ],
)  # fmt: skip
def test_the_phrase_that_carries_the_value_is_removed(
    question: str, param: str, value: Any, expected: str, phrase: str
) -> None:
    assert delete(question, {param: [value]}, (param,)) == (expected, param, phrase)


@pytest.mark.parametrize(
    ("question", "param", "value"),
    [
        ("What's the distance between Boston and Washington?", "city", "Boston"),  # a pair
        ("Find the greatest common divisor of 100 and 120.", "nights", 100),  # a list
        ("Integrate f from 1 to 2.", "nights", 1),  # a range
        ("Describe the structure of human cell.", "city", "human"),  # inside a noun phrase
        ("The server is called Paris and the host is x.", "city", "Paris"),  # a copula's
        ("Paris or Paris: the weather in Paris?", "city", "Paris"),  # more than once
        ("Paris weather now.", "city", "Paris"),  # no phrase carries it
        ("What's the weather in Paris?", "city", ""),  # no value to remove
        ("Find restaurants in Paris and London.", "city", "Paris"),  # one of a pair
        ("I'm currently in Paris, and I want a museum.", "city", "Paris"),  # "currently,"
        ("Book a room starting on 2023-05-01.", "city", "2023-05-01"),  # "starting."
        ("I like art. Show Paris museums.", "city", "Paris"),  # the request itself
    ],
)
def test_a_removal_that_would_not_read_naturally_is_refused(
    question: str, param: str, value: Any
) -> None:
    assert delete(question, {param: [value]}, (param,)) is None


def test_only_a_required_parameter_is_removed() -> None:
    assert delete("What's the weather in Paris today?", {"city": ["Paris"]}, ()) is None


# ------------------------------------------------------------------ a small BFCL source


@pytest.fixture
def source(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    write_category(root, "simple_python", 36, 1)
    write_category(root, "multiple", 36, 2)
    write_category(root, "live_multiple", 36, 3)
    # Reserved categories beside them are never read: their ids must not appear.
    write_category(root, "live_simple", 36, 1)
    write_category(root, "irrelevance", 36, 1)
    return root


def test_the_corpus_is_balanced_split_and_reads_no_reserved_category(source: Path) -> None:
    items = convert("bfcl", source)
    counts = Counter((i.meta["split"], i.label) for i in items)
    for split in SPLITS:
        assert len({counts[split, label] for label in
                    ("tool_call", "request_for_info", "cannot_answer")}) == 1  # fmt: skip
    assert counts["test", "tool_call"] > 0 and counts["train", "tool_call"] > 0
    assert {i.meta["category"] for i in items} <= {"simple_python", "multiple", "live_multiple"}
    assert not any("live_simple" in i.id or "irrelevance" in i.id for i in items)
    assert len({i.meta["bfcl_id"] for i in items}) == len(items)  # each request plays once
    assert [i.meta["split"] for i in items] == sorted(
        (i.meta["split"] for i in items), key=SPLITS.index
    )
    asks = [i for i in items if i.label == "request_for_info"]
    assert all(i.meta["removed"].startswith("in ") for i in asks)
    assert all(i.meta["removed"].split()[-1] not in i.messages[0]["content"] for i in asks)
    calls = [i for i in items if i.label == "tool_call"]
    assert all(i.meta["possible_answer"] for i in calls)
    for item in (i for i in items if i.label == "cannot_answer"):
        names = {t["function"]["name"] for t in item.tools}
        assert item.meta["right_tool"] not in names
    # the same corpus every time; a split is a slice of it
    again = convert("bfcl", source, split="test")
    assert [i.id for i in again] == [i.id for i in items if i.meta["split"] == "test"]
    assert default_task("bfcl").labels == ["tool_call", "request_for_info", "cannot_answer"]


def test_a_hard_negative_shares_no_name_word_and_offers_no_generic_tool() -> None:
    def request(rid: str, *names: str, question: str = "weather forecast for Paris") -> Request:
        functions = [{"name": n, "description": f"{n} weather forecast"} for n in names]
        return Request(rid, "live_multiple", question, functions, {names[0]: {}})

    requests = [
        request("a", "Weather_1_GetWeather"),
        request("b", "weather.get_forecast_today"),  # shares "weather": could serve a
        request("c", "HNA_WQA.search"),  # answers anything
        request("d", "multilingual_llm"),  # answers anything
        request("e", "Flights_4_SearchFlight", question="flights weather"),  # a true negative
    ]
    ranked = hard_negatives(requests)
    assert [j for j, _ in ranked[0]] == [4]


def test_a_hard_negative_never_holds_a_tool_of_the_right_name(source: Path) -> None:
    requests = read_requests(source)
    negatives = hard_negatives(requests)
    for request, ranked in zip(requests, negatives, strict=True):
        for j, fit in ranked:
            assert requests[j].category == request.category
            assert all(f["name"] != request.function for f in requests[j].functions)
            assert fit > 0
        assert [fit for _, fit in ranked] == sorted((fit for _, fit in ranked), reverse=True)


def test_requests_need_one_user_message_and_one_offered_right_call(tmp_path: Path) -> None:
    root = tmp_path / "data"
    for category in ("simple_python", "multiple", "live_multiple"):
        write_category(root, category, 2, 1)
    path = root / "BFCL_v4_simple_python.json"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0]["question"][0].insert(0, {"role": "system", "content": "Be brief."})
    rows[1]["function"][0]["name"] = "not_the_answer"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    kept = read_requests(root)
    assert [r.category for r in kept] == ["multiple"] * 2 + ["live_multiple"] * 2
    assert isinstance(kept[0], Request)


def test_a_wheel_is_read_only_when_pinned_and_unchanged(tmp_path: Path, source: Path) -> None:
    name = next(iter(BFCL_WHEELS))
    wheel = tmp_path / name
    with zipfile.ZipFile(wheel, "w") as archive:
        for path in source.rglob("*.json"):
            archive.write(path, "bfcl_eval/data/" + path.relative_to(source).as_posix())
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    with pytest.raises(DataFileError, match=f"SHA-256 {digest} does not match the pinned"):
        read_requests(wheel)
    other = tmp_path / "bfcl_eval-1.0-py3-none-any.whl"
    other.write_bytes(wheel.read_bytes())
    with pytest.raises(DataFileError, match="not a pinned bfcl-eval wheel"):
        read_requests(other)


def test_a_source_without_the_categories_or_a_bad_split_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataFileError, match="BFCL files missing from the source: live_multiple"):
        read_requests(tmp_path / "empty")
    with pytest.raises(ConfigurationError, match="split must be one of"):
        convert("bfcl", tmp_path / "empty", split="validation")
    with pytest.raises(DataFileError, match="source for 'bfcl' not found; pass --source"):
        convert("bfcl", tmp_path / "missing")
