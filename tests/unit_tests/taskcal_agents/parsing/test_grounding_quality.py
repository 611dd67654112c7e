"""The argument-grounding check on hand-labelled real tool calls (tests/data/grounding).

The set is checked for form (size, fields, provenance, coverage) and the check's precision
and recall of "ungrounded" and its accuracy must stay at or above floors a few points below
what it measured when the set was made (see the folder's README and
``benchmarks/grounding_quality.py``), so that a regression fails. The When2Call rows store
no conversation or schema: they need the shared data folder (missing data fails under
``CI=true``, else skips).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from taskcal_agents.datasets import read_dataset
from tests.conftest import load_benchmark, require_shared_file

REPO_ROOT = Path(__file__).resolve().parents[4]
DATA = REPO_ROOT / "tests" / "data" / "grounding"
SET = DATA / "calls.jsonl"
REQUESTS = DATA / "requests.jsonl"
FIELDS = {"id", "dataset", "item_id", "item_label", "call", "grounded", "offending", "note"}
FIELDS |= {"provenance"}
PROVENANCE = ("source", "sample_index", "call_index", "model", "n", "temperature")
PROVENANCE += ("max_tokens", "date")
SOURCES = {
    "gset": "q05.gset.n8.samples.jsonl",
    "demo": "q05.demo.n8.samples.jsonl",
    "when2call": "q05.w2c.n8.samples.jsonl",
}
WHEN2CALL_LABELS = ("tool_call", "request_for_info", "cannot_answer")

# (precision, recall) of "ungrounded" and accuracy when the set was made, minus a margin of
# about 0.03-0.05: gset 1.00 / 1.00 / 1.00, demo 0.99 / 0.99 / 0.98,
# when2call 0.95 / 0.84 / 0.85, all 0.98 / 0.93 / 0.93.
FLOORS = {
    "gset": {"precision": 0.95, "recall": 0.95, "accuracy": 0.95},
    "demo": {"precision": 0.95, "recall": 0.95, "accuracy": 0.95},
    "when2call": {"precision": 0.90, "recall": 0.80, "accuracy": 0.81},
    "all": {"precision": 0.95, "recall": 0.90, "accuracy": 0.90},
}
# share of truly ungrounded rows whose offending arguments the check names exactly
# (measured 0.79 overall, 0.81 on demo)
OFFENDING_FLOORS = {"demo": 0.76, "all": 0.75}


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark("grounding_quality")


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    with SET.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def test_set_is_well_formed(rows: list[dict[str, Any]]) -> None:
    assert len(rows) >= 200
    assert len({row["id"] for row in rows}) == len(rows)
    seen = set()
    for row in rows:
        rid = row["id"]
        assert set(row) <= FIELDS, rid  # no conversation or schema is stored
        assert set(row) >= FIELDS - {"note"}, rid
        assert row["dataset"] in SOURCES, rid
        prov = row["provenance"]
        assert all(prov.get(key) is not None for key in PROVENANCE), rid
        assert prov["source"] == SOURCES[row["dataset"]], rid
        assert prov["model"] == "qwen2.5-coder-0.5b-instruct", rid
        assert (prov["n"], prov["temperature"], prov["max_tokens"]) == (8, 0.7, 128), rid
        assert prov["date"] == "2026-12-01", rid
        assert 0 <= prov["sample_index"] < prov["n"], rid
        expected = f"{row['dataset']}:{row['item_id']}:{prov['sample_index']}:{prov['call_index']}"
        assert rid == expected
        call = row["call"]
        assert set(call) == {"name", "args"}, rid
        assert isinstance(call["name"], str) and call["name"], rid
        assert isinstance(call["args"], dict), rid
        assert isinstance(row["grounded"], bool), rid
        assert isinstance(row["offending"], list), rid
        assert all(isinstance(a, str) and a for a in row["offending"]), rid
        assert row["grounded"] == (row["offending"] == []), rid
        assert isinstance(row.get("note", ""), str), rid
        key = (row["dataset"], row["item_id"], json.dumps(call, sort_keys=True))
        assert key not in seen, f"{rid} repeats a call of its item"
        seen.add(key)


def test_rows_cover_the_datasets_and_when2call_labels(rows: list[dict[str, Any]]) -> None:
    by_dataset = Counter((row["dataset"], row["grounded"]) for row in rows)
    for dataset in SOURCES:
        assert by_dataset[dataset, True] >= 10, dataset
        assert by_dataset[dataset, False] >= 20, dataset
    w2c = [row for row in rows if row["dataset"] == "when2call"]
    assert len({row["item_id"] for row in w2c}) >= 60
    labels = Counter(row["item_label"] for row in w2c)
    assert all(labels[label] >= 30 for label in WHEN2CALL_LABELS), labels
    assert all(re.fullmatch(r"[0-9a-f-]{36}", row["item_id"]) for row in w2c)


def test_requests_are_the_sets_own_and_hold_every_gset_item(rows: list[dict[str, Any]]) -> None:
    items = {item.id: item for item in read_dataset(REQUESTS)}
    assert all(re.fullmatch(r"gset-\d{3}", i) for i in items)
    assert {row["item_id"] for row in rows if row["dataset"] == "gset"} <= set(items)
    for row in rows:
        if row["dataset"] == "gset":
            offered = {t["function"]["name"] for t in items[row["item_id"]].tools}
            if row["call"]["name"] not in offered:
                assert row["offending"] == [row["call"]["name"]], row["id"]


def _find(rows: list[dict[str, Any]], *, grounded: bool, note: str) -> list[dict[str, Any]]:
    return [r for r in rows if r["grounded"] is grounded and note in r.get("note", "")]


def test_rows_cover_the_labelling_rules(rows: list[dict[str, Any]]) -> None:
    # "NYC" for "New York"
    nyc = _find(rows, grounded=True, note='"NYC" for "New York"')
    assert any(r["call"]["args"].get("city") == "New York" for r in nyc)
    # "tomorrow" for a date
    assert len(_find(rows, grounded=True, note='"tomorrow" for a date')) >= 3
    # a value copied from a tool result
    copied = _find(rows, grounded=True, note="copied from a tool result")
    assert {r["call"]["args"].get("city") for r in copied} >= {"Lyon", "Osaka"}
    # a default the user did not state
    assert _find(rows, grounded=True, note="the schema's default")
    # world knowledge is not grounding; a tool that was not offered is named
    assert [r["offending"] for r in _find(rows, grounded=False, note="world knowledge")] == [
        ["city"]
    ]
    unoffered = _find(rows, grounded=False, note="tool not offered")
    assert len(unoffered) >= 20
    assert all(r["offending"] == [r["call"]["name"]] for r in unoffered)


@pytest.fixture(scope="module")
def local_results(bench: ModuleType, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Scores of the rows that need no shared data (gset, demo)."""
    local = [row for row in rows if row["dataset"] != "when2call"]
    return bench.evaluate(local, bench.load_items(("gset", "demo")))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def results(bench: ModuleType, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Scores of every row; When2Call items from the shared data folder."""
    source = require_shared_file("when2call")
    return bench.evaluate(rows, bench.load_items(("gset", "demo", "when2call"), source=source))  # type: ignore[no-any-return]


def _assert_floors(res: dict[str, Any], group: str) -> None:
    scores = res["groups"][group]
    errors = [e["id"] for e in res["errors"] if e["kind"] != "offending"]
    for metric, floor in FLOORS[group].items():
        assert scores[metric] >= floor, (group, metric, scores, errors)
    if group in OFFENDING_FLOORS:
        assert scores["offending_agreement"] >= OFFENDING_FLOORS[group], (group, scores)


@pytest.mark.parametrize("group", ["gset", "demo"])
def test_floors_without_shared_data(local_results: dict[str, Any], group: str) -> None:
    _assert_floors(local_results, group)


def test_benchmark_prints_a_line_per_group(
    bench: ModuleType, local_results: dict[str, Any]
) -> None:
    table = bench.format_table(local_results)
    assert "| gset | " in table
    assert "| demo | " in table
    assert "| all | " in table


@pytest.mark.parametrize("group", ["when2call", "all"])
def test_floors_with_when2call(results: dict[str, Any], group: str) -> None:
    _assert_floors(results, group)


def test_every_when2call_row_points_at_an_item(results: dict[str, Any]) -> None:
    assert results["groups"]["when2call"]["n"] >= 100


def test_missing_shared_data_fails_under_ci_and_skips_otherwise(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TASKCAL_SHARED_DATA", str(tmp_path))
    missing = tmp_path / "when2call" / "when2call_test_llm_judge.jsonl"
    message = (
        rf"^{re.escape(str(missing))} not found "
        r"\(set TASKCAL_SHARED_DATA to the shared data folder\)$"
    )
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=message):
        require_shared_file("when2call")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match=message):
        require_shared_file("when2call")
    missing.parent.mkdir()
    missing.write_text("", encoding="utf-8")
    assert require_shared_file("when2call") == missing
