"""Smoke test of ``benchmarks/bench_decision_cost.py``: every step on scripted records."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from taskcal_agents.datasets import DatasetItem, write_dataset
from taskcal_agents.workflow._calibrate import calibrate_task
from taskcal_agents.workflow._runner import SampleSettings, run_sampling, sample_header
from taskcal_agents.workflow._store import SamplesStore, read_samples
from tests.conftest import load_benchmark

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]},
    },
}  # fmt: skip
CITIES = ["Paris", "Rome", "Oslo", "Lima", "Cairo", "Quito", "Dakar", "Hanoi", "Sofia", "Bern"]
REPLIES = {
    "request_for_info": AIMessage(content="Which city do you mean?"),
    "cannot_answer": AIMessage(content="I'm sorry, I cannot help with that."),
}


def _items() -> list[DatasetItem]:
    out = []
    for i, city in enumerate(CITIES * 2):
        for label, text in (
            ("tool_call", f"What's the weather in {city}?"),
            ("request_for_info", "What's the weather like today?"),
            ("cannot_answer", f"Book me a table in {city} tonight."),
        ):
            out.append(DatasetItem(id=f"{label}-{i:02d}", tools=[WEATHER], label=label,
                                   messages=[{"role": "user", "content": text}]))  # fmt: skip
    return out


def _truth(messages: Any) -> str:
    text = str(messages[-1]["content"] if isinstance(messages[-1], dict) else messages[-1])
    if "table" in text:
        return "cannot_answer"
    return "tool_call" if " in " in text else "request_for_info"


class Scripted:
    """Answers with the truth's message 60 % of the time; scripted top tokens for a choice."""

    def __init__(self) -> None:
        self.rng = random.Random(0)

    def _message(self, truth: str, city: str) -> AIMessage:
        label = truth if self.rng.random() < 0.6 else self.rng.choice([*REPLIES, "tool_call"])
        if label == "tool_call":
            call = {"name": "get_weather", "args": {"city": city}, "id": "c1"}
            return AIMessage(content="", tool_calls=[call])
        return REPLIES[label]

    def sample(self, messages: Any, **params: Any) -> list[AIMessage]:
        user = next(m for m in reversed(messages) if m["role"] == "user")
        truth = _truth([user])
        city = next((c for c in CITIES if c in str(user["content"])), "Paris")
        if params.get("structured_outputs"):
            choices = params["structured_outputs"]["choice"]
            if choices[0] == "A":  # the clustered variant's letters: calls, ask, refuse
                weights = {letter: 0.2 for letter in choices}
                pick = {"tool_call": 0, "request_for_info": -2, "cannot_answer": -1}[truth]
                weights[choices[pick]] += 0.3 * self.rng.random()
            else:
                weights = {"call": 0.2, "ask": 0.2, "no": 0.2}
                weights[{"tool_call": "call", "request_for_info": "ask",
                         "cannot_answer": "no"}[truth]] += 0.3 * self.rng.random()  # fmt: skip
            entries = [{"token": t, "bytes": list(t.encode()), "logprob": math.log(w)}
                       for t, w in weights.items()]  # fmt: skip
            content = [{"token": "ask", "logprob": 0.0, "top_logprobs": entries}]
            return [AIMessage(content="", response_metadata={"logprobs": {"content": content}})]
        return [self._message(truth, city) for _ in range(int(params.get("n", 1)))]


def _draw(path: Path, items: list[DatasetItem], settings: SampleSettings) -> Path:
    task = calibrate_task()
    with SamplesStore.open(path, sample_header(task, settings, None)) as store:
        run_sampling(task, items, Scripted(), store, settings, concurrency=1)
    return path


@pytest.mark.filterwarnings("ignore")
def test_every_step_runs_and_the_table_has_every_decoder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = load_benchmark("bench_decision_cost")
    items = _items()
    data = tmp_path / "data.jsonl"
    write_dataset(items, data)
    n16 = _draw(tmp_path / "n16.jsonl", items, SampleSettings(n=16))
    one = _draw(tmp_path / "one.jsonl", items, SampleSettings(belief="one_pass"))
    bench.main(["subsample", str(n16), "--n", "8", "--out", str(tmp_path / "n8.jsonl")])
    bench.main(["subsample", str(n16), "--n", "4", "--out", str(tmp_path / "n4.jsonl")])
    assert all(len(r["samples"]) == 4 for r in read_samples(tmp_path / "n4.jsonl").records.values())
    clustered = tmp_path / "clustered.jsonl"
    assert bench.clustered(n16, clustered, Scripted()) == len(items)
    assert bench.clustered(n16, clustered, Scripted()) == 0  # resumed: nothing left
    record = read_samples(clustered).records["tool_call-00"]
    assert record["belief"] == "one_pass" and record["greedy"] is not None
    artefacts = {}
    for name, path in (("n16", n16), ("n8", tmp_path / "n8.jsonl"),
                       ("n4", tmp_path / "n4.jsonl"), ("one", one), ("cl", clustered)):  # fmt: skip
        artefacts[name] = str(tmp_path / f"{name}.artefact.json")
        bench.main(["fit", str(path), "--out", artefacts[name]])
    artefacts["adaptive"] = str(tmp_path / "adaptive.artefact.json")
    bench.main(["fit", str(n16), "--no-relevance", "--out", artefacts["adaptive"]])
    report = bench.main([
        "table", "--set", "toy", str(n16), str(one), str(clustered), str(data),
        "--artefact", artefacts["n16"], "--n8", artefacts["n8"], "--n4", artefacts["n4"],
        "--adaptive", artefacts["adaptive"],
        "--one-pass", artefacts["one"], "--clustered", artefacts["cl"], "--permutations", "5",
        "--out", str(tmp_path / "table.json"),
    ])  # fmt: skip
    assert json.loads((tmp_path / "table.json").read_text())["rule"] == report["rule"]
    entries = {e["decoder"]: e for e in report["sets"]["toy"]["summary"]}
    assert list(entries) == list(bench.DECODERS)
    assert all(math.isfinite(e["cost"]) for e in entries.values())
    printed = capsys.readouterr().out
    assert printed.count("\n| ") == 1 + len(bench.DECODERS)
    assert set(report["rule"]["sets"]) == {"toy"}
    rows = report["sets"]["toy"]["items"]
    assert {r["decisions"]["N = 4"]["n_samples"] for r in rows} == {4}
    assert {r["decisions"]["one-pass"]["n_samples"] for r in rows} <= {0, 1}
    stopped = [r["decisions"]["adaptive"]["n_samples"] for r in rows]
    assert set(stopped) <= {4, 8, 16}
