"""Fakes shared by the workflow tests (no tests here): a sampler with known signal, tiny data."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from langchain_core.messages import AIMessage

from taskcal_agents.datasets import DatasetItem
from taskcal_agents.decision import _presets as tasks
from taskcal_agents.decision._task import GroundingSpec, Task

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
