"""TaskCalibrationMiddleware with fake chat models: hooks called directly and via create_agent."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain.agents import create_agent
from langchain.agents.middleware.types import (
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphInterrupt
from pydantic import BaseModel, ValidationError

from calibrators import TemperatureScaling
from taskcal_agents._files import write_json
from taskcal_agents.decision._artefact import CalibratorArtefact
from taskcal_agents.decision._decider import Decision
from taskcal_agents.decision._options import SamplingOptions
from taskcal_agents.decision._presets import tool_decision
from taskcal_agents.errors import (
    ConfigurationError,
    DataFileError,
    LabelMismatchError,
    SamplingError,
)
from taskcal_agents.langchain._chat_model import DECISION_METADATA_KEY
from taskcal_agents.langchain._middleware import TaskCalibrationMiddleware, decision_from_message
from taskcal_agents.workflow._fit import make_artefact
from tests.unit_tests.taskcal_agents.helpers.middleware_fakes import (
    CALL,
    FINAL,
    QUESTION,
    REFUSAL,
    CountingHandler,
    ScriptedChatModel,
    get_weather,
    make_request,
    middleware,
    run_hook,
    scripted,
    unwrap,
)

MODES = ["sync", "async"]

# ----------------------------------------------------------------- branches, hooks


@pytest.mark.parametrize("mode", MODES)
def test_call_branch_returns_the_tool_call(mode: str) -> None:
    handler = CountingHandler([CALL] * 4)
    message, record = unwrap(run_hook(middleware(), handler, make_request(), mode))
    assert len(handler.requests) == 4
    assert record["action"] == "tool_call"
    assert record["n_samples"] == 4
    assert record["fallback"] is False
    assert message.tool_calls[0]["name"] == "get_weather"
    assert message.tool_calls[0]["args"] == {"city": "Paris"}


@pytest.mark.parametrize("mode", MODES)
def test_ask_branch_returns_the_question(mode: str) -> None:
    handler = CountingHandler([QUESTION, QUESTION, QUESTION, CALL])
    request = make_request([HumanMessage("What's the weather?")])
    message, record = unwrap(run_hook(middleware(), handler, request, mode))
    assert record["action"] == "request_for_info"
    assert message.content == QUESTION
    assert message.tool_calls == []


@pytest.mark.parametrize("mode", MODES)
def test_abstain_branch_returns_the_abstain_text(mode: str) -> None:
    task = tool_decision(abstain_text="I cannot do that here.")
    handler = CountingHandler([REFUSAL] * 4)
    message, record = unwrap(run_hook(middleware(task=task), handler, make_request(), mode))
    assert record["action"] == "cannot_answer"
    assert message.content == "I cannot do that here."
    assert message.tool_calls == []


def malformed_output() -> ValidationError:
    """The error langchain-openai raises for a choice whose tool-call arguments are a list."""
    try:
        AIMessage(content="", tool_calls=[{"name": "get_weather", "args": [1], "id": "c"}])
    except ValidationError as exc:
        return exc
    raise AssertionError("AIMessage accepted list arguments")


class MalformedHandler(CountingHandler):
    """Raises on the listed calls (0-based) instead of answering; "empty" returns no AI message."""

    def __init__(self, messages: Sequence[AIMessage | str], fail: dict[int, Any]) -> None:
        super().__init__(messages)
        self.fail, self.calls = fail, 0

    def _next(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        with self._lock:
            k, self.calls = self.calls, self.calls + 1
        what = self.fail.get(k)
        if what == "empty":
            return ModelResponse(result=[])
        if what is not None:
            raise what
        return super()._next(request)


@pytest.mark.parametrize("mode", MODES)
def test_handler_samples_that_fail_on_a_malformed_output_are_counted_unparsed(mode: str) -> None:
    # One handler call raises langchain-openai's error for a malformed choice, one returns
    # no AI message: each is one unparsed sample of the four, not a failed draw.
    handler = MalformedHandler([CALL] * 2, fail={0: malformed_output(), 2: "empty"})
    message, record = unwrap(run_hook(middleware(), handler, make_request(), mode))
    assert handler.calls == 4
    assert (record["n_samples"], record["n_unparsed"]) == (4, 2)
    assert record["fallback"] is False and message.response_metadata[DECISION_METADATA_KEY]
    # A validation error of another model (say, a bug in an inner middleware) is raised.

    class Other(BaseModel):
        x: int

    try:
        Other(x="nope")  # type: ignore[arg-type]
    except ValidationError as exc:
        other = exc
    handler = MalformedHandler([CALL] * 4, fail={1: other})
    with pytest.raises(SamplingError, match="ValidationError: 1 validation error for Other"):
        run_hook(middleware(), handler, make_request(), mode)


@pytest.mark.parametrize("mode", MODES)
def test_all_unparsed_falls_back_with_reason(mode: str) -> None:
    handler = CountingHandler(["Paris is nice."] * 4)
    message, record = unwrap(run_hook(middleware(), handler, make_request(), mode))
    assert record["fallback"] is True
    assert record["action"] == "request_for_info"
    assert record["n_unparsed"] == 4
    assert record["fallback_reason"] == "all 4 samples were unparsed by parser 'tool_decision'"
    assert message.content == tool_decision().ask_text


class Boom:
    def __call__(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        raise RuntimeError("server down")

    async def acall(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        raise RuntimeError("server down")


@pytest.mark.parametrize("mode", MODES)
def test_model_error_falls_back_when_asked(mode: str) -> None:
    mw = middleware(on_error="fallback")
    message, record = unwrap(run_hook(mw, Boom(), make_request(), mode))  # type: ignore[arg-type]
    assert record["fallback"] is True
    assert record["fallback_reason"] == "model error after 1 attempt(s): RuntimeError: server down"
    assert record["n_samples"] == 0
    assert message.content == mw.task.ask_text


@pytest.mark.parametrize("mode", MODES)
def test_model_error_raises_by_default(mode: str) -> None:
    with pytest.raises(
        SamplingError,
        match=r"^TaskCalibrationMiddleware could not sample 4 completions after 1 attempt\(s\): "
        r"RuntimeError: server down; raise max_retries",
    ) as raised:
        run_hook(middleware(), Boom(), make_request(), mode)  # type: ignore[arg-type]
    assert isinstance(raised.value.__cause__, RuntimeError)


class Interrupting:
    def __call__(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        raise GraphInterrupt(())

    async def acall(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        raise GraphInterrupt(())


@pytest.mark.parametrize("mode", MODES)
def test_graph_bubble_up_is_never_swallowed(mode: str) -> None:
    with pytest.raises(GraphInterrupt):
        run_hook(middleware(on_error="fallback"), Interrupting(), make_request(), mode)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", MODES)
def test_after_a_tool_result_the_call_passes_through(mode: str) -> None:
    messages: list[BaseMessage] = [
        HumanMessage("Weather in Paris?"),
        CALL,
        ToolMessage("Sunny.", tool_call_id="call_1"),
    ]
    handler = CountingHandler([FINAL])
    result = run_hook(middleware(), handler, make_request(messages), mode)
    assert isinstance(result, ModelResponse)
    assert result.result[0].content == FINAL
    assert len(handler.requests) == 1


@pytest.mark.parametrize("mode", MODES)
def test_every_call_decides_after_tool_results_too(mode: str) -> None:
    messages: list[BaseMessage] = [
        HumanMessage("Weather in Paris?"),
        CALL,
        ToolMessage("Sunny.", tool_call_id="call_1"),
    ]
    handler = CountingHandler([REFUSAL] * 4)
    _, record = unwrap(
        run_hook(middleware(decide_on="every_call"), handler, make_request(messages), mode)
    )
    assert record["action"] == "cannot_answer"
    assert len(handler.requests) == 4


@pytest.mark.parametrize("mode", MODES)
def test_temperature_goes_through_request_override(mode: str) -> None:
    handler = CountingHandler([CALL] * 4)
    request = make_request(model_settings={"max_tokens": 64})
    run_hook(middleware(temperature=0.7), handler, request, mode)
    assert all(r.model_settings == {"max_tokens": 64, "temperature": 0.7} for r in handler.requests)
    assert request.model_settings == {"max_tokens": 64}  # the caller's request is untouched


@pytest.mark.parametrize("mode", MODES)
def test_task_prompt_is_appended_to_the_system_message(mode: str) -> None:
    task = tool_decision(prompt="Ask when the city is missing.")
    handler = CountingHandler([CALL] * 4)
    run_hook(middleware(task=task), handler, make_request(system_prompt="You are helpful."), mode)
    assert {r.system_prompt for r in handler.requests} == {
        "You are helpful.\n\nAsk when the city is missing."
    }
    handler = CountingHandler([CALL] * 4)
    run_hook(middleware(task=task, use_task_prompt=False), handler, make_request(), mode)
    assert {r.system_prompt for r in handler.requests} == {None}


def test_the_cost_matrix_changes_the_action() -> None:
    samples = [CALL, CALL, QUESTION, QUESTION]
    cautious = tool_decision(cost=[[0, 1, 2], [10, 0, 1], [10, 2, 0]])
    eager = tool_decision(cost=[[0, 10, 10], [1, 0, 1], [1, 2, 0]])
    _, a = unwrap(
        middleware(task=cautious).wrap_model_call(make_request(), CountingHandler(samples))
    )
    _, b = unwrap(middleware(task=eager).wrap_model_call(make_request(), CountingHandler(samples)))
    assert (a["action"], b["action"]) == ("request_for_info", "tool_call")


class FlipCalibrator:
    """Calibrator stub: moves all mass from tool_call to request_for_info."""

    n_classes_ = 3
    classes_ = np.arange(3)

    def predict_proba(self, P: np.ndarray) -> np.ndarray:
        return np.array([[0.05, 0.9, 0.05]] * len(P))


def test_the_calibrator_changes_the_action() -> None:
    handler = CountingHandler([CALL] * 4)
    message, record = unwrap(
        middleware(calibrator=FlipCalibrator()).wrap_model_call(make_request(), handler)
    )
    # q favours asking, but every sample made the same grounded call and none asked: there
    # is nothing to ask about, so the call is put to the user to approve (not sent).
    assert record["action"] == "confirm"
    assert record["calibrated"]["request_for_info"] == pytest.approx(0.9)
    assert record["probs"]["tool_call"] > 0.9
    assert message.tool_calls == []
    assert str(message.content).startswith("I can call get_weather(city='Paris')")


def test_decision_round_trips_through_message_metadata() -> None:
    message, record = unwrap(
        middleware().wrap_model_call(make_request(), CountingHandler([CALL] * 4))
    )
    decision = decision_from_message(message)
    assert isinstance(decision, Decision)
    assert decision.action == "tool_call"
    assert decision.to_metadata() == record
    assert decision_from_message(AIMessage("plain")) is None


# ----------------------------------------------------------- sampling via the model


@pytest.mark.parametrize("mode", MODES)
def test_model_sampling_draws_n_samples_from_the_request_model(mode: str) -> None:
    model = scripted(CALL, CALL, CALL, CALL)
    request = make_request().override(model=model)

    def handler(request: ModelRequest[Any]) -> ModelResponse[Any]:
        raise AssertionError("the handler must not be called in model sampling mode")

    async def ahandler(request: ModelRequest[Any]) -> ModelResponse[Any]:
        raise AssertionError("the handler must not be called in model sampling mode")

    mw = middleware(sampling="auto", temperature=0.5)
    if mode == "sync":
        result = mw.wrap_model_call(request, handler)
    else:
        result = asyncio.run(mw.awrap_model_call(request, ahandler))
    _, record = unwrap(result)
    assert record["action"] == "tool_call"
    assert record["n_samples"] == 4
    assert len(model.calls) == 4
    assert all(call.get("temperature") == 0.5 for call in model.calls)


@pytest.mark.parametrize("mode", MODES)
def test_auto_sampling_uses_the_handler_with_a_response_format(mode: str) -> None:
    class Weather(BaseModel):
        city: str

    handler = CountingHandler([CALL] * 4)
    request = make_request(response_format=Weather)
    _, record = unwrap(run_hook(middleware(sampling="auto"), handler, request, mode))
    assert len(handler.requests) == 4
    assert record["action"] == "tool_call"


class ConcurrencyProbe(CountingHandler):
    """Records the peak number of handler calls in flight; waits for all N to overlap."""

    def __init__(self, messages: Sequence[AIMessage | str], overlap: int) -> None:
        super().__init__(messages)
        self.active = 0
        self.peak = 0
        self.barrier = threading.Barrier(overlap, timeout=10)

    def __call__(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        with self._lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        self.barrier.wait()  # raises BrokenBarrierError unless `overlap` calls overlap
        with self._lock:
            self.active -= 1
        return self._next(request)

    async def acall(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        self.active += 1
        self.peak = max(self.peak, self.active)
        await asyncio.sleep(0.01)
        self.active -= 1
        return self._next(request)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("max_concurrency", "peak"), [(1, 1), (None, 4)])
def test_handler_sampling_is_concurrent_up_to_max_concurrency(
    mode: str, max_concurrency: int | None, peak: int
) -> None:
    handler = ConcurrencyProbe([CALL] * 4, overlap=peak)
    run_hook(middleware(max_concurrency=max_concurrency), handler, make_request(), mode)
    assert handler.peak == peak


# ----------------------------------------------------------------- via create_agent


def agent_for(model: ScriptedChatModel, mw: TaskCalibrationMiddleware[Any, Any], **kw: Any) -> Any:
    return create_agent(model, tools=[get_weather], middleware=[mw], **kw)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sampling", ["handler", "model"])
def test_agent_calls_the_tool_then_answers(mode: str, sampling: str) -> None:
    model = scripted(CALL, CALL, CALL, CALL, FINAL)
    agent = agent_for(model, middleware(sampling=sampling))
    inputs = {"messages": [HumanMessage("Weather in Paris?")]}
    result = agent.invoke(inputs) if mode == "sync" else asyncio.run(agent.ainvoke(inputs))
    kinds = [type(m).__name__ for m in result["messages"]]
    assert kinds == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    assert result["messages"][2].content == "Sunny in Paris."
    assert result["messages"][3].content == FINAL
    [record] = result["taskcal_decisions"]
    assert record["action"] == "tool_call"
    assert result["messages"][1].response_metadata[DECISION_METADATA_KEY] == record


@pytest.mark.parametrize("mode", MODES)
def test_agent_asks_and_ends_the_run(mode: str) -> None:
    model = scripted(QUESTION, QUESTION, QUESTION, CALL)
    agent = agent_for(model, middleware())
    inputs = {"messages": [HumanMessage("What's the weather?")]}
    result = agent.invoke(inputs) if mode == "sync" else asyncio.run(agent.ainvoke(inputs))
    assert [type(m).__name__ for m in result["messages"]] == ["HumanMessage", "AIMessage"]
    assert result["messages"][-1].content == QUESTION
    assert result["taskcal_decisions"][-1]["action"] == "request_for_info"


@pytest.mark.parametrize("mode", MODES)
def test_agent_abstains_and_ends_the_run(mode: str) -> None:
    model = scripted(REFUSAL, REFUSAL, REFUSAL, CALL)
    mw = middleware()
    agent = agent_for(model, mw)
    inputs = {"messages": [HumanMessage("Book me a flight to Mars.")]}
    result = agent.invoke(inputs) if mode == "sync" else asyncio.run(agent.ainvoke(inputs))
    assert [type(m).__name__ for m in result["messages"]] == ["HumanMessage", "AIMessage"]
    assert result["messages"][-1].content == mw.task.abstain_text
    assert result["taskcal_decisions"][-1]["action"] == "cannot_answer"


def test_agent_falls_back_on_model_error() -> None:
    class Broken(ScriptedChatModel):
        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("server down")

    agent = agent_for(Broken(messages=iter([])), middleware(on_error="fallback"))
    result = agent.invoke({"messages": [HumanMessage("Weather?")]})
    [record] = result["taskcal_decisions"]
    assert record["fallback"] is True
    assert record["fallback_reason"] == "model error after 1 attempt(s): RuntimeError: server down"
    assert result["messages"][-1].content == tool_decision().ask_text


def test_decisions_accumulate_across_turns_with_a_checkpointer() -> None:
    model = scripted(QUESTION, QUESTION, QUESTION, QUESTION, CALL, CALL, CALL, CALL, FINAL)
    agent = agent_for(model, middleware(), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    first = agent.invoke({"messages": [HumanMessage("What's the weather?")]}, config)
    assert first["taskcal_decisions"][-1]["action"] == "request_for_info"
    second = agent.invoke({"messages": [HumanMessage("Paris.")]}, config)
    assert [d["action"] for d in second["taskcal_decisions"]] == ["request_for_info", "tool_call"]
    assert second["messages"][-1].content == FINAL


# -------------------------------------------------------------- configuration


def write_artefact(path: Path, labels: list[str], **extra: Any) -> Path:
    """Write a calibrator artefact the way `taskcal fit` does."""
    P = np.array([[0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.1, 0.2, 0.7], [0.6, 0.3, 0.1]])
    cal = TemperatureScaling().fit(P, [0, 1, 2, 1])
    kwargs: dict[str, Any] = {
        "task_name": "tool_decision",
        "labels": labels,
        "actions": labels,
        "alpha": 0.1,
        "calibrator_name": "temperature",
        "calibrator": cal,
        "fit_metrics": {},
        **extra,
    }
    return write_json(make_artefact(**kwargs), path)


def test_task_and_calibrator_from_files(tmp_path: Path) -> None:
    task = tool_decision(cost=[[0, 2, 3], [5, 0, 1], [6, 2, 0]])
    task_path = task.to_file(tmp_path / "task.yaml")
    artefact = write_artefact(tmp_path / "cal.json", list(task.labels), alpha=0.5)
    mw = TaskCalibrationMiddleware(task=task_path, calibrator=str(artefact))
    assert mw.task == task
    decider = mw.session.in_force().decider
    assert type(decider.calibrator).__name__ == "TemperatureScaling"
    assert decider.alpha == 0.5 and mw.options.alpha is None
    explicit = SamplingOptions(alpha=0.2)
    mw = TaskCalibrationMiddleware(task=task, calibrator=artefact, options=explicit)
    assert mw.session.in_force().decider.alpha == mw.options.alpha == 0.2


def test_task_may_come_from_the_artefact(tmp_path: Path) -> None:
    task = tool_decision(name="weather")
    artefact = write_artefact(
        tmp_path / "cal.json",
        list(task.labels),
        task_name="weather",
        task_spec=task.model_dump(mode="json"),
    )
    assert TaskCalibrationMiddleware(calibrator=artefact).task == task
    assert CalibratorArtefact.load(artefact).task_name == "weather"
    assert CalibratorArtefact.load(artefact).alpha == 0.1


def test_artefact_label_mismatch_is_rejected(tmp_path: Path) -> None:
    artefact = write_artefact(tmp_path / "cal.json", ["call", "ask", "abstain"])
    match = (
        rf"^TaskCalibrationMiddleware: calibrator artefact '{artefact}' was fitted on labels "
        r"\['call', 'ask', 'abstain'\] but task 'tool_decision' has labels \['tool_call', "
        r"'request_for_info', 'cannot_answer'\]; fit a calibrator for this task with "
        r"`taskcal fit`\.$"
    )
    with pytest.raises(LabelMismatchError, match=match):
        TaskCalibrationMiddleware(task=tool_decision(), calibrator=artefact)


def test_artefact_with_another_format_version_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    path.write_text(
        json.dumps({"format": "taskcal.calibrator", "format_version": 3}), encoding="utf-8"
    )
    match = (
        r"cal\.json: format_version must be 1 or 2, got 3; refit with this version of taskcal\.$"
    )
    with pytest.raises(DataFileError, match=match):
        TaskCalibrationMiddleware(task=tool_decision(), calibrator=path)


def test_calibrator_with_wrong_class_count_is_rejected() -> None:
    class TwoClasses(FlipCalibrator):
        n_classes_ = 2

    match = (
        r"^calibrator TwoClasses was fitted on 2 classes but task 'tool_decision' has 3 labels "
        r"\['tool_call', 'request_for_info', 'cannot_answer'\]; fit the calibrator on this "
        r"task's beliefs\.$"
    )
    with pytest.raises(ConfigurationError, match=match):
        middleware(calibrator=TwoClasses())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"n_samples": 0},
            r"^TaskCalibrationMiddleware parameter 'n_samples': Input should be greater than or "
            r"equal to 1, got 0\.$",
        ),
        (
            {"n_samples": True},
            r"^TaskCalibrationMiddleware parameter 'n_samples': must be an integer, not a bool, "
            r"float or string, got True\.$",
        ),
        (
            {"temperature": -1.0},
            r"^TaskCalibrationMiddleware parameter 'temperature': Input should be greater than "
            r"or equal to 0, got -1\.0\.$",
        ),
        (
            {"temperature": float("nan")},
            r"^TaskCalibrationMiddleware parameter 'temperature': Input should be a finite "
            r"number, got nan\.$",
        ),
        (
            {"max_retries": -1},
            r"^TaskCalibrationMiddleware parameter 'max_retries': Input should be greater than "
            r"or equal to 0, got -1\.$",
        ),
        (
            {"retry_wait": -0.5},
            r"^TaskCalibrationMiddleware parameter 'retry_wait': Input should be greater than "
            r"or equal to 0, got -0\.5\.$",
        ),
        (
            {"sampling": "n"},
            r"^TaskCalibrationMiddleware parameter 'sampling' must be one of \('auto', 'model', "
            r"'handler'\), got 'n'\.$",
        ),
        (
            {"decide_on": "always"},
            r"^TaskCalibrationMiddleware parameter 'decide_on' must be one of \('user_turn', "
            r"'every_call'\), got 'always'\.$",
        ),
        (
            {"on_error": "ignore"},
            r"^TaskCalibrationMiddleware parameter 'on_error': Input should be 'raise' or "
            r"'fallback', got 'ignore'\.$",
        ),
        (
            {"max_concurrency": 0},
            r"^TaskCalibrationMiddleware parameter 'max_concurrency' must be an int >= 1 or "
            r"None, got 0\.$",
        ),
        (
            {"task": {"name": "x"}},
            r"^TaskCalibrationMiddleware parameter 'task' must be a Task or the path of a task "
            r"file, got \{'name': 'x'\}\.$",
        ),
        (
            {"task": None},
            r"^TaskCalibrationMiddleware parameter 'task' is required unless 'calibrator' is an "
            r"artefact file that holds the full task; got task=None; pass a Task or the path "
            r"of a task file\.$",
        ),
    ],
)
def test_invalid_parameters_fail_at_construction(kwargs: dict[str, Any], match: str) -> None:
    # The sampling options given as the 0.1 keyword arguments are still checked.
    with warnings.catch_warnings(), pytest.raises(ConfigurationError, match=match):
        warnings.simplefilter("ignore", DeprecationWarning)
        TaskCalibrationMiddleware(**{"task": tool_decision(), **kwargs})


def test_the_old_keyword_arguments_warn_and_mean_what_they_meant() -> None:
    with pytest.warns(DeprecationWarning, match=r"\(n_samples=\.\.\.\) is deprecated.*options="):
        old = TaskCalibrationMiddleware(
            task=tool_decision(), n_samples=6, temperature=0.5, on_error="fallback",
            tool_result_task=None,
        )  # fmt: skip
    new = TaskCalibrationMiddleware(
        task=tool_decision(),
        options=SamplingOptions(n_samples=6, temperature=0.5, on_error="fallback"),
        tool_result=None,
    )
    assert old.options == new.options
    assert old.session.tool_result_task is new.session.tool_result_task is None
    with pytest.raises(
        TypeError,
        match=re.escape(
            "TaskCalibrationMiddleware got unknown argument 'n_sample' (did you mean "
            "options=SamplingOptions(n_samples=...)?); pass only the arguments it documents "
            "(the wrapped model's own "
            "settings, such as max_tokens, timeout or stop, are set on that model: "
            "ChatOpenAI(max_tokens=...))."
        ),
    ):
        TaskCalibrationMiddleware(task=tool_decision(), n_sample=6)  # type: ignore[call-arg]
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(ConfigurationError, match=r"takes \['n_samples'\] in 'options'"),
    ):
        TaskCalibrationMiddleware(task=tool_decision(), options=SamplingOptions(), n_samples=6)


def test_at_most_nine_constructor_arguments() -> None:
    """LangChain's middlewares take a few typed arguments; so does this one."""
    parameters = inspect.signature(TaskCalibrationMiddleware.__init__).parameters
    named = [p for p in parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    assert len(named) <= 9, [p.name for p in named]


def test_a_reply_of_its_own_carries_no_samples_structured_response() -> None:
    mw = TaskCalibrationMiddleware(task=tool_decision(grounding=None), calibrator=None)
    pending, _ = mw._begin(make_request())
    decision = pending.in_force.decider.fallback("no usable sample")  # the task's, no sample's
    sample = ModelResponse(
        result=[AIMessage("x", id="run-1")], structured_response={"from": "run-1"}
    )
    out = mw._finish(make_request(), pending, decision, [sample])
    assert out.model_response.result[0].id is None
    assert out.model_response.structured_response is None
