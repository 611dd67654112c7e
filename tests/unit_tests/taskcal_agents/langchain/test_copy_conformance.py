"""A copy of every front door decides as a freshly built door with the copy's settings.

Each door is built, then copied while one setting changes (the calibrator, α, N, the task,
the served model's name, ``tool_choice``) through the ways LangChain and pydantic copy or
rebind it: ``model_copy(update=...)``, ``with_model``, ``bind_tools``,
``configurable_fields`` with ``with_config``, and (for the middleware, whose model and
``tool_choice`` come with each request) ``ModelRequest.override``. The copy decides on
the same scripted samples as a door built fresh with the changed settings: their decision
records must be equal. Every change moves the record away from the original door's (where
the door reads that setting), so a copy that kept the original's calibrator, α or session
fails here.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest, ModelResponse
from langchain_core.decisions import Choice
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import ConfigurableField
from langgraph.runtime import Runtime

from taskcal_agents.decision import SamplingOptions, UncalibratedWarning
from taskcal_agents.decision._presets import tool_decision
from taskcal_agents.langchain import (
    TaskCalibratedChatModel,
    TaskCalibratedDecisionModel,
    TaskCalibratedRunnable,
    TaskCalibrationMiddleware,
)
from taskcal_agents.langchain._session import DECISION_METADATA_KEY
from tests.unit_tests.taskcal_agents.helpers.calibration import fitted
from tests.unit_tests.taskcal_agents.helpers.chat_fakes import NamedChatModel, get_weather

SHIPPED_FOR = "qwen2.5-coder-0.5b-instruct"
"""A registry model with a shipped tool-decision calibrator (N = 16, T = 1.0)."""


USER = "What's the weather in Paris right now?"
CALL = AIMessage(
    content="", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"}]
)
REPLIES = [CALL, CALL, "Which city do you mean?", CALL] * 4
"""Sixteen replies (12 calls, 4 questions), cycled: a draw of N sees the first N."""
OTHER_COST = [[0, 1, 2], [6, 0, 6], [9, 1, 0]]
"""Another deployment's cost matrix (the task changed, its belief fields not)."""


def _model(name: str = SHIPPED_FOR) -> NamedChatModel:
    return NamedChatModel(responses=list(REPLIES), model_name=name)


def _view(record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "decision_id": None}


BASE: dict[str, Any] = {"calibrator": "auto", "n_samples": 16, "temperature": 1.0}
CHANGES: dict[str, Any] = {
    "calibrator": None,
    "alpha": 5.0,
    "n_samples": 8,
    "task": tool_decision(cost=OTHER_COST),
    "model_name": "my-own-model",
    "tool_choice": "required",
}
"""Each setting a copy changes, with its new value."""


def _run(call: Any, mode: str) -> Any:
    return asyncio.run(call) if mode == "async" else call


def _quiet(fn: Callable[[], Any]) -> Any:
    with warnings.catch_warnings():  # "auto" without a match warns: not what is tested
        warnings.simplefilter("ignore", UncalibratedWarning)
        return fn()


# ---------------------------------------------------------------------------- runnable


def _bound(name: str = SHIPPED_FOR, tool_choice: str | None = None) -> Any:
    extra = {} if tool_choice is None else {"tool_choice": tool_choice}
    return _model(name).bind_tools([get_weather], **extra)


def _runnable_settings(setting: str | None = None, value: Any = None) -> dict[str, Any]:
    """The fresh runnable's arguments with ``setting`` changed (``None``: the original's)."""
    args = {"model": _bound(), "task": tool_decision(), **BASE}
    if setting is None:
        return args
    if setting == "model_name":
        args["model"] = _bound(value)
    elif setting == "tool_choice":
        args["model"] = _bound(tool_choice=value)
    else:
        args[setting] = value
    return args


def _runnable_copies(setting: str, value: Any) -> dict[str, Callable[[], Any]]:
    """The ways to copy a runnable with ``setting`` changed."""
    original = _quiet(lambda: TaskCalibratedRunnable(**_runnable_settings()))
    update = {k: v for k, v in _runnable_settings(setting, value).items() if k in ("model",)}
    if setting not in ("model_name", "tool_choice"):
        update = {setting: value, "model": _bound()}
    field = "model" if setting in ("model_name", "tool_choice") else setting
    configurable = original.configurable_fields(**{field: ConfigurableField(id=field)})
    return {
        "model_copy": lambda: original.model_copy(update=update),
        "configurable_fields": lambda: configurable.with_config(
            configurable={field: update[field]}
        ),
    }


