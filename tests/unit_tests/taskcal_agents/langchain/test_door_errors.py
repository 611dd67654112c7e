"""One error per mistake, at every front door.

A misspelt argument is an ``UnknownArgumentError`` (a ``ConfigurationError`` and a
``TypeError``) that names the closest argument; an invalid task is a
``ConfigurationError``, whichever door it reaches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from taskcal_agents.decision import SamplingOptions, Task, tool_decision
from taskcal_agents.errors import ConfigurationError, UnknownArgumentError
from taskcal_agents.langchain import (
    TaskCalibratedChatModel,
    TaskCalibratedDecisionModel,
    TaskCalibratedRunnable,
    TaskCalibrationMiddleware,
    decision_node,
)
from tests.unit_tests.taskcal_agents.helpers.chat_fakes import RecordingChatModel


def _model() -> RecordingChatModel:
    return RecordingChatModel(responses=["Which city?"])


MISSPELT: dict[str, tuple[Callable[[], Any], str, str]] = {
    "runnable": (
        lambda: TaskCalibratedRunnable(_model(), tool_decision(), None, n_smaples=4),
        "TaskCalibratedRunnable",
        "n_samples",
    ),
    "chat_model": (
        lambda: TaskCalibratedChatModel(_model(), tool_decision(), None, temprature=0.5),
        "TaskCalibratedChatModel",
        "temperature",
    ),
    "middleware": (
        lambda: TaskCalibrationMiddleware(task=tool_decision(), calibrater=None),
        "TaskCalibrationMiddleware",
        "calibrator",
    ),
    "decision_model": (
        lambda: TaskCalibratedDecisionModel(chat_model=_model(), calibrator={}),
        "TaskCalibratedDecisionModel",
        "calibrators",
    ),
    "graph_node": (
        lambda: decision_node(_model(), tool_decision(), None, option=SamplingOptions()),
        "decision_node",
        "options",
    ),
    "middleware.model_copy": (
        lambda: TaskCalibrationMiddleware(task=tool_decision(), calibrator=None).model_copy(
            update={"n_samples": 4}
        ),
        "TaskCalibrationMiddleware.model_copy",
        "sampling",
    ),
}


@pytest.mark.parametrize("door", list(MISSPELT))
def test_a_misspelt_argument_is_one_error_at_every_door(door: str) -> None:
    build, owner, _ = MISSPELT[door]
    with pytest.raises(UnknownArgumentError, match=rf"^{owner} got unknown argument ") as info:
        build()
    assert isinstance(info.value, ConfigurationError) and isinstance(info.value, TypeError)
    assert info.value.names


@pytest.mark.parametrize("door", ["runnable", "chat_model", "middleware", "graph_node"])
def test_the_closest_argument_is_named(door: str) -> None:
    build, _, closest = MISSPELT[door]
    with pytest.raises(UnknownArgumentError, match=rf"\(did you mean '{closest}'\?\)"):
        build()


BAD_TASK = {**tool_decision().model_dump(mode="json"), "cost": [[0, 1], [1, 0]]}
"""A tool-decision task whose cost matrix has two rows for three labels."""


def test_an_invalid_task_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match=r"^Task 'tool_decision' is invalid"):
        Task.model_validate(BAD_TASK)
    with pytest.raises(ConfigurationError, match=r"^Task 'tool_decision' is invalid"):
        Task(**BAD_TASK)


INVALID_TASK_AT: dict[str, Callable[[], Any]] = {
    "runnable": lambda: TaskCalibratedRunnable(_model(), BAD_TASK, None),  # type: ignore[arg-type]
    "chat_model": lambda: TaskCalibratedChatModel(_model(), BAD_TASK, None),  # type: ignore[arg-type]
    "middleware": lambda: TaskCalibrationMiddleware(task=BAD_TASK, calibrator=None),  # type: ignore[arg-type]
    "graph_node": lambda: decision_node(_model(), BAD_TASK, None),  # type: ignore[arg-type]
    "decision_model": lambda: TaskCalibratedDecisionModel(
        chat_model=_model(), costs={"team": [[0, 1], [1, 0]]}
    ).task_for("team", _team()),
}


def _team() -> Any:
    from langchain_core.decisions import Choice

    return Choice(instructions="Which team?", criteria={"a": "A.", "b": "B.", "c": "C."})


@pytest.mark.parametrize("door", list(INVALID_TASK_AT))
def test_an_invalid_task_is_a_configuration_error_at_every_door(door: str) -> None:
    with pytest.raises(ConfigurationError):
        INVALID_TASK_AT[door]()
