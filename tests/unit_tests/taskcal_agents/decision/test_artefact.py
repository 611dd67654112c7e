"""The calibrator artefact and its one check, through every front door."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.decisions import Choice
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

from calibrators import TemperatureScaling
from taskcal_agents._files import write_json
from taskcal_agents.decision import _presets as tasks
from taskcal_agents.decision._artefact import (
    ARTEFACT_FORMAT_VERSION,
    Calibrator,
    CalibratorArtefact,
    resolve_calibrator,
)
from taskcal_agents.decision._belief import DEFAULT_ALPHA
from taskcal_agents.decision._options import DEFAULT_N_SAMPLES
from taskcal_agents.decision._task import Task
from taskcal_agents.errors import ConfigurationError, DataFileError, LabelMismatchError
from taskcal_agents.langchain._chat_model import TaskCalibratedChatModel
from taskcal_agents.langchain._decision_model import TaskCalibratedDecisionModel
from taskcal_agents.langchain._middleware import TaskCalibrationMiddleware
from taskcal_agents.langchain._runnable import TaskCalibratedRunnable
from taskcal_agents.workflow._fit import make_artefact
from tests.unit_tests.taskcal_agents.helpers.calibration import fitted

TASK = tasks.tool_decision()
LABELS = list(TASK.labels)
TEAM = Choice(
    instructions="Which team?",
    criteria={"billing": "Payments.", "technical": "Bugs.", "sales": "Pricing."},
)
TEAM_LABELS = ["billing", "technical", "sales"]


def artefact(labels: list[str] = LABELS, **kwargs: Any) -> CalibratorArtefact:
    kwargs.setdefault("task_name", None if "task" in kwargs else "t")
    return CalibratorArtefact(calibrator=fitted(), labels=labels, alpha=0.5, **kwargs)


def fake() -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter(["billing"] * 40))


# Each front door built with a calibrator argument; returns (calibrator, alpha) it uses.
FrontDoor = Callable[[Any], tuple[Any, float]]


def runnable(calibrator: Any) -> tuple[Any, float]:
    decider = TaskCalibratedRunnable(fake(), TASK, calibrator).decider
    return decider.calibrator, decider.alpha


def chat_model(calibrator: Any) -> tuple[Any, float]:
    decider = TaskCalibratedChatModel(fake(), TASK, calibrator).runnable.decider
    return decider.calibrator, decider.alpha


def middleware(calibrator: Any) -> tuple[Any, float]:
    decider = TaskCalibrationMiddleware(task=TASK, calibrator=calibrator).session.in_force().decider
    return decider.calibrator, decider.alpha


def decision_model(calibrator: Any) -> tuple[Any, float]:
    model = TaskCalibratedDecisionModel(chat_model=fake(), calibrators={"team": calibrator})
    decider = model._decider("team", TEAM)
    return decider.calibrator, decider.alpha


FRONT_DOORS: dict[str, tuple[FrontDoor, list[str], str]] = {
    "runnable": (runnable, LABELS, "TaskCalibratedRunnable"),
    "chat_model": (chat_model, LABELS, "TaskCalibratedRunnable"),
    "middleware": (middleware, LABELS, "TaskCalibrationMiddleware"),
    "decision_model": (decision_model, TEAM_LABELS, "TaskCalibratedDecisionModel question 'team'"),
}


# ------------------------------------------------------------------------ artefact


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    original = artefact(task=TASK, metadata={"calibrator_name": "temperature", "extra": 1})
    path = original.save(tmp_path / "sub" / "cal.json")
    assert original.path == path
    assert not list(path.parent.glob(".*.tmp"))  # the atomic write leaves no temporary file
    data = json.loads(path.read_text())
    assert data["format"] == "taskcal.calibrator"
    assert data["format_version"] == 1  # version 2 only with a risk control
    assert ARTEFACT_FORMAT_VERSION == 2
    assert "risk_control" not in data
    assert (data["task"], data["labels"], data["alpha"]) == (TASK.name, LABELS, 0.5)
    assert data["actions"] == list(TASK.action_list)
    assert data["extra"] == 1
    loaded = CalibratorArtefact.load(path)
    assert isinstance(loaded.calibrator, Calibrator)
    assert (loaded.labels, loaded.alpha, loaded.task, loaded.path) == (LABELS, 0.5, TASK, path)
    assert loaded.task_name == TASK.name
    P = np.array([[0.5, 0.3, 0.2]])
    np.testing.assert_allclose(loaded.calibrator.predict_proba(P), fitted().predict_proba(P))
    assert loaded.to_dict() == data


def test_files_written_by_taskcal_fit_still_load(tmp_path: Path) -> None:
    # the dict `taskcal fit` writes (make_artefact), unchanged in format and version
    path = write_json(
        make_artefact(
            task_name="tool_decision",
            labels=LABELS,
            actions=LABELS,
            alpha=0.1,
            calibrator_name="temperature",
            calibrator=fitted(),
            fit_metrics={"n": 4},
        ),
        tmp_path / "cal.json",
    )
    loaded = CalibratorArtefact.load(path)
    assert (loaded.task_name, loaded.labels, loaded.alpha, loaded.task) == (
        "tool_decision",
        LABELS,
        0.1,
        None,
    )
    assert loaded.metadata["fit_metrics"] == {"n": 4}
    loaded.check_for(labels=LABELS)
    assert type(loaded.calibrator) is TemperatureScaling
    assert loaded.to_dict() == json.loads(path.read_text())


def test_resolve_takes_the_explicit_alpha_first() -> None:
    assert resolve_calibrator(artefact(), TASK, owner="X").alpha == 0.5
    assert resolve_calibrator(artefact(), TASK, alpha=0.2, owner="X").alpha == 0.2
    assert resolve_calibrator(fitted(), TASK, owner="X").alpha == DEFAULT_ALPHA
    assert resolve_calibrator(None, TASK, owner="X").calibrator is None


# --------------------------------------------------------------- every front door


@pytest.mark.parametrize("door", FRONT_DOORS)
@pytest.mark.parametrize("form", ["calibrator", "artefact", "path"])
def test_front_door_accepts_each_form(door: str, form: str, tmp_path: Path) -> None:
    build, labels, _ = FRONT_DOORS[door]
    given: Any = {
        "calibrator": fitted(),
        "artefact": artefact(labels),
        "path": artefact(labels).save(tmp_path / "cal.json"),
    }[form]
    if form == "path" and door == "middleware":
        given = str(given)  # str and PathLike both work
    calibrator, alpha = build(given)
    assert type(calibrator) is TemperatureScaling
    assert alpha == (DEFAULT_ALPHA if form == "calibrator" else 0.5)


@pytest.mark.parametrize("door", FRONT_DOORS)
@pytest.mark.parametrize("saved", [False, True])
def test_front_door_refuses_labels_in_another_order(door: str, saved: bool, tmp_path: Path) -> None:
    build, labels, owner = FRONT_DOORS[door]
    swapped = [labels[1], labels[0], labels[2]]
    given: Any = artefact(swapped)
    where = "for task 't'"
    if saved:
        given = given.save(tmp_path / "cal.json")
        where = repr(str(given))
    task_name = "team" if door == "decision_model" else TASK.name
    msg = (
        f"{owner}: calibrator artefact {where} was fitted on labels {swapped!r} but task "
        f"{task_name!r} has labels {labels!r}; fit a calibrator for this task with "
        "`taskcal fit`."
    )
    with pytest.raises(LabelMismatchError, match=f"^{re.escape(msg)}$") as info:
        build(given)
    assert (info.value.expected, info.value.got) == (labels, swapped)


@pytest.mark.parametrize("door", FRONT_DOORS)
def test_front_door_refuses_a_missing_path(door: str, tmp_path: Path) -> None:
    build = FRONT_DOORS[door][0]
    path = tmp_path / "none.json"
    msg = f"{path}: calibrator artefact not found; write one with `taskcal fit` or check the path."
    with pytest.raises(DataFileError, match=f"^{re.escape(msg)}$"):
        build(path)


def test_one_n_samples_default_everywhere() -> None:
    assert DEFAULT_N_SAMPLES == 16
    assert TaskCalibratedRunnable(fake(), TASK).n_samples == DEFAULT_N_SAMPLES
    assert TaskCalibratedChatModel(fake(), TASK).runnable.n_samples == DEFAULT_N_SAMPLES
    assert TaskCalibrationMiddleware(task=TASK).options.n_samples == DEFAULT_N_SAMPLES
    assert TaskCalibratedDecisionModel(chat_model=fake()).n_samples == DEFAULT_N_SAMPLES


def test_middleware_takes_the_task_from_an_artefact_object() -> None:
    given = artefact(task=Task.model_validate(TASK.model_dump()))
    assert TaskCalibrationMiddleware(calibrator=given).task == TASK


def test_an_artefact_must_agree_with_its_task() -> None:
    msg = (
        "CalibratorArtefact: labels ['a', 'b', 'c'] differ from those of its task "
        "'tool_decision' ['tool_call', 'request_for_info', 'cannot_answer']; record the "
        "task the calibrator was fitted for."
    )
    with pytest.raises(LabelMismatchError, match=f"^{re.escape(msg)}$"):
        artefact(["a", "b", "c"], task=TASK)
    msg = (
        "CalibratorArtefact: task_name 'other' differs from its task's name 'tool_decision'; "
        "record the task the calibrator was fitted for."
    )
    with pytest.raises(ConfigurationError, match=f"^{re.escape(msg)}$"):
        artefact(task=TASK, task_name="other")