def _decide_runnable(door: Any, mode: str) -> dict[str, Any]:
    messages = [HumanMessage(USER)]
    decision = _run(door.ainvoke(messages) if mode == "async" else door.invoke(messages), mode)
    return _view(decision.to_metadata())


# -------------------------------------------------------------------------- chat model


def _chat_copies(setting: str, value: Any) -> dict[str, Callable[[], Any]]:
    def original() -> TaskCalibratedChatModel:
        return TaskCalibratedChatModel(_model(), tool_decision(), **BASE).bind_tools([get_weather])  # type: ignore[return-value]

    if setting == "model_name":
        return {"with_model": lambda: original().with_model(_bound(value))}
    if setting == "tool_choice":
        return {
            "bind_tools": lambda: original().bind_tools([get_weather], tool_choice=value),
            "with_model": lambda: original().with_model(_bound(tool_choice=value)),
        }
    return {
        "model_copy": lambda: original().model_copy(update={setting: value}),
        "model_copy(runnable=...)": lambda: original().model_copy(
            update={"runnable": original().runnable.model_copy(update={setting: value})}
        ),
    }


def _decide_chat_with(door: Any, kwargs: dict[str, Any], mode: str) -> Any:
    messages = [HumanMessage(USER)]
    if mode == "async":
        return asyncio.run(door.ainvoke(messages, **kwargs))
    return door.invoke(messages, **kwargs)


def _decide_chat(door: Any, mode: str) -> dict[str, Any]:
    messages = [HumanMessage(USER)]
    reply = _run(door.ainvoke(messages) if mode == "async" else door.invoke(messages), mode)
    return _view(reply.response_metadata[DECISION_METADATA_KEY])


# -------------------------------------------------------------------------- middleware


def _request(name: str = SHIPPED_FOR, tool_choice: str | None = None) -> ModelRequest[Any]:
    messages: list[BaseMessage] = [HumanMessage(USER)]
    return ModelRequest(
        model=_model(name), messages=messages, tools=[get_weather], tool_choice=tool_choice,
        state={"messages": messages}, runtime=Runtime(),
    )  # fmt: skip


def _middleware_args(setting: str | None = None, value: Any = None) -> dict[str, Any]:
    options = {"n_samples": BASE["n_samples"], "temperature": BASE["temperature"]}
    args: dict[str, Any] = {"task": tool_decision(), "calibrator": "auto", "sampling": "model"}
    if setting in ("alpha", "n_samples"):
        options[setting] = value
    elif setting in ("calibrator", "task"):
        args[setting] = value
    args["options"] = SamplingOptions(**options)
    return args


def _decide_middleware(mw: TaskCalibrationMiddleware[Any, Any], request: Any, mode: str) -> Any:
    def handler(req: ModelRequest[Any]) -> ModelResponse[Any]:  # pragma: no cover
        raise AssertionError

    if mode == "async":
        result = asyncio.run(mw.awrap_model_call(request, handler))  # type: ignore[arg-type]
    else:
        result = mw.wrap_model_call(request, handler)
    assert isinstance(result, ExtendedModelResponse)
    [message] = result.model_response.result
    return _view(message.response_metadata[DECISION_METADATA_KEY])


def _request_for(setting: str, value: Any) -> ModelRequest[Any]:
    if setting == "model_name":
        return _request(value)
    if setting == "tool_choice":
        return _request(tool_choice=value)
    return _request()


# ----------------------------------------------------------------------- the test


MODES = ("sync", "async")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("setting", list(CHANGES))
def test_a_copied_runnable_decides_as_a_fresh_one(setting: str, mode: str) -> None:
    value = CHANGES[setting]
    base = _quiet(lambda: _decide_runnable(TaskCalibratedRunnable(**_runnable_settings()), mode))
    fresh = _quiet(
        lambda: _decide_runnable(TaskCalibratedRunnable(**_runnable_settings(setting, value)), mode)
    )
    assert fresh != base, "the change must move the decision record"
    for how, make in _runnable_copies(setting, value).items():
        copied = _quiet(lambda make=make: _decide_runnable(make(), mode))
        assert copied == fresh, f"{how} of the runnable with {setting} changed"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("setting", list(CHANGES))
