"""The Ray engine of `taskcal sample`: row functions without Ray, then a local Ray against
fake OpenAI-compatible servers (routing, error bodies, a dead endpoint, resume, a kill).

One local Ray (2 CPUs) serves the module; each run starts its own actor pool, which is
what costs time here, so the Ray tests are few and each checks several things.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from taskcal_agents.cli import app
from taskcal_agents.datasets import DatasetItem
from taskcal_agents.decision import _presets as tasks
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.sampling._openai_server import OpenAISampler, wire_body
from taskcal_agents.testing import FakeOpenAIServer
from taskcal_agents.workflow._ray_engine import (
    ParseStep,
    RayEngine,
    RequestStep,
    build_pipeline,
    draw_rows,
    items_per_block,
    run_sampling_ray,
)
from taskcal_agents.workflow._ray_pipeline import (
    ERROR_COLUMN,
    DrawCollector,
    _result_rows,
    blocks_dataset,
    check_ray_settings,
    collect,
)
from taskcal_agents.workflow._runner import (
    SampleSettings,
    SamplingReport,
    sample_header,
    sample_item,
)
from taskcal_agents.workflow._store import SamplesStore, read_samples
from tests.conftest import require_ray

TASK = tasks.tool_decision()
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def _items(count: int, prefix: str = "i") -> list[DatasetItem]:
    """Items with and without tools and with and without a system message (so Arrow would
    add null keys to some rows if the bodies were not sent as strings)."""
    out = []
    for k in range(count):
        messages: list[dict[str, Any]] = [{"role": "user", "content": f"weather {k}?"}]
        if k % 3 == 0:
            messages.insert(0, {"role": "system", "content": "Be brief.", "name": "ops"})
        out.append(
            DatasetItem(
                id=f"{prefix}{k}",
                messages=messages,
                tools=[TOOL] if k % 2 == 0 else [],
                label=TASK.labels[0],
            )
        )
    return out


def _response(messages: list[dict[str, Any]]) -> dict[str, Any]:
    server = FakeOpenAIServer()
    return server._completion({"model": "m", "messages": messages, "n": 1})


# --------------------------------------------------------------------------------------
# row functions, without Ray


def test_request_step_posts_the_body_openai_sampler_builds() -> None:
    settings = SampleSettings(n=3, max_tokens=32)
    item = _items(1)[0]
    rows = draw_rows([item], ["http://h:1/v1/"], settings)
    assert [r["kind"] for r in rows] == ["samples", "greedy"]
    step = RequestStep(TASK, settings, "m")
    sampler = OpenAISampler("http://h:1/v1", "m", allow_seed=False)
    from taskcal_agents.workflow._runner import build_messages

    messages = build_messages(TASK, item)
    for row, params in zip(
        rows,
        [
            {"n": 3, "temperature": 1.0, "tools": item.tools, "max_tokens": 32},
            {"n": 1, "temperature": 0.0, "tools": item.tools, "max_tokens": 32},
        ],
        strict=True,
    ):
        out = step(row)
        assert out["payload"]["url"] == "http://h:1/v1/chat/completions"
        assert json.loads(out["payload"]["body"]) == wire_body(sampler.request(messages, **params))
        assert out["n_wanted"] == params["n"]
        assert out["parse_content"] is True


def test_rows_go_to_endpoints_by_block_of_whole_items() -> None:
    greedy, single = SampleSettings(n=2), SampleSettings(n=2, greedy=False)
    assert [items_per_block(greedy, b) for b in (1, 2, 3, 4, 5)] == [1, 1, 1, 2, 2]
    assert [items_per_block(single, b) for b in (1, 4)] == [1, 4]
    rows = draw_rows(_items(6), ["http://a/v1", "http://b/v1"], greedy, per_block=2)
    assert [(r["id"], r["endpoint"][7]) for r in rows[::2]] == [
        ("i0", "a"), ("i1", "a"), ("i2", "b"), ("i3", "b"), ("i4", "a"), ("i5", "a")
    ]  # fmt: skip
    assert all(rows[k]["endpoint"] == rows[k + 1]["endpoint"] for k in range(0, 12, 2))


def test_request_step_marks_an_unbuildable_item_failed() -> None:
    row = draw_rows(_items(1), ["http://h:1/v1"], SampleSettings(n=2))[0]
    row["item"] = "{not json"
    out = RequestStep(TASK, SampleSettings(n=2), "m")(row)
    assert "building the request failed" in out[ERROR_COLUMN]
    assert "payload" not in out


def test_row_functions_mark_success_with_an_empty_error() -> None:
    # Arrow gives a block's rows the union of their keys: without "" a success row beside a
    # failed one would carry None, which Ray reads as failed (None != "").
    item = _items(1)[0]
    row = draw_rows([item], ["http://h:1/v1"], SampleSettings(n=1))[0]
    pre = RequestStep(TASK, SampleSettings(n=1), "m")(row)
    assert pre[ERROR_COLUMN] == ""
    response = FakeOpenAIServer()._completion(json.loads(pre["payload"]["body"]))
    out = ParseStep(TASK)({**row, **pre, "http_response": response})
    assert out[ERROR_COLUMN] == ""


def test_parse_step_labels_choices_and_fails_error_bodies() -> None:
    item = _items(1)[0]
    row = draw_rows([item], ["http://h:1/v1"], SampleSettings(n=1))[0]
    request = json.loads(RequestStep(TASK, SampleSettings(n=1), "m")(row)["payload"]["body"])
    ok = FakeOpenAIServer()._completion(request)
    base = {**row, "n_wanted": 1, "parse_content": True}
    out = ParseStep(TASK)({**base, "http_response": ok})
    assert json.loads(out["labels"]) == ["tool_call"]
    assert json.loads(out["messages"])[0]["tool_calls"][0]["name"] == "get_weather"
    # An error body, as Ray returns it (Arrow added the other rows' keys as nulls).
    error = {"message": "injected internal server error", "code": 500, "id": None, "choices": None}
    out = ParseStep(TASK)({**base, "http_response": error})
    assert "error body" in out[ERROR_COLUMN]
    assert "injected internal server error" in out[ERROR_COLUMN]
    out = ParseStep(TASK)({**base, "n_wanted": 2, "http_response": ok})
    assert "returned 1" in out[ERROR_COLUMN]


def test_collector_builds_the_record_sample_item_builds() -> None:
    settings = SampleSettings(n=2)
    item = _items(1)[0]
    rows = draw_rows([item], ["http://h:1/v1"], settings)
    collector = DrawCollector(TASK, settings, [item], draws_per_item=2)
    results = []
    for row in rows:
        pre = RequestStep(TASK, settings, "m")(row)
        body = json.loads(pre["payload"]["body"])
        response = FakeOpenAIServer()._completion(body)
        parsed = ParseStep(TASK)({**row, **pre, "http_response": response})
        results.append(collector.add(parsed))
    assert results[0] == (None, None)
    record, failure = results[1]
    assert failure is None and record is not None
    local = sample_item(TASK, item, _FakeSampler(), settings)
    for key in ("id", "label", "labels", "greedy_label", "tool_names", "unparsed_reasons"):
        assert record[key] == local[key], key
    assert [s["tool_calls"][0]["name"] for s in record["samples"]] == ["get_weather"] * 2
    assert collector.pending == []


def test_collector_keeps_the_labels_the_postprocess_parsed() -> None:
    settings = SampleSettings(n=2)
    item = _items(1)[0]
    collector = DrawCollector(TASK, settings, [item], draws_per_item=2)
    for row in draw_rows([item], ["http://h:1/v1"], settings):
        pre = RequestStep(TASK, settings, "m")(row)
        response = FakeOpenAIServer()._completion(json.loads(pre["payload"]["body"]))
        parsed = ParseStep(TASK)({**row, **pre, "http_response": response})
        if row["kind"] == "samples":  # not what the driver would parse: it must not re-parse
            parsed["labels"] = json.dumps([TASK.labels[1], None])
        record, failure = collector.add(parsed)
    assert failure is None and record is not None
    assert record["labels"] == [TASK.labels[1], None]
    assert record["greedy_label"] == "tool_call"


def test_collector_fails_a_draw_without_completions_or_with_wrong_labels() -> None:
    settings = SampleSettings(n=1, greedy=False)
    items = _items(2)
    collector = DrawCollector(TASK, settings, items, draws_per_item=1)
    # An error column of None (Arrow's fill) is not an error, but no completions is.
    record, failure = collector.add({"id": "i0", "draw": 0, "kind": "samples", ERROR_COLUMN: None})
    assert record is None and failure is not None and "without its completions" in failure
    row = draw_rows(items[1:], ["http://h:1/v1"], settings)[0]
    pre = RequestStep(TASK, settings, "m")(row)
    response = FakeOpenAIServer()._completion(json.loads(pre["payload"]["body"]))
    parsed = ParseStep(TASK)({**row, **pre, "http_response": response})
    record, failure = collector.add({**parsed, "labels": json.dumps([None, None])})
    assert record is None and failure is not None and "2 labels for 1 completions" in failure
    assert collector.pending == []


def test_collector_fails_an_item_once_and_drops_its_other_draws() -> None:
    settings = SampleSettings(n=2)
    item = _items(1)[0]
    collector = DrawCollector(TASK, settings, [item], draws_per_item=2)
    record, failure = collector.add({"id": item.id, "draw": 0, ERROR_COLUMN: "boom"})
    assert record is None and failure is not None and "boom" in failure
    assert collector.add({"id": item.id, "draw": 1, "kind": "greedy"}) == (None, None)
    assert collector.pending == []


def test_check_ray_settings_refuses_what_needs_follow_up_requests() -> None:
    with pytest.raises(ConfigurationError, match="adaptive N"):
        check_ray_settings(TASK, SampleSettings(n=4, adaptive=0.1))
    with pytest.raises(ConfigurationError, match="belief='logprob'"):
        check_ray_settings(TASK, SampleSettings(n=4, belief="logprob"))
    with pytest.raises(ConfigurationError, match="at least one endpoint"):
        RayEngine(endpoints=(), model="m")
    with pytest.raises(ConfigurationError, match="parse_tasks"):
        RayEngine(endpoints=("http://127.0.0.1:1/v1",), model="m", parse_tasks=0)


def test_append_many_writes_one_batch_and_refuses_repeats(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with SamplesStore.open(path, sample_header(TASK, SampleSettings(n=1), None)) as store:
        store.append_many([{"id": "a", "labels": []}, {"id": "b", "labels": []}])
        with pytest.raises(ValueError, match="already stored"):
            store.append_many([{"id": "c", "labels": []}, {"id": "a", "labels": []}])
    assert list(read_samples(path).records) == ["a", "b"]


class _FakeSampler:
    """The fake server's replies without HTTP (for the local record to compare with)."""

    def sample(self, messages: Any, **params: Any) -> list[Any]:
        from taskcal_agents.sampling._openai_server import build_request, response_to_messages

        request = build_request("m", messages, **params)
        from openai.types.chat import ChatCompletion

        response = ChatCompletion.model_validate(FakeOpenAIServer()._completion(request))
        return response_to_messages(response, request["n"], parse_content=True)


