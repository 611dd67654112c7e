"""The confirm action in an agent run: a HITL interrupt with a checkpointer, a yes without one."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from taskcal_agents.decision import SamplingOptions, tool_decision
from taskcal_agents.langchain import TaskCalibrationMiddleware
from taskcal_agents.langchain._review import REJECTED_TEXT
from taskcal_agents.parsing import CONFIRM_METADATA_KEY
from taskcal_agents.production import open_decision_log
from tests.unit_tests.taskcal_agents.helpers.middleware_fakes import scripted

MODES = ["sync", "async"]
DELETED: list[str] = []
REQUEST = "Delete the file /tmp/report.txt please."
FINAL = "Done: the file is deleted."


@tool
def _delete_file(path: str) -> str:
    """Delete a file."""
    DELETED.append(path)
    return f"deleted {path}"


delete_file = _delete_file.model_copy(
    update={"name": "delete_file", "tags": ["effect:irreversible"]}
)


def call(path: str = "/tmp/report.txt") -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": "delete_file", "args": {"path": path},
                                              "id": "c1"}])  # fmt: skip


def agent(model: Any, log: Path | None = None, *, checkpointer: bool = True) -> Any:
    middleware = TaskCalibrationMiddleware(
        task=tool_decision(), calibrator=None, options=SamplingOptions(n_samples=4),
        decision_log=log,
    )  # fmt: skip
    return create_agent(
        model, tools=[delete_file], middleware=[middleware],
        checkpointer=InMemorySaver() if checkpointer else None,
    )  # fmt: skip


def run(graph: Any, inputs: Any, mode: str, config: Any = None) -> dict[str, Any]:
    if mode == "sync":
        return graph.invoke(inputs, config)  # type: ignore[no-any-return]
    return asyncio.run(graph.ainvoke(inputs, config))  # type: ignore[no-any-return]


def start(mode: str, log: Path | None = None) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    DELETED.clear()
    graph = agent(scripted(*[call()] * 4, FINAL), log)
    config = {"configurable": {"thread_id": f"t-{mode}"}}
    paused = run(graph, {"messages": [HumanMessage(REQUEST)]}, mode, config)
    return graph, config, paused


@pytest.mark.parametrize("mode", MODES)
def test_an_irreversible_call_short_of_its_bar_interrupts_with_the_exact_call(mode: str) -> None:
    _, _, paused = start(mode)
    [pause] = paused["__interrupt__"]
    assert pause.value["action_requests"] == [
        {"name": "delete_file", "args": {"path": "/tmp/report.txt"},
         "description": pause.value["action_requests"][0]["description"]},
    ]  # fmt: skip
    assert pause.value["action_requests"][0]["description"].startswith(
        "I can call delete_file(path='/tmp/report.txt')"
    )
    assert pause.value["review_configs"] == [
        {"action_name": "delete_file", "allowed_decisions": ["approve", "edit", "reject"]}
    ]
    assert paused["taskcal_decisions"][-1]["action"] == "confirm"
    assert paused["taskcal_decisions"][-1]["effect"] == "irreversible"
    assert paused["taskcal_decisions"][-1]["effect_source"] == "tags"
    assert DELETED == []


@pytest.mark.parametrize("mode", MODES)
def test_approve_runs_exactly_that_call_and_labels_the_decision(mode: str, tmp_path: Path) -> None:
    log = tmp_path / "decisions.jsonl"
    graph, config, _ = start(mode, log)
    result = run(graph, Command(resume={"decisions": [{"type": "approve"}]}), mode, config)
    assert DELETED == ["/tmp/report.txt"]
    assert isinstance(result["messages"][-2], ToolMessage)
    assert result["messages"][-1].content == FINAL
    [record] = list(open_decision_log(log).read())
    assert record["outcome"] == "tool_call"


@pytest.mark.parametrize("mode", MODES)
def test_edit_runs_the_edited_call_once_it_checks(mode: str) -> None:
    graph, config, _ = start(mode)
    edit = {
        "type": "edit",
        "edited_action": {"name": "delete_file", "args": {"path": "/tmp/old.txt"}},
    }
    run(graph, Command(resume={"decisions": [edit]}), mode, config)
    assert DELETED == ["/tmp/old.txt"]


@pytest.mark.parametrize("mode", MODES)
def test_an_edit_to_a_tool_not_offered_is_not_run(mode: str) -> None:
    graph, config, _ = start(mode)
    edit = {"type": "edit", "edited_action": {"name": "wipe_disk", "args": {}}}
    result = run(graph, Command(resume={"decisions": [edit]}), mode, config)
    assert DELETED == []
    assert "not one of the offered tools" in result["messages"][-1].content


@pytest.mark.parametrize("mode", MODES)
def test_reject_asks_what_the_user_wants_instead(mode: str, tmp_path: Path) -> None:
    log = tmp_path / "decisions.jsonl"
    graph, config, _ = start(mode, log)
    no = {"type": "reject", "message": "No, I can't lose that file."}
    result = run(graph, Command(resume={"decisions": [no]}), mode, config)
    assert DELETED == []
    assert result["messages"][-1].content.startswith(REJECTED_TEXT)
    [record] = list(open_decision_log(log).read())
    assert record["outcome"] == "cannot_answer"  # the reply says the request should not be met


@pytest.mark.parametrize("mode", MODES)
def test_without_a_checkpointer_a_yes_on_the_next_turn_sends_exactly_that_call(
    mode: str, tmp_path: Path
) -> None:
    DELETED.clear()
    log = tmp_path / "decisions.jsonl"
    model = scripted(*[call()] * 4, FINAL)
    graph = agent(model, log, checkpointer=False)
    first = run(graph, {"messages": [HumanMessage(REQUEST)]}, mode)
    question = first["messages"][-1]
    assert question.content.startswith("I can call delete_file(path='/tmp/report.txt')")
    assert CONFIRM_METADATA_KEY in question.response_metadata and DELETED == []
    calls_before = len(model.calls)
    second = run(graph, {"messages": [*first["messages"], HumanMessage("yes")]}, mode)
    assert DELETED == ["/tmp/report.txt"]
    assert second["taskcal_decisions"][-1]["approved"] is True
    assert second["taskcal_decisions"][-1]["n_samples"] == 0
    assert len(model.calls) == calls_before + 1  # only the reply after the tool result
    records = list(open_decision_log(log).read())
    assert [r["outcome"] for r in records] == ["tool_call", None]


@pytest.mark.parametrize("mode", MODES)
def test_after_a_rejection_an_ok_approves_nothing(mode: str, tmp_path: Path) -> None:
    log = tmp_path / "decisions.jsonl"
    DELETED.clear()
    model = scripted(*[call()] * 4, *["Which file do you mean?"] * 8)
    graph = agent(model, log)
    config = {"configurable": {"thread_id": f"reject-ok-{mode}"}}
    run(graph, {"messages": [HumanMessage(REQUEST)]}, mode, config)
    no = {"type": "reject", "message": "No, I can't lose that file."}
    rejected = run(graph, Command(resume={"decisions": [no]}), mode, config)
    assert CONFIRM_METADATA_KEY not in rejected["messages"][-1].response_metadata
    run(graph, {"messages": [HumanMessage("ok")]}, mode, config)
    assert DELETED == []  # the rejected call is not sent by a later "ok"
    outcomes = [r["outcome"] for r in open_decision_log(log).read()]
    assert outcomes[0] == "cannot_answer" and "tool_call" not in outcomes