def test_a_copied_chat_model_decides_as_a_fresh_one(setting: str, mode: str) -> None:
    value = CHANGES[setting]
    args = _runnable_settings(setting, value)
    fresh = _quiet(lambda: _decide_chat(TaskCalibratedChatModel(**args), mode))
    for how, make in _chat_copies(setting, value).items():
        copied = _quiet(lambda make=make: _decide_chat(make(), mode))
        assert copied == fresh, f"{how} of the chat model with {setting} changed"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("setting", list(CHANGES))
def test_a_copied_middleware_decides_as_a_fresh_one(setting: str, mode: str) -> None:
    value = CHANGES[setting]
    request = _request_for(setting, value)
    fresh = _quiet(
        lambda: _decide_middleware(
            TaskCalibrationMiddleware(**_middleware_args(setting, value)), request, mode
        )
    )
    original = _quiet(lambda: TaskCalibrationMiddleware(**_middleware_args()))
    base = _quiet(lambda: _decide_middleware(original, _request(), mode))  # resolves "auto"
    assert fresh != base, "the change must move the decision record"
    if setting in ("model_name", "tool_choice"):  # the request carries them
        copies = {"ModelRequest.override": lambda: (original, _request_for(setting, value))}
    else:
        update = {k: v for k, v in _middleware_args(setting, value).items() if k != "sampling"}
        copies = {"model_copy": lambda: (original.model_copy(update=update), _request())}
    for how, make in copies.items():
        copied = _quiet(lambda make=make: _decide_middleware(*make(), mode))
        assert copied == fresh, f"{how} of the middleware with {setting} changed"


TEAM = Choice(
    instructions="Which team should handle this request?",
    criteria={"billing": "Payments.", "technical": "Bugs.", "sales": "Pricing."},
)
TEAM_REPLIES = ["technical", "technical", "billing", "technical"] * 4
DECISION_MODEL_CHANGES: dict[str, Any] = {
    "calibrators": {"team": fitted()},
    "alpha": 5.0,
    "n_samples": 8,
    "costs": {"team": [[0, 1, 1], [4, 0, 4], [1, 1, 0]]},
    "chat_model": NamedChatModel(responses=TEAM_REPLIES, model_name="my-own-model"),
}
"""The decision model's settings: its task is the question's, with its ``costs``."""


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("setting", list(DECISION_MODEL_CHANGES))
def test_a_copied_decision_model_decides_as_a_fresh_one(setting: str, mode: str) -> None:
    value = DECISION_MODEL_CHANGES[setting]

    def build(**update: Any) -> TaskCalibratedDecisionModel:
        args: dict[str, Any] = {
            "chat_model": NamedChatModel(responses=TEAM_REPLIES, model_name=SHIPPED_FOR),
            "n_samples": 16,
        }
        return TaskCalibratedDecisionModel(**{**args, **update})

    def decide(model: TaskCalibratedDecisionModel) -> dict[str, Any]:
        call = model.adecide if mode == "async" else model.decide
        decision = _run(call("Stripe fails.", "team", TEAM), mode)
        return _view(decision.to_metadata())

    original = build()
    base = _quiet(lambda: decide(original))
    fresh = _quiet(lambda: decide(build(**{setting: value})))
    copied = _quiet(lambda: decide(original.model_copy(update={setting: value})))
    assert copied == fresh, f"model_copy of the decision model with {setting} changed"
    if setting != "chat_model":  # no calibrator is shipped for this question on either
        assert fresh != base, "the change must move the decision record"


@pytest.mark.parametrize("mode", MODES)
def test_per_call_settings_pick_the_calibrator_for_what_is_sampled(mode: str) -> None:
    """A temperature or ``tool_choice`` given per call is what the samples are drawn at."""
    runnable = _quiet(lambda: TaskCalibratedRunnable(**_runnable_settings()))
    assert runnable.decider.calibrator_id is not None  # the shipped one, for T = 1.0
    chat = TaskCalibratedChatModel(runnable=runnable)
    messages = [HumanMessage(USER)]
    for kwargs in ({"temperature": 0.2}, {"tool_choice": "required"}):
        reply = _quiet(lambda kw=kwargs: _decide_chat_with(chat, kw, mode))  # warned once
        assert reply.response_metadata[DECISION_METADATA_KEY]["calibrator_id"] is None
        bound = runnable.bind(**kwargs)
        decision = _quiet(
            lambda b=bound: _run(
                b.ainvoke(messages) if mode == "async" else b.invoke(messages), mode
            )
        )
        assert decision.calibrator_id is None
    same = _quiet(lambda: runnable.invoke(messages, temperature=1.0))
    assert same.calibrator_id == runnable.decider.calibrator_id


