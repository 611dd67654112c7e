"""The decision protocol's rules, driven by hand: rounds, retries, errors, fallback."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from langchain_core.messages import AIMessage
from langgraph.errors import GraphInterrupt

from taskcal_agents.decision import AdaptiveSampling, Decider, SamplingOptions
from taskcal_agents.decision._adaptive import StopCheck
from taskcal_agents.decision._presets import tool_decision
from taskcal_agents.decision._protocol import (
    DecisionInput,
    Draw,
    RetryPolicy,
    decide_in_rounds,
    draw_in_rounds,
)
from taskcal_agents.errors import ConfigurationError, SamplingError
from taskcal_agents.sampling import drive_rounds

ASK = AIMessage("Which city?")
DOWN = ConnectionError("down")


def run(protocol: Any, answers: list[Any]) -> tuple[list[Draw], Any]:
    """Answer the protocol's draws in order; an exception in *answers* is thrown in."""
    draws: list[Draw] = []
    script = iter(answers)

    def draw(d: Draw) -> Any:
        draws.append(d)
        answer = next(script)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    return draws, drive_rounds(protocol, draw)


def go_on(_: int, samples: list[AIMessage]) -> StopCheck:
    return StopCheck(stop=False, change_probability=0.5, n_drawn=len(samples), n_max=16)


def test_rounds_double_and_the_seed_offset_moves_on() -> None:
    protocol = draw_in_rounds(1, 16, adaptive=AdaptiveSampling(epsilon=0.01), stop_check=go_on)
    draws, (r,) = run(protocol, [[[ASK] * 4], [[ASK] * 4], [[ASK] * 8]])
    assert [(d.n, d.drawn) for d in draws] == [(4, 0), (4, 4), (8, 8)]
    assert len(r.samples) == 16 and r.error is None and r.check is not None


def test_a_retry_redraws_only_the_inputs_that_failed() -> None:
    retry = RetryPolicy.of(max_retries=2, retry_wait=0.0)
    draws, rounds = run(
        draw_in_rounds(3, 2, retry=retry), [[[ASK] * 2, DOWN, [ASK] * 2], [[ASK] * 2]]
    )
    assert [d.items for d in draws] == [(0, 1, 2), (1,)]
    assert [d.attempt for d in draws] == [1, 2]
    assert [len(r.samples) for r in rounds] == [2, 2, 2]
    assert [r.attempts for r in rounds] == [1, 2, 1]


def test_the_waits_are_tenacitys() -> None:
    retry = RetryPolicy.of(max_retries=3, retry_wait=0.5)
    assert [retry.wait_before(k) for k in (1, 2, 3, 4)] == [0.0, 0.5, 1.0, 2.0]


def test_a_later_round_that_fails_for_good_discards_the_earlier_samples() -> None:
    protocol = draw_in_rounds(
        1, 16, adaptive=AdaptiveSampling(epsilon=0.01), retry=RetryPolicy.of(1, 0.0),
        stop_check=go_on,
    )  # fmt: skip
    draws, (r,) = run(protocol, [[[ASK] * 4], DOWN, DOWN])
    assert len(draws) == 3 and r.samples == [] and r.error is DOWN and r.attempts == 2


def test_a_short_draw_does_not_end_the_rounds() -> None:
    """A round that came back short (a response without a message) goes on to N."""
    protocol = draw_in_rounds(1, 16, adaptive=AdaptiveSampling(epsilon=0.01), stop_check=go_on)
    draws, (r,) = run(protocol, [[[ASK] * 3], [[ASK] * 4], [[ASK] * 8]])
    assert len(draws) == 3 and len(r.samples) == 15


@pytest.mark.parametrize(
    "error", [ConfigurationError("bad request"), GraphInterrupt(())], ids=["config", "interrupt"]
)
@pytest.mark.parametrize("how", ["thrown", "returned"])
def test_a_configuration_error_or_an_interrupt_leaves_the_protocol(error: Any, how: str) -> None:
    protocol = decide_in_rounds(
        Decider(tool_decision(), None), [DecisionInput()], SamplingOptions(n_samples=2),
        retry=RetryPolicy.of(3, 0.0), on_error="fallback",
    )  # fmt: skip
    with pytest.raises(type(error)):
        run(protocol, [error if how == "thrown" else [error]])


def test_on_error_raise_names_the_attempts_and_keeps_the_cause() -> None:
    protocol = decide_in_rounds(
        Decider(tool_decision(), None), [DecisionInput()], SamplingOptions(n_samples=2),
        retry=RetryPolicy.of(1, 0.0), what="X could not sample",
    )  # fmt: skip
    _, (result,) = run(protocol, [DOWN, DOWN])
    assert isinstance(result, SamplingError) and result.__cause__ is DOWN
    assert str(result).startswith("X could not sample after 2 attempt(s): ConnectionError: down")


def test_numpy_integers_are_counts_and_bools_are_not() -> None:
    assert SamplingOptions(n_samples=np.int64(8), max_retries=np.int32(1)).n_samples == 8
    for bad in (True, 8.0, "8"):
        with pytest.raises(ConfigurationError, match="must be an integer, not a bool"):
            SamplingOptions.checked("X", n_samples=bad)
