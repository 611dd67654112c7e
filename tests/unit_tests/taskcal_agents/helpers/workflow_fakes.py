"""Fakes shared by the workflow tests (no tests here): a sampler with known signal, tiny data,
and the samples files written with them."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.messages import AIMessage

from taskcal_agents.datasets import DatasetItem
from taskcal_agents.decision import _presets as tasks
from taskcal_agents.decision._task import GroundingSpec, Task
from taskcal_agents.workflow import SampleSettings, SamplesStore, run_sampling, sample_header
from taskcal_agents.workflow._runner import message_to_dict

WHEN2CALL_COST = [[0.0, 1.0, 2.0], [4.0, 0.0, 2.0], [4.0, 1.0, 0.0]]
LABELS = ("tool_call", "request_for_info", "cannot_answer")

TEXTS = {
    "tool_call": None,
    "request_for_info": "Could you tell me which account you mean?",
    "cannot_answer": "I'm sorry, I can't help with that.",
}


def tool_task(**kw: Any) -> Task:
    kw.setdefault("grounding", GroundingSpec())  # adaptive N and p̂-only fits: no relevance
    return tasks.tool_decision(cost=WHEN2CALL_COST, name="when2call", **kw)


def tool_items(n: int) -> list[DatasetItem]:
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    return [
        DatasetItem(
            id=f"item-{i:03d}",
            messages=[{"role": "user", "content": f"request {i} truth={LABELS[i % 3]}"}],
            tools=[tool],
            label=LABELS[i % 3],
        )
        for i in range(n)
    ]


def label_message(label: str | None) -> AIMessage:
    if label is None:
        return AIMessage(content="")
    if label == "tool_call":
        return AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"q": 1}, "id": "c1"}])
    return AIMessage(content=TEXTS[label])


class FakeSampler:
    """Answers with the true label (read from the prompt) with probability *signal*.

    Each call is seeded by the prompt and temperature, so runs are reproducible. Greedy
    calls (temperature 0) return the most likely label. ``fail_ids`` make calls raise.
    """

    def __init__(
        self, signal: float = 0.6, unparsed: float = 0.05, fail_ids: Sequence[str] = ()
    ) -> None:
        self.signal = signal
        self.unparsed = unparsed
        self.fail_ids = set(fail_ids)
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def sample(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int,
        temperature: float,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> list[AIMessage]:
        content = str(messages[-1]["content"])
        with self._lock:
            self.calls.append(
                {"messages": list(messages), "n": n, "temperature": temperature, "tools": tools}
            )
        if any(f"request {i.split('-')[-1].lstrip('0') or '0'} " in content for i in self.fail_ids):
            msg = "connection refused"
            raise ConnectionError(msg)
        truth = content.rsplit("truth=", 1)[-1]
        if temperature == 0:
            return [label_message(truth)]
        seed = int(hashlib.sha256(f"{content}|{temperature}".encode()).hexdigest()[:8], 16)
        rng = np.random.default_rng(seed)
        out = []
        for _ in range(n):
            u = rng.random()
            if u < self.unparsed:
                out.append(label_message(None))
            elif u < self.unparsed + self.signal:
                out.append(label_message(truth))
            else:
                out.append(label_message(str(rng.choice(LABELS))))
        return out


class QASampler:
    """Answer-or-abstain fake: answers ``answer`` (greedy) and a mix when sampling."""

    def __init__(self, answers: Mapping[str, str]) -> None:
        self.answers = dict(answers)

    def sample(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int,
        temperature: float,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> list[AIMessage]:
        question = str(messages[-1]["content"]).rsplit("Question: ", 1)[-1]
        answer = self.answers[question]
        if temperature == 0:
            return [AIMessage(content=answer)]
        return [AIMessage(content=answer if i % 2 else "I don't know.") for i in range(n)]


SCRIPTED = (
    # (content, tool_calls, finish_reason): what ScriptedSampler returns, in order
    ("", [{"name": "lookup", "args": {"q": 1}, "id": "c1"}], "tool_calls"),  # tool_call
    ('<tool_call>{"name": "lookup", "arguments": {"q": ', [], "length"),  # tool_call (intent)
    ('<tool_call>{"name": "delete_all", "arguments": {}}</tool_call>', [], "stop"),  # unoffered
    ('<tool_call>{"name": "delete_all", "argum', [], "length"),  # unoffered, cut off
    ("The weather there is usually", [], "length"),  # length
    ("", [], "stop"),  # empty
    ("Bananas are yellow.", [], "stop"),  # other
    ("Which account do you mean?", [], "length"),  # request_for_info despite the cut
)


class ScriptedSampler:
    """Returns the :data:`SCRIPTED` completions (cycled to *n*) for every item."""

    def sample(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int,
        temperature: float,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> list[AIMessage]:
        return [
            AIMessage(
                content=content,
                tool_calls=calls,
                response_metadata={"finish_reason": finish},
            )
            for content, calls, finish in (SCRIPTED[i % len(SCRIPTED)] for i in range(n))
        ]


def _call(i: int) -> AIMessage:
    return AIMessage(
        content="", tool_calls=[{"name": "lookup", "args": {"q": f"x{i}"}, "id": f"c{i}"}]
    )


LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look something up.",
        "parameters": {
            "type": "object",
            "properties": {"q": {"type": "string"}},
            "required": ["q"],
        },
    },
}
CUT_OFF = AIMessage(content='<tool_call>{"name": "lookup", "argu')
UNOFFERED = AIMessage(content="", tool_calls=[{"name": "rm_rf", "args": {}, "id": "u"}])
QUESTION = AIMessage(content="Which city do you mean?")
REFUSAL = AIMessage(content="I can't help with that.")
GARBAGE = AIMessage(content="Lorem ipsum dolor sit amet.")


def _samples_file(tmp_path: Path, n: int = 90, seed: int = 0) -> Path:
    """Fake records: real tool calls, cut-off calls labelled tool_call, questions,
    refusals and unparsed samples; some items have no usable sample, some have many
    tool_call labels but no tool call that can be extracted."""
    rng = np.random.default_rng(seed)
    task = tool_task()
    path = tmp_path / "s.jsonl"
    with SamplesStore.open(path, sample_header(task, SampleSettings(n=8), None)) as store:
        for i in range(n):
            truth = LABELS[i % 3]
            kind = rng.choice(
                ["normal", "cut_off", "unparsed", "unoffered"], p=[0.5, 0.25, 0.1, 0.15]
            )
            messages: list[AIMessage] = []
            labels: list[str | None] = []
            for _ in range(8):
                if kind == "unparsed":
                    messages.append(GARBAGE)
                    labels.append(None)
                    continue
                if kind == "unoffered" and rng.random() < 0.5:  # a call to a tool not offered
                    messages.append(UNOFFERED)
                    labels.append(None)
                    continue
                label = truth if rng.random() < 0.55 else LABELS[rng.integers(3)]
                if label == "tool_call":
                    messages.append(CUT_OFF if kind == "cut_off" else _call(i))
                else:
                    messages.append(QUESTION if label == "request_for_info" else REFUSAL)
                labels.append(label)
            store.append(
                {
                    "id": f"item-{i:03d}",
                    "label": truth,
                    "labels": labels,
                    "samples": [message_to_dict(m) for m in messages],
                    "greedy": None,
                    "greedy_label": None,
                    "tool_names": ["lookup"],
                    # What `taskcal sample` stores for grounding: the item's tools and
                    # conversation (the user states the query, so _call(i) is grounded).
                    "tools": [LOOKUP],
                    "messages": [{"role": "user", "content": f"Please look up x{i}."}],
                }
            )
    return path


def _sampled(tmp_path: Path, n: int = 45, signal: float = 0.6) -> Path:
    task, items = tool_task(), tool_items(n)
    settings = SampleSettings(n=8)
    path = tmp_path / "s.jsonl"
    with SamplesStore.open(path, sample_header(task, settings, None)) as store:
        run_sampling(task, items, FakeSampler(signal=signal), store, settings)
    return path