def test_configurable_fields_rebuild_a_runnable_over_a_retry_layer() -> None:
    model = _bound().with_retry(stop_after_attempt=2)
    runnable = _quiet(lambda: TaskCalibratedRunnable(model, tool_decision(), None, n_samples=4))
    configurable = runnable.configurable_fields(n_samples=ConfigurableField(id="n"))
    decision = configurable.with_config(configurable={"n": 8}).invoke([HumanMessage(USER)])
    assert decision.n_samples == 8


def test_a_reloaded_artefact_is_checked_against_the_door(tmp_path: Any) -> None:
    """``reload_artefact`` checks each load as a fixed artefact is checked."""
    from taskcal_agents.decision import CalibratorMismatchWarning, shipped_artefacts
    from taskcal_agents.errors import ConfigurationError

    [ship] = [a for a in shipped_artefacts() if a.metadata["record"]["model"] == SHIPPED_FOR]
    path = ship.save(tmp_path / "shipped.json")
    args = {"model": _bound("my-own-model"), "task": tool_decision(), "calibrator": path,
            "n_samples": 16, "temperature": 1.0, "reload_artefact": True}  # fmt: skip
    with pytest.warns(CalibratorMismatchWarning, match="my-own-model"):
        TaskCalibratedRunnable(**args)
    with pytest.raises(ConfigurationError, match="my-own-model"):
        TaskCalibratedRunnable(**args, strict_calibrator=True)
    mw = TaskCalibrationMiddleware(
        task=tool_decision(), calibrator=path, reload_artefact=True, sampling="model",
        options=SamplingOptions(n_samples=16, temperature=1.0),
    )  # fmt: skip
    with pytest.warns(CalibratorMismatchWarning, match="my-own-model"):
        _decide_middleware(mw, _request("my-own-model"), "sync")


def test_the_middleware_picks_for_the_temperature_it_samples_at() -> None:
    """The options' temperature is what the samples are drawn at, not the request's own."""
    mw = TaskCalibrationMiddleware(**_middleware_args())  # T = 1.0 in its options
    request = _request().override(model_settings={"temperature": 0.3})
    record = _quiet(lambda: _decide_middleware(mw, request, "sync"))
    assert record["calibrator_id"] is not None  # the shipped one, fitted at T = 1.0
    assert {c.get("temperature") for c in request.model.calls} == {1.0}  # type: ignore[attr-defined]


def test_a_reloaded_artefact_is_checked_for_per_call_settings(tmp_path: Any) -> None:
    from taskcal_agents.decision import CalibratorMismatchWarning, shipped_artefacts
    from taskcal_agents.errors import ConfigurationError

    [ship] = [a for a in shipped_artefacts() if a.metadata["record"]["model"] == SHIPPED_FOR]
    path = ship.save(tmp_path / "shipped.json")
    for reload in (False, True):
        runnable = TaskCalibratedRunnable(
            _bound(), tool_decision(), path, n_samples=16, temperature=1.0, reload_artefact=reload
        )
        with pytest.warns(CalibratorMismatchWarning, match="temperature"):
            runnable.invoke([HumanMessage(USER)], temperature=0.25 + reload / 8)
        strict = TaskCalibratedRunnable(
            _bound(), tool_decision(), path, n_samples=16, temperature=1.0,
            reload_artefact=reload, strict_calibrator=True,
        )  # fmt: skip
        with pytest.raises(ConfigurationError, match="temperature"):
            strict.invoke([HumanMessage(USER)], temperature=0.5 + reload / 8)


def test_a_door_keeps_at_most_128_settings() -> None:
    from taskcal_agents.langchain import _session

    runnable = _quiet(lambda: TaskCalibratedRunnable(**_runnable_settings()))
    for i in range(140):
        runnable.invoke([HumanMessage(USER)], max_tokens=300 + i)  # each another setting
    assert len(runnable.session.source._kept._entries) <= _session._KEPT  # type: ignore[attr-defined]