# --------------------------------------------------------------------------------------
# on a local Ray


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    ray = require_ray()
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        _node_ip_address="127.0.0.1",
    )
    yield ray
    ray.shutdown()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kill_after_first_record(process: subprocess.Popen[bytes], out: Path, lines: int) -> None:
    """Kill the job's process group once the file holds more than *lines* lines."""
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if len(out.read_bytes().splitlines()) > lines:
                return
            assert process.poll() is None, "the Ray job ended before it could be killed"
            time.sleep(0.1)
        pytest.fail("the Ray job wrote no record in time")
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.mark.timeout(420)
def test_ray_routes_fails_bad_endpoints_survives_a_kill_and_resumes(
    ray_local: Any, loopback: None, tmp_path: Path
) -> None:
    """Three Ray runs on one file (each run's actor pool is the costly part):

    1. in-process over 4 endpoints (2 healthy, 1 answering error bodies, 1 dead): items go
       round-robin, the bodies go out exactly as built, the broken and dead endpoints'
       items fail as items and the job finishes;
    2. `taskcal sample --engine ray` in a process joined to this Ray, over the healthy
       endpoints, killed with SIGKILL after its first new record;
    3. the same command again: it keeps every record, retries the rest, duplicates nothing.
    """
    settings = SampleSettings(n=2, model="fake-model")
    items = _items(16)
    path = tmp_path / "s.jsonl"
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    with (
        FakeOpenAIServer() as a,
        FakeOpenAIServer() as b,
        FakeOpenAIServer(fault="500") as broken,
    ):
        engine = RayEngine(
            endpoints=(a.base_url, b.base_url, broken.base_url, dead),
            model="fake-model",
            concurrency=1,  # each actor is a process to start: the costly part here
            batch_size=2,  # one item (two draws) per block
            max_retries=0,
        )
        with SamplesStore.open(path, sample_header(TASK, settings, None)) as store:
            report = run_sampling_ray(TASK, items, store, settings, engine, max_failures=10)
        # Round-robin: items 0, 4, 8, 12 to a; 1, 5, 9, 13 to b (two requests each).
        assert (a.requests, b.requests, broken.requests) == (8, 8, 8)
        failed = dict(report.failures)
        assert report.written == 8 and not report.interrupted
        assert sorted(failed, key=lambda i: int(i[1:])) == [
            f"i{k}" for k in range(16) if k % 4 in (2, 3)
        ]
        assert all("error body" in failed[f"i{k}"] for k in (2, 6, 10, 14))
        assert all("no result" in failed[f"i{k}"] for k in (3, 7, 11, 15))
        # The bodies went out exactly as built: no Arrow-added null keys.
        for payload in [*a.payloads, *b.payloads]:
            assert None not in [m.get("name", "") for m in payload["messages"]]
            assert ("tools" in payload) == (payload["messages"][-1]["content"][-2] in "02468")
        first = read_samples(path)
        assert set(first.records) == {f"i{k}" for k in range(16) if k % 4 in (0, 1)}
        assert first.records["i0"]["labels"] == ["tool_call", "tool_call"]
        assert first.records["i1"]["greedy_label"] == TASK.parse_completion(
            _FakeSampler().sample("x", n=1, temperature=0.0)[0], tool_names=()
        )

        # 2. The CLI in its own process, killed after its first new record.
        data = tmp_path / "d.jsonl"
        data.write_text("".join(item.model_dump_json() + "\n" for item in items))
        task_file = tmp_path / "task.json"
        task_file.write_text(TASK.model_dump_json())
        args = [
            "sample", "--task", str(task_file), "--data", str(data), "--out", str(path),
            "--model", "fake-model", "--n", "2", "--engine", "ray", "--concurrency", "1",
            "--batch-size", "2", "--endpoints", f"{a.base_url},{b.base_url}",
        ]  # fmt: skip
        a.latency = b.latency = 0.3
        address = ray_local.get_runtime_context().gcs_address
        process = subprocess.Popen(
            [sys.executable, "-m", "taskcal_agents.cli", *args, "--ray-address", address],
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        _kill_after_first_record(process, path, lines=1 + len(first.records))
        killed = read_samples(path)
        assert len(first.records) < len(killed.records) < len(items)
        assert killed.duplicates == []

        # 3. The same command again finishes the file.
        a.latency = b.latency = 0.0
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        assert f"{len(killed.records)} already there" in result.output
    final = read_samples(path)
    assert sorted(final.records) == sorted(i.id for i in items)
    assert final.duplicates == [] and not final.torn_tail
    for rid, record in killed.records.items():
        assert final.records[rid] == record


@pytest.mark.timeout(300)
def test_ray_poison_row_and_dead_endpoint_fail_only_their_own_items(
    ray_local: Any, loopback: None, tmp_path: Path
) -> None:
    """Blocks of 4 rows (2 whole items), each block to one endpoint: [i0 i1] -> healthy,
    [i2 i3] -> dead, [i4 i5] -> healthy. The row of i0 cannot be built: only i0 fails, not
    its block neighbour i1 (Ray skips rows whose error column is not ""); the dead
    endpoint's block is dropped, its items reported, the job goes on."""
    settings = SampleSettings(n=2, model="fake-model")
    items = _items(6)
    blocks = blocks_dataset(ray_local, [{"k": k} for k in range(10)], 4)
    sizes = [len(b) for b in blocks.iter_batches(batch_size=None, batch_format="pyarrow")]
    assert sizes == [4, 4, 2]
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    context = ray_local.data.DataContext.get_current()
    saved = context.max_errored_blocks
    context.max_errored_blocks = 5
    try:
        with FakeOpenAIServer() as server:
            engine = RayEngine(
                endpoints=(server.base_url, dead),
                model="fake-model",
                concurrency=1,
                max_retries=0,
            )
            per = items_per_block(settings, engine.batch_size)
            assert per == 2
            rows = draw_rows(items, engine.endpoints, settings, per_block=per)
            rows[0]["item"] = rows[1]["item"] = "{not json"  # item i0, in the block of i1
            ds = build_pipeline(TASK, settings, engine)(blocks_dataset(ray_local, rows, 4))
            report = SamplingReport(total=6)
            collector = DrawCollector(TASK, settings, items, draws_per_item=2)
            path = tmp_path / "s.jsonl"
            with SamplesStore.open(path, sample_header(TASK, settings, None)) as store:
                stopped = collect(_result_rows(ds), collector, store, report, max_failures=10)
            assert server.requests == 6  # i1, i4, i5: two draws each; none for i0
    finally:
        context.max_errored_blocks = saved
    assert not stopped and report.written == 3
    assert [rid for rid, _ in report.failures] == ["i0"]
    assert "building the request failed" in report.failures[0][1]
    assert collector.pending == ["i2", "i3"]  # the dead endpoint's block
    assert set(read_samples(path).records) == {"i1", "i4", "i5"}


@pytest.mark.timeout(300)
def test_ray_stops_after_max_failures_items_like_the_local_engine(
    ray_local: Any, loopback: None, tmp_path: Path
) -> None:
    """Every request gets an error body (say, a mistyped --model): the job stops after
    --max-failures failed items instead of running through the whole dataset."""
    settings = SampleSettings(n=2, model="fake-model", greedy=False)
    items = _items(40)
    with FakeOpenAIServer(fault="500", latency=0.3) as broken:
        engine = RayEngine(
            endpoints=(broken.base_url,), model="fake-model", concurrency=1, batch_size=1
        )
        with SamplesStore.open(tmp_path / "s.jsonl", sample_header(TASK, settings, None)) as st:
            report = run_sampling_ray(TASK, items, st, settings, engine, max_failures=3)
        sent = broken.requests
        time.sleep(1.5)  # a job still running would send 4-5 more requests by now
        assert broken.requests <= sent + 1 < len(items)
    assert report.interrupted and report.written == 0
    assert 3 <= len(report.failures) < len(items)
    assert all("error body" in message for _, message in report.failures)
