"""The in-Ray vLLM engine's row functions (replication with distinct seeds, the parse of the
generated text, the aggregation back to N samples per item), without Ray or vLLM."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from taskcal_agents.datasets import DatasetItem
from taskcal_agents.decision import _presets as tasks
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.workflow._ray_pipeline import ERROR_COLUMN
from taskcal_agents.workflow._ray_vllm import (
    VLLMParseStep,
    VLLMPromptStep,
    replica_rows,
    run_sampling_vllm,
    vllm_collector,
)
from taskcal_agents.workflow._runner import SampleSettings, build_messages, sample_header
from taskcal_agents.workflow._store import SamplesStore

TASK = tasks.tool_decision()
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
ITEMS = [
    DatasetItem(
        id="a", messages=[{"role": "user", "content": "weather?"}], tools=[TOOL], label="tool_call"
    ),
    DatasetItem(id="b", messages=[{"role": "user", "content": "hi"}], label="direct_answer"),
]
CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


def test_replica_rows_give_n_distinct_seeds_and_one_greedy_row_per_item() -> None:
    rows = replica_rows(ITEMS, SampleSettings(n=4, temperature=0.7, max_tokens=16), seed=10)
    assert len(rows) == 2 * (4 + 1)
    for rid in ("a", "b"):
        mine = [r for r in rows if r["id"] == rid]
        samples = [r for r in mine if r["kind"] == "samples"]
        assert [r["sampling_params"]["seed"] for r in samples] == [10, 11, 12, 13]
        assert {r["sampling_params"]["temperature"] for r in samples} == {0.7}
        assert all(r["sampling_params"]["n"] == 1 for r in mine)  # vLLM keeps output 0 only
        (greedy,) = [r for r in mine if r["kind"] == "greedy"]
        assert greedy["sampling_params"]["temperature"] == 0.0
        assert sorted(r["draw"] for r in mine) == [0, 1, 2, 3, 4]
    no_greedy = replica_rows(ITEMS, SampleSettings(n=3, greedy=False))
    assert [r["kind"] for r in no_greedy] == ["samples"] * 6


def test_prompt_step_renders_each_item_with_its_own_tools() -> None:
    seen: list[Any] = []

    def render(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        seen.append((messages, tools))
        return f"{len(messages)} messages, {len(tools)} tools"

    step = VLLMPromptStep(TASK, "some/model", render=render)
    rows = replica_rows(ITEMS, SampleSettings(n=1, greedy=False))
    assert step(rows[0])["prompt"] == "2 messages, 1 tools"  # the task's prompt, the request
    assert step(rows[1])["prompt"] == "2 messages, 0 tools"
    assert seen[0][0] == build_messages(TASK, ITEMS[0])  # the task prompt merged in
    bad = {**rows[0], "item": "{"}
    assert "rendering the prompt failed" in step(bad)[ERROR_COLUMN]


def _generated(row: dict[str, Any], text: str, tokens: int) -> dict[str, Any]:
    return {**row, "generated_text": text, "num_generated_tokens": tokens}


def test_parse_and_collect_aggregate_n_rows_back_into_one_record() -> None:
    settings = SampleSettings(n=3, max_tokens=16)
    rows = replica_rows(ITEMS[:1], settings)
    collector = vllm_collector(TASK, settings, ITEMS[:1])
    texts = [CALL, "Which city?", CALL, CALL]  # samples 0-2, then greedy
    tokens = [9, 3, 16, 9]  # sample 2 hit max_tokens
    parse = VLLMParseStep(TASK)
    results = [
        collector.add(parse(_generated(r, t, k)))
        for r, t, k in zip(reversed(rows), reversed(texts), reversed(tokens), strict=True)
    ]  # out of order, as Ray may return them
    assert results[:-1] == [(None, None)] * 3
    record, failure = results[-1]
    assert failure is None and record is not None
    assert (record["id"], record["label"]) == ("a", "tool_call")
    assert len(record["samples"]) == 3
    assert record["labels"][0] == "tool_call" and record["labels"][2] == "tool_call"
    assert record["samples"][0]["tool_calls"][0]["args"] == {"city": "Paris"}
    assert record["samples"][2]["finish_reason"] == "length"
    assert record["samples"][1]["finish_reason"] == "stop"
    assert record["greedy_label"] == "tool_call"
    assert collector.pending == []


def test_a_failed_replica_fails_its_item_once() -> None:
    settings = SampleSettings(n=2, greedy=False)
    rows = replica_rows(ITEMS[1:], settings)
    collector = vllm_collector(TASK, settings, ITEMS[1:])
    parse = VLLMParseStep(TASK)
    first = collector.add({**rows[0], ERROR_COLUMN: "CUDA out of memory"})
    assert first[0] is None and "CUDA out of memory" in str(first[1])
    assert collector.add(parse(_generated(rows[1], "hello", 2))) == (None, None)
    parsed = parse(_generated(rows[1], "hello", 2))
    assert json.loads(parsed["messages"])[0]["content"] == "hello"


def test_vllm_row_functions_mark_success_with_an_empty_error() -> None:
    row = replica_rows(ITEMS[:1], SampleSettings(n=1, max_tokens=16))[0]
    step = VLLMPromptStep(TASK, "model", render=lambda messages, tools: "PROMPT")
    assert step(row)[ERROR_COLUMN] == ""
    out = VLLMParseStep(TASK)({**row, "generated_text": CALL, "num_generated_tokens": 3})
    assert out[ERROR_COLUMN] == ""


def test_run_sampling_vllm_refuses_what_it_cannot_do_and_skips_finished_items(
    tmp_path: Path,
) -> None:
    items = [item.model_copy(update={"label": "tool_call"}) for item in ITEMS]
    settings = SampleSettings(n=2, model="m")
    logprob = SampleSettings(n=2, belief="logprob")
    x = tmp_path / "x.jsonl"
    with (
        pytest.raises(ConfigurationError, match="belief='logprob'"),
        SamplesStore.open(x, sample_header(TASK, settings, None)) as store,
    ):
        run_sampling_vllm(TASK, items, store, logprob, "model")
    path = tmp_path / "s.jsonl"
    with SamplesStore.open(path, sample_header(TASK, settings, None)) as store:
        store.append_many([{"id": item.id, "labels": [None, None]} for item in items])
    with SamplesStore.open(path, sample_header(TASK, settings, None)) as store:
        # Everything is done: nothing to sample, so Ray (and vLLM) are never needed.
        report = run_sampling_vllm(TASK, items, store, settings, "model")
    assert (report.total, report.skipped, report.written, report.failures) == (2, 2, 0, [])
