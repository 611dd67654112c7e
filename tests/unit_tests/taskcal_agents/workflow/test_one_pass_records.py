"""A tool decision's one-pass records: sampled, stored, and read back as the runtime reads them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.messages import AIMessage

from taskcal_agents.datasets import DatasetItem
from taskcal_agents.decision import Decider, tool_decision
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.parsing import GroundingContext
from taskcal_agents.workflow._data import eval_arrays, resolve_task
from taskcal_agents.workflow._runner import (
    SampleSettings,
    message_from_dict,
    run_sampling,
    sample_header,
    sample_item,
)
from taskcal_agents.workflow._store import SamplesStore, read_samples

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def _top(tokens: dict[str, float]) -> AIMessage:
    entries = [{"token": t, "bytes": list(t.encode()), "logprob": lp} for t, lp in tokens.items()]
    content = [{"token": entries[0]["token"], "logprob": 0.0, "top_logprobs": entries}]
    return AIMessage(content="", response_metadata={"logprobs": {"content": content}})


class ScriptedSampler:
    """A choice request gets the scripted first tokens; a greedy one calls get_weather(Paris)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def sample(self, messages: Any, **params: Any) -> list[AIMessage]:
        self.requests.append({"messages": messages, **params})
        if params.get("structured_outputs"):
            return [_top({"call": math.log(0.6), "ask": math.log(0.3), "no": math.log(0.1)})]
        call = {"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"}
        return [AIMessage(content="", tool_calls=[call])]


def _items() -> list[DatasetItem]:
    return [
        DatasetItem(
            id="paris",
            messages=[{"role": "user", "content": "What's the weather in Paris?"}],
            tools=[WEATHER],
            label="tool_call",
        ),
        DatasetItem(
            id="nowhere",
            messages=[{"role": "user", "content": "What's the weather like?"}],
            tools=[WEATHER],
            label="request_for_info",
        ),
    ]


def test_a_record_is_read_back_exactly_as_the_runtime_decides(tmp_path: Path) -> None:
    task = tool_decision()
    settings = SampleSettings(belief="one_pass")
    path = tmp_path / "s.jsonl"
    sampler = ScriptedSampler()
    with SamplesStore.open(path, sample_header(task, settings, None)) as store:
        report = run_sampling(task, _items(), sampler, store, settings)
    assert report.written == 2
    choice = sampler.requests[0]
    assert choice["structured_outputs"]["choice"] == [
        "call get_weather()",
        "ask for missing information",
        "no offered tool can do this",
    ]
    assert choice["tool_choice"] == "none" and choice["tools"] == [WEATHER]

    samples = read_samples(path)
    record = samples.records["paris"]
    assert record["belief"] == "one_pass"
    assert record["probs"] == pytest.approx([0.6, 0.3, 0.1])
    assert record["logprob"]["requests"] == 1
    assert record["samples"] == [] and record["greedy_label"] == "tool_call"

    fitted = resolve_task(samples, None)
    data = eval_arrays(fitted, samples, alpha=0.1)
    decider = Decider(fitted, alpha=0.1)
    for item in _items():
        row = data.ids.index(item.id)
        stored = samples.records[item.id]
        decision = decider.decide_one_pass(
            stored["probs"], message_from_dict(stored["greedy"]), forward_passes=2,
            tool_names=["get_weather"], context=GroundingContext(item.tools, item.messages),
        )  # fmt: skip
        np.testing.assert_allclose(data.P[row], list(decision.probs.values()))
        assert decision.relevance is not None and data.inputs is not None
        np.testing.assert_allclose(data.inputs[row][-len(decision.relevance) :],
                                   list(decision.relevance.values()))  # fmt: skip
    # The invented city is an ungrounded call: under the default grounding (relabel) the
    # call mass reads as asking, as an ungrounded sample does.
    paris, nowhere = data.ids.index("paris"), data.ids.index("nowhere")
    np.testing.assert_allclose(data.P[paris], (np.array([0.6, 0.3, 0.1]) * 16 + 0.1) / 16.3)
    np.testing.assert_allclose(data.P[nowhere], (np.array([0.0, 0.9, 0.1]) * 16 + 0.1) / 16.3)
    # The grounded greedy call can be sent; the invented one cannot.
    assert data.executable[paris, 0] and not data.executable[nowhere, 0]


def test_one_pass_needs_the_greedy_completion() -> None:
    settings = SampleSettings(belief="one_pass", greedy=False)
    with pytest.raises(ConfigurationError, match="greedy"):
        sample_item(tool_decision(), _items()[0], ScriptedSampler(), settings)


def test_an_ungrounded_greedy_call_under_grounded_features_fills_the_ungrounded_column() -> None:
    from taskcal_agents.decision import GroundingSpec, one_pass_belief

    task = tool_decision(grounding=GroundingSpec(belief="features", relevance=False))
    belief = one_pass_belief(task, [0.6, 0.3, 0.1], ungrounded=True, alpha=0.1)
    assert belief.n_ungrounded == 9  # 0.6 × 16 = 9.6, rounded down to whole samples
    np.testing.assert_allclose(belief.probs, (np.array([9.6, 4.8, 1.6]) + 0.1) / 16.3)
    grounded = one_pass_belief(task, [0.6, 0.3, 0.1], ungrounded=False, alpha=0.1)
    assert grounded.n_ungrounded == 0
    off = tool_decision(grounding=GroundingSpec(belief="off", relevance=False))
    np.testing.assert_allclose(
        one_pass_belief(off, [0.6, 0.3, 0.1], ungrounded=True, alpha=0.1).probs,
        (np.array([9.6, 4.8, 1.6]) + 0.1) / 16.3,
    )


def test_records_of_a_task_without_grounding_are_read_as_the_runtime_reads_them(
    tmp_path: Path,
) -> None:
    from taskcal_agents.decision import CalibratorArtefact, artefact_belief
    from taskcal_agents.workflow._steps import fit_artefact

    task = tool_decision(grounding=None)
    path = tmp_path / "s.jsonl"
    with SamplesStore.open(path, sample_header(task, SampleSettings(belief="one_pass", n=8),
                                               None)) as store:  # fmt: skip
        run_sampling(task, _items() * 1, ScriptedSampler(), store, SampleSettings(
            belief="one_pass", n=8))  # fmt: skip
    samples = read_samples(path)
    data = eval_arrays(resolve_task(samples, None), samples, alpha=0.1)
    decider = Decider(task, alpha=0.1)
    for item in _items():
        row = data.ids.index(item.id)
        stored = samples.records[item.id]
        decision = decider.decide_one_pass(
            stored["probs"], message_from_dict(stored["greedy"]), forward_passes=2,
            tool_names=["get_weather"],
        )  # fmt: skip
        np.testing.assert_allclose(data.P[row], list(decision.probs.values()))  # 16, not n = 8
        assert data.executable[row, 0]  # the greedy completion's call, grounded or not
    items = _items() * 10
    many = [i.model_copy(update={"id": f"{i.id}-{k}"}) for k, i in enumerate(items)]
    big = tmp_path / "big.jsonl"
    with SamplesStore.open(big, sample_header(task, SampleSettings(belief="one_pass"),
                                              None)) as store:  # fmt: skip
        run_sampling(task, many, ScriptedSampler(), store, SampleSettings(belief="one_pass"))
    fitted, _ = fit_artefact(big, calibrator="temperature", task=task, cv_folds=0)
    assert artefact_belief(CalibratorArtefact.from_dict(fitted)) == "one_pass"
