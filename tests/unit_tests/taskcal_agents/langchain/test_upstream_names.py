"""A registry model served under its upstream name decides with its shipped calibrator.

Through a front door (the Runnable, the middleware): no ``UncalibratedWarning``, the
decision names the shipped artefact, and the decision log says that the artefact was
fitted on the registry's quantised weights.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.runtime import Runtime

from taskcal_agents.decision import SamplingOptions, _shipped, shipped_artefacts, tool_decision
from taskcal_agents.langchain import TaskCalibratedRunnable, TaskCalibrationMiddleware
from taskcal_agents.production import open_decision_log
from tests.unit_tests.taskcal_agents.helpers.chat_fakes import NamedChatModel, get_weather

UPSTREAM = "Qwen/Qwen2.5-Coder-0.5B-Instruct"
REGISTRY = "qwen2.5-coder-0.5b-instruct"


CALL = AIMessage(
    content="", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"}]
)


def _shipped_id() -> str:
    [ship] = [a for a in shipped_artefacts() if a.metadata["record"]["model"] == REGISTRY]
    return ship.content_id


@pytest.mark.parametrize("served", [UPSTREAM, "/models/Qwen2.5-Coder-0.5B-Instruct"])
def test_the_runnable_finds_the_calibrator_under_the_upstream_name(
    served: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_shipped, "_NOTED", set())  # the note is logged once per process
    log = tmp_path / "decisions.jsonl"
    model = NamedChatModel(responses=[CALL], model_name=served).bind_tools([get_weather])
    with warnings.catch_warnings(), caplog.at_level(logging.INFO):
        warnings.simplefilter("error")  # no UncalibratedWarning, no mismatch warning
        runnable = TaskCalibratedRunnable(
            model, tool_decision(), n_samples=16, temperature=1.0, decision_log=log
        )
        decision = runnable.invoke("What's the weather in Paris?")
    assert decision.calibrator_id == _shipped_id()
    [record] = list(open_decision_log(log).read())
    assert record["artefact_id"] == _shipped_id()
    note = record["artefact_note"]
    assert REGISTRY in note and "quantised" in note and served in note
    assert any("quantised" in r.getMessage() for r in caplog.records)


def test_the_registry_name_logs_no_note(tmp_path: Path) -> None:
    log = tmp_path / "decisions.jsonl"
    model = NamedChatModel(responses=[CALL], model_name=REGISTRY).bind_tools([get_weather])
    runnable = TaskCalibratedRunnable(
        model, tool_decision(), n_samples=16, temperature=1.0, decision_log=log
    )
    assert runnable.invoke("What's the weather in Paris?").calibrator_id == _shipped_id()
    [record] = list(open_decision_log(log).read())
    assert "artefact_note" not in record


def test_the_middleware_finds_it_per_request(tmp_path: Path) -> None:
    log = tmp_path / "decisions.jsonl"
    mw = TaskCalibrationMiddleware(
        task=tool_decision(), options=SamplingOptions(n_samples=16, temperature=1.0),
        sampling="model", decision_log=log,
    )  # fmt: skip
    messages: list[Any] = [HumanMessage("What's the weather in Paris?")]
    model = NamedChatModel(responses=[CALL], model_name=UPSTREAM)
    request = ModelRequest(
        model=model,
        messages=messages,
        tools=[get_weather],
        state={"messages": messages},
        runtime=Runtime(),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mw.wrap_model_call(request, lambda _: None)  # type: ignore[arg-type, return-value]
    [record] = list(open_decision_log(log).read())
    assert record["artefact_id"] == _shipped_id() and REGISTRY in record["artefact_note"]


def test_an_explicit_shipped_artefact_logs_the_note_too(tmp_path: Path) -> None:
    [ship] = [a for a in shipped_artefacts() if a.metadata["record"]["model"] == REGISTRY]
    path = ship.save(tmp_path / "shipped.json")
    log = tmp_path / "decisions.jsonl"
    model = NamedChatModel(responses=[CALL], model_name=UPSTREAM).bind_tools([get_weather])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the upstream name matches: no mismatch warning
        runnable = TaskCalibratedRunnable(
            model, tool_decision(), path, n_samples=16, temperature=1.0, decision_log=log
        )
        runnable.invoke("What's the weather in Paris?")
    [record] = list(open_decision_log(log).read())
    assert REGISTRY in record["artefact_note"] and UPSTREAM in record["artefact_note"]
