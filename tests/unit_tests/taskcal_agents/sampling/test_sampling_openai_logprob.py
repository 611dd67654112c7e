"""One-pass logprob belief: the label tree walk, fed with scripted top_logprobs."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import numpy as np
import pytest
from langchain_core.messages import AIMessage

from taskcal_agents.errors import ConfigurationError, SamplingError
from taskcal_agents.sampling._logprob import (
    alogprob_belief,
    belief_protocol,
    check_labels,
    logprob_belief,
)


def _message(top: dict[str, float]) -> AIMessage:
    entries = [
        {"token": token, "bytes": list(token.encode()), "logprob": logprob}
        for token, logprob in top.items()
    ]
    content = [{"token": entries[0]["token"], "logprob": 0.0, "top_logprobs": entries}]
    return AIMessage(content="", response_metadata={"logprobs": {"content": content}})


class ScriptedSampler:
    """Answers each request from a table keyed by the assistant prefix (\"\" at the root)."""

    def __init__(self, table: dict[str, dict[str, float]]) -> None:
        self.table = table
        self.requests: list[dict[str, Any]] = []

    def _answer(self, params: dict[str, Any]) -> list[AIMessage]:
        self.requests.append(params)
        last = params["messages"][-1]
        prefix = last["content"] if last["role"] == "assistant" else ""
        return [_message(self.table[prefix])]

    def sample(self, messages: Any = None, **params: Any) -> list[AIMessage]:
        return self._answer({"messages": messages, **params})

    async def asample(self, messages: Any = None, **params: Any) -> list[AIMessage]:
        return self._answer({"messages": messages, **params})


LABELS = ["search", "ask", "answer"]
TABLE = {
    "": {
        "search": math.log(0.5),
        "s": math.log(0.1),
        "a": math.log(0.3),
        "as": math.log(0.1),
        "<|im_start|>": -9999.0,
    },
    "a": {"n": math.log(0.75), "sk": math.log(0.25)},
}


def test_unique_first_tokens_decide_their_label_and_shared_ones_are_resolved() -> None:
    sampler = ScriptedSampler(TABLE)
    belief = logprob_belief(sampler, "Which tool?", LABELS)

    # search: 0.5 + 0.1; ask: 0.1 + 0.3 * 0.25; answer: 0.3 * 0.75
    np.testing.assert_allclose(belief.probs, [0.6, 0.175, 0.225])
    assert belief.requests == 2
    assert belief.coverage == pytest.approx(1.0)
    assert belief.unresolved_mass == 0.0
    root, follow_up = sampler.requests
    assert root["max_tokens"] == 1
    assert root["logprobs"] == 20
    assert root["structured_outputs"] == {"choice": LABELS}
    assert "extra_body" not in root
    assert follow_up["messages"][-1] == {"role": "assistant", "content": "a"}
    assert follow_up["structured_outputs"] == {"choice": ["sk", "nswer"]}
    assert follow_up["extra_body"] == {
        "continue_final_message": True,
        "add_generation_prompt": False,
    }


def test_async_gives_the_same_belief() -> None:
    sync = logprob_belief(ScriptedSampler(TABLE), "q", LABELS)
    async_ = asyncio.run(alogprob_belief(ScriptedSampler(TABLE), "q", LABELS))
    np.testing.assert_allclose(sync.probs, async_.probs)


def test_temperature_sharpens_per_step() -> None:
    table = {"": {"yes": math.log(0.8), "no": math.log(0.2)}}
    belief = logprob_belief(ScriptedSampler(table), "q", ["yes", "no"], temperature=0.5)
    np.testing.assert_allclose(belief.probs, [0.64 / 0.68, 0.04 / 0.68])
    assert belief.as_dict() == {"yes": pytest.approx(0.64 / 0.68), "no": pytest.approx(0.04 / 0.68)}


def test_light_or_deep_shared_branches_are_split_evenly() -> None:
    sampler = ScriptedSampler(TABLE)
    belief = logprob_belief(sampler, "q", LABELS, max_depth=1)
    # the shared "a" branch (0.3) is split between ask and answer
    np.testing.assert_allclose(belief.probs, [0.6, 0.25, 0.15])
    assert belief.unresolved_mass == pytest.approx(0.3)
    assert belief.requests == 1


def test_coverage_reports_mass_cut_off_by_top_logprobs() -> None:
    table = {"": {"yes": math.log(0.6), "no": math.log(0.2)}}
    belief = logprob_belief(ScriptedSampler(table), "q", ["yes", "no"])
    assert belief.coverage == pytest.approx(0.8)
    np.testing.assert_allclose(belief.probs, [0.75, 0.25])


def test_tools_are_rendered_but_not_called() -> None:
    sampler = ScriptedSampler({"": {"yes": 0.0}})
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    logprob_belief(sampler, "q", ["yes", "no"], tools=[tool])
    assert sampler.requests[0]["tools"] == [tool]
    assert sampler.requests[0]["tool_choice"] == "none"


def test_to_belief_uses_pseudo_counts() -> None:
    belief = logprob_belief(ScriptedSampler(TABLE), "q", LABELS)
    counted = belief.to_belief(20, alpha=0.0)
    np.testing.assert_allclose(counted.probs, belief.probs)
    assert counted.n == 20


def test_to_belief_relabels_choices_as_task_labels() -> None:
    belief = logprob_belief(ScriptedSampler(TABLE), "q", LABELS)
    names = [f"label_{c}" for c in LABELS]
    relabelled = belief.to_belief(20, labels=names)
    assert list(relabelled.labels) == names
    np.testing.assert_allclose(relabelled.probs, belief.to_belief(20).probs)
    with pytest.raises(ConfigurationError, match=r"^to_belief labels must give one task label"):
        belief.to_belief(20, labels=names[:-1])


def test_prefix_labels_are_refused() -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"^logprob_belief: label 'yes' is a prefix of label 'yes!'; one-pass beliefs need "
        r"prefix-free labels \(the choice grammar could stop after either\)\. Rename one of "
        r"them\.$",
    ):
        check_labels(["yes", "yes!"])


def test_no_logprobs_is_a_sampling_error() -> None:
    class Bare(ScriptedSampler):
        def sample(self, messages: Any = None, **params: Any) -> list[AIMessage]:
            return [AIMessage(content="yes")]

    with pytest.raises(
        SamplingError,
        match=r"^logprob_belief: the response carries no logprobs; the server must support "
        r"logprobs/top_logprobs on chat completions\.$",
    ):
        logprob_belief(Bare({}), "q", ["yes", "no"])


def test_unconstrained_tokens_are_a_sampling_error() -> None:
    sampler = ScriptedSampler({"": {"Sure": -0.1}})
    with pytest.raises(
        SamplingError,
        match=r"^logprob_belief: none of the returned top tokens \[\('Sure', -0\.1\)\] starts "
        r"any label of \['yes', 'no'\]; does the server apply structured_outputs\?$",
    ):
        logprob_belief(sampler, "q", ["yes", "no"])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"temperature": 0.0}, r"^logprob_belief: temperature must be > 0, got 0\.0\.$"),
        ({"top_logprobs": 21}, r"^logprob_belief: top_logprobs must be in \[1, 20\], got 21\.$"),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any], message: str) -> None:
    protocol = belief_protocol("q", ["yes", "no"], **options)
    with pytest.raises(ConfigurationError, match=message):
        next(protocol)
