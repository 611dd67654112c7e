from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import httpx
import numpy as np
import pytest
from langchain_core.language_models.fake_chat_models import (
    FakeListChatModel,
    GenericFakeChatModel,
)
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableLambda, RunnableSerializable
from langchain_core.runnables.retry import RunnableRetry
from langchain_core.tracers.context import collect_runs

from taskcal_agents.decision import _presets as tasks
from taskcal_agents.decision._decider import Decision, decide_from_messages
from taskcal_agents.decision._protocol import RetryPolicy
from taskcal_agents.errors import (
    ConfigurationError,
    LabelMismatchError,
    SamplingError,
    UnknownArgumentError,
)
from taskcal_agents.langchain._chat_model import TaskCalibratedChatModel
from taskcal_agents.langchain._runnable import TaskCalibratedRunnable
from taskcal_agents.sampling import chat_model_of, split_retry
from taskcal_agents.sampling._chat_models import supports_n
from tests.unit_tests.taskcal_agents.helpers.calibration import FakeCalibrator
from tests.unit_tests.taskcal_agents.helpers.chat_fakes import (
    WEATHER_SCHEMA,
    FakeOpenAIServer,
    RecordingChatModel,
    get_weather,
    tool_call_message,
)

QUESTION = "Which city do you mean?"
REFUSAL = "I'm sorry, but I can't help with that."


def generic(messages: list[AIMessage | str]) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter(messages))


def invoke(runnable: TaskCalibratedRunnable, input_: Any, mode: str, **kwargs: Any) -> Decision:
    if mode == "sync":
        return runnable.invoke(input_, **kwargs)
    return asyncio.run(runnable.ainvoke(input_, **kwargs))


MODES = ["sync", "async"]


def test_is_runnable_serializable() -> None:
    runnable = TaskCalibratedRunnable(generic([]), tasks.tool_decision())
    assert isinstance(runnable, RunnableSerializable)
    assert runnable.OutputType is Decision
    assert runnable.n_samples == 16
    assert runnable.temperature == 1.0
    assert runnable.on_error == "raise"
    assert decide_from_messages is not None


def test_an_unknown_parameter_is_refused_by_name() -> None:
    # A misspelt option must not silently leave the default in force.
    with pytest.raises(
        UnknownArgumentError,
        match=re.escape(
            "TaskCalibratedRunnable got unknown argument 'n_smaples' (did you mean "
            "'n_samples'?); pass only the arguments it documents (the wrapped model's own "
            "settings, such as max_tokens, timeout or stop, are set on that model: "
            "ChatOpenAI(max_tokens=...))."
        ),
    ):
        TaskCalibratedRunnable(generic([]), tasks.tool_decision(), n_smaples=3)


@pytest.mark.parametrize("mode", MODES)
def test_tool_call_decision(mode: str) -> None:
    # The default task grounds calls in the bound tools and the input: the tool is bound
    # (as bind_tools would) and the user names the city.
    model = generic([tool_call_message(city="Paris")] * 7 + [QUESTION])
    model = model.bind(tools=[WEATHER_SCHEMA])
    task = tasks.tool_decision(tool_effects={"get_weather": "read"})  # a lookup: a read
    runnable = TaskCalibratedRunnable(model, task, n_samples=8)
    decision = invoke(runnable, "What's the weather in Paris?", mode)
    assert decision.action == "tool_call"
    assert (decision.effect, decision.effect_source) == ("read", "task")
    assert decision.n_samples == 8
    assert decision.message is not None
    assert decision.message.tool_calls[0]["args"] == {"city": "Paris"}


@pytest.mark.parametrize("mode", MODES)
def test_ask_decision_with_fake_list_model(mode: str) -> None:
    model = FakeListChatModel(responses=[QUESTION, QUESTION, REFUSAL, "Sunny."])
    runnable = TaskCalibratedRunnable(
        model, tasks.tool_decision(), n_samples=4, return_samples=True
    )
    decision = invoke(runnable, "weather?", mode)
    assert decision.action == "request_for_info"
    assert decision.message is not None
    assert decision.message.content == QUESTION
    assert decision.n_unparsed == 1
    assert decision.sample_labels is not None
    assert sorted(map(str, decision.sample_labels)) == [
        "None",
        "cannot_answer",
        "request_for_info",
        "request_for_info",
    ]


@pytest.mark.parametrize("mode", MODES)
def test_abstain_decision(mode: str) -> None:
    runnable = TaskCalibratedRunnable(
        generic([REFUSAL] * 4), tasks.tool_decision(abstain_text="No."), n_samples=4
    )
    decision = invoke(runnable, "hack it", mode)
    assert (decision.action, decision.fallback) == ("cannot_answer", False)
    assert decision.message is not None
    assert decision.message.content == "No."


@pytest.mark.parametrize("mode", MODES)
def test_calibrator_changes_the_decision(mode: str) -> None:
    model = generic([QUESTION] * 4)
    cal = FakeCalibrator(3, fixed=[0.98, 0.01, 0.01])
    runnable = TaskCalibratedRunnable(model, tasks.tool_decision(), cal, n_samples=4, alpha=0.5)
    decision = invoke(runnable, "x", mode)
    np.testing.assert_allclose(cal.calls[0], [[0.5 / 5.5, 4.5 / 5.5, 0.5 / 5.5]])
    # MBR on q picks tool_call, but no tool call was sampled: the next-cheapest action is taken
    assert min(decision.expected_cost, key=decision.expected_cost.get) == "tool_call"
    assert decision.action != "tool_call" and decision.fallback
    assert decision.message is not None and not decision.message.tool_calls


@pytest.mark.parametrize("mode", MODES)
def test_all_unparsed_falls_back(mode: str) -> None:
    runnable = TaskCalibratedRunnable(generic(["Sunny."] * 3), tasks.tool_decision(), n_samples=3)
    decision = invoke(runnable, "x", mode)
    assert decision.fallback is True
    assert decision.fallback_reason == "all 3 samples were unparsed by parser 'tool_decision'"
    assert decision.action == "request_for_info"


@pytest.mark.parametrize("mode", MODES)
def test_temperature_and_seed_per_call(mode: str) -> None:
    model = RecordingChatModel(responses=[QUESTION])
    runnable = TaskCalibratedRunnable(
        model, tasks.tool_decision(), n_samples=3, temperature=0.4, seed=7
    )
    invoke(runnable, "x", mode)
    assert sorted((c["temperature"], c["seed"]) for c in model.calls) == [
        (0.4, 7),
        (0.4, 8),
        (0.4, 9),
    ]
    assert "temperature" not in model.model_fields_set


@pytest.mark.parametrize("mode", MODES)
def test_bound_tools_are_kept(mode: str) -> None:
    model = RecordingChatModel(responses=[tool_call_message()])
    runnable = TaskCalibratedRunnable(model.bind_tools([get_weather]), tasks.tool_decision(),
                                      n_samples=2, temperature=None)  # fmt: skip
    invoke(runnable, "x", mode)
    assert model.calls == [{"tools": [WEATHER_SCHEMA]}] * 2


@pytest.mark.parametrize("mode", MODES)
def test_chat_openai_one_request_with_n(mode: str) -> None:
    server = FakeOpenAIServer()
    model = server.chat_openai().bind_tools([get_weather])
    runnable = TaskCalibratedRunnable(model, tasks.tool_decision(), n_samples=6, temperature=0.8)
    # The server's calls are get_weather(city="Paris"): grounded when the user names it.
    decision = invoke(runnable, "What's the weather in Paris?", mode)
    assert len(server.requests) == 1
    assert server.requests[0]["n"] == 6
    assert server.requests[0]["temperature"] == 0.8
    assert server.requests[0]["tools"][0]["function"]["name"] == "get_weather"
    assert decision.counts == {"tool_call": 3.0, "request_for_info": 3.0, "cannot_answer": 0.0}
    assert decision.action == "request_for_info"


@pytest.mark.parametrize("mode", MODES)
def test_task_prompt_is_prepended(mode: str) -> None:
    model = RecordingChatModel(responses=[QUESTION])
    task = tasks.tool_decision(prompt="Decide carefully.")
    runnable = TaskCalibratedRunnable(model, task, n_samples=1)
    invoke(runnable, "hi", mode)
    assert model.inputs[0] == [
        SystemMessage(content="Decide carefully."),
        HumanMessage(content="hi"),
    ]
    model.inputs.clear()
    invoke(runnable, [SystemMessage(content="You are X."), HumanMessage(content="hi")], mode)
    assert model.inputs[0][0] == SystemMessage(content="You are X.\n\nDecide carefully.")
    assert len(model.inputs[0]) == 2


def test_task_prompt_can_be_disabled() -> None:
    model = RecordingChatModel(responses=[QUESTION])
    runnable = TaskCalibratedRunnable(
        model, tasks.tool_decision(prompt="p"), n_samples=1, use_task_prompt=False
    )
    runnable.invoke("hi")
    assert model.inputs[0] == [HumanMessage(content="hi")]


# --------------------------------------------------------------------- tracing


@pytest.mark.parametrize("mode", MODES)
def test_samples_are_child_runs(mode: str) -> None:
    runnable = TaskCalibratedRunnable(generic([QUESTION] * 4), tasks.tool_decision(), n_samples=4)
    with collect_runs() as cb:
        invoke(runnable, "x", mode, config={"tags": ["outer"], "run_name": "decide"})
    (root,) = cb.traced_runs
    assert root.name == "decide"
    assert root.run_type == "chain"
    assert "outer" in (root.tags or [])
    assert [c.run_type for c in root.child_runs] == ["llm"] * 4
    assert all("outer" in (c.tags or []) for c in root.child_runs)
    assert root.outputs is not None


# ---------------------------------------------------------------------- batch


@pytest.mark.parametrize("mode", MODES)
def test_batch_honours_max_concurrency(mode: str) -> None:
    model = RecordingChatModel(responses=[QUESTION], delay=0.01)
    runnable = TaskCalibratedRunnable(model, tasks.tool_decision(), n_samples=3)
    inputs = ["a", "b", "c"]
    config = {"max_concurrency": 2}
    if mode == "sync":
        decisions = runnable.batch(inputs, config)
    else:
        decisions = asyncio.run(runnable.abatch(inputs, config))
    assert [d.action for d in decisions] == ["request_for_info"] * 3
    assert len(model.calls) == 9
    assert model.peak == 2


@pytest.mark.parametrize("mode", MODES)
def test_batch_child_runs_per_input(mode: str) -> None:
    runnable = TaskCalibratedRunnable(generic([QUESTION] * 6), tasks.tool_decision(), n_samples=3)
    with collect_runs() as cb:
        if mode == "sync":
            runnable.batch(["a", "b"])
        else:
            asyncio.run(runnable.abatch(["a", "b"]))
    assert len(cb.traced_runs) == 2
    assert [len(r.child_runs) for r in cb.traced_runs] == [3, 3]


def test_stream_yields_the_decision() -> None:
    runnable = TaskCalibratedRunnable(generic([QUESTION] * 2), tasks.tool_decision(), n_samples=2)
    chunks = list(runnable.stream("x"))
    assert len(chunks) == 1
    assert chunks[0].action == "request_for_info"


# ---------------------------------------------------------------------- errors


class Flaky:
    """Responses that fail the first ``failures`` calls."""

    def __init__(self, failures: int) -> None:
        self.failures = failures

    def model(self) -> RecordingChatModel:
        errors: list[Any] = [ConnectionError("server down")] * self.failures
        return RecordingChatModel(responses=[*errors, *[QUESTION] * 20])


@pytest.mark.parametrize("mode", MODES)
def test_retries_then_succeeds(mode: str) -> None:
    model = Flaky(2).model()
    runnable = TaskCalibratedRunnable(model, tasks.tool_decision(), n_samples=2, max_retries=2)
    with collect_runs() as cb:
        decision = invoke(runnable, "x", mode)
    assert decision.action == "request_for_info"
    assert decision.fallback is False
    tags = [tag for c in cb.traced_runs[0].child_runs for tag in (c.tags or [])]
    assert "retry:attempt:2" in tags


@pytest.mark.parametrize("mode", MODES)
def test_error_raises_after_retries(mode: str) -> None:
    runnable = TaskCalibratedRunnable(Flaky(10).model(), tasks.tool_decision(), n_samples=1,
                                      max_retries=1)  # fmt: skip
    with pytest.raises(
        SamplingError,
        match=re.escape(
            "TaskCalibratedRunnable could not sample 1 completions from RecordingChatModel after "
            "2 attempt(s): ConnectionError: server down; raise max_retries or pass "
            "on_error='fallback' to take the task's fallback action instead."
        ),
    ) as info:
        invoke(runnable, "x", mode)
    assert isinstance(info.value.__cause__, ConnectionError)


@pytest.mark.parametrize("mode", MODES)
def test_error_fallback(mode: str) -> None:
    runnable = TaskCalibratedRunnable(
        Flaky(10).model(), tasks.tool_decision(), n_samples=2, on_error="fallback"
    )
    decision = invoke(runnable, "x", mode)
    assert decision.fallback is True
    assert (
        decision.fallback_reason == "model error after 1 attempt(s): ConnectionError: server down"
    )
    assert decision.action == "request_for_info"
    assert decision.n_samples == 0


def test_batch_errors_are_per_input() -> None:
    model = RecordingChatModel(responses=[QUESTION, ConnectionError("down"), QUESTION, QUESTION])
    runnable = TaskCalibratedRunnable(model, tasks.tool_decision(), n_samples=2)
    out = runnable.batch(["a", "b"], {"max_concurrency": 1}, return_exceptions=True)
    assert isinstance(out[0], SamplingError)
    assert isinstance(out[1], Decision)
    with pytest.raises(SamplingError, match=re.escape("after 1 attempt(s): ConnectionError: down")):
        model.i = 0
        runnable.batch(["a", "b"], {"max_concurrency": 1})


# ---------------------------------------------------------------- construction


def test_calibrator_label_mismatch_at_construction() -> None:
    task = tasks.tool_decision()
    with pytest.raises(
        LabelMismatchError,
        match=re.escape("calibrator FakeCalibrator has labels ['a', 'b', 'c'] but task"),
    ):
        TaskCalibratedRunnable(generic([]), task, FakeCalibrator(3, labels_=["a", "b", "c"]))
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "calibrator FakeCalibrator was fitted on 2 classes but task 'tool_decision' has 3 "
            "labels"
        ),
    ):
        TaskCalibratedRunnable(generic([]), task, FakeCalibrator(2))


def test_non_chat_runnable_needs_temperature_none() -> None:
    chain = RunnableLambda(lambda x: QUESTION)
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "TaskCalibratedRunnable parameter 'model' is a RunnableLambda, not a chat model, so "
            "temperature/seed cannot be passed to it; pass temperature=None and seed=None to "
            "sample it with its own settings."
        ),
    ):
        TaskCalibratedRunnable(chain, tasks.tool_decision())
    runnable = TaskCalibratedRunnable(chain, tasks.tool_decision(), temperature=None, n_samples=2)
    assert runnable.invoke("x").action == "request_for_info"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_samples": 0}, "n_samples: Input should be greater than or equal to 1 (got 0)"),
        ({"on_error": "ignore"}, "on_error: Input should be 'raise' or 'fallback' (got 'ignore')"),
        ({"max_retries": -1}, "max_retries: Input should be greater than or equal to 0 (got -1)"),
        ({"temperature": -0.5}, "temperature: Input should be greater than or equal to 0"),
    ],
)
def test_field_validation(kwargs: dict[str, Any], message: str) -> None:
    prefix = "TaskCalibratedRunnable got an invalid argument: "
    with pytest.raises(ConfigurationError, match=re.escape(prefix + message)):
        TaskCalibratedRunnable(generic([]), tasks.tool_decision(), **kwargs)


def test_with_config_and_pipe() -> None:
    runnable = TaskCalibratedRunnable(generic([QUESTION] * 2), tasks.tool_decision(), n_samples=2)
    chain = runnable.with_config(tags=["t"]) | RunnableLambda(lambda d: d.action)
    assert chain.invoke("x") == "request_for_info"


@pytest.mark.parametrize("mode", MODES)
def test_calls_to_tools_that_were_not_bound_are_never_sent(mode: str) -> None:
    # The model calls a tool it was not given: unparsed (as in `taskcal sample`), not a call.
    model = RecordingChatModel(responses=[tool_call_message("delete_everything")])
    runnable = TaskCalibratedRunnable(model.bind_tools([get_weather]), tasks.tool_decision(),
                                      n_samples=4, temperature=None)  # fmt: skip
    decision = invoke(runnable, "x", mode)
    assert decision.counts["tool_call"] == 0
    assert decision.n_unparsed == 4
    assert decision.action != "tool_call"
    # unbound: no tool list to check against, so any tool counts (the parser's check; without
    # grounding, which would refuse a call to a tool whose schema it does not know)
    unbound = TaskCalibratedRunnable(
        model, tasks.tool_decision(grounding=None), n_samples=4, temperature=None
    )
    assert invoke(unbound, "x", mode).counts["tool_call"] == 4


# ------------------------------------------------------------------ with_retry()


class FailsOnce(FakeOpenAIServer):
    """A fake OpenAI server whose first request fails with a 500."""

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if not self.requests:
            self.requests.append(json.loads(request.content))
            return httpx.Response(500, json={"error": {"message": "overloaded"}})
        return super().__call__(request)


@pytest.mark.parametrize("mode", MODES)
def test_with_retry_on_a_chat_openai_keeps_n_and_retries(mode: str) -> None:
    server = FailsOnce()
    model = server.chat_openai().bind_tools([get_weather])
    retrying = model.with_retry(stop_after_attempt=2, wait_exponential_jitter=False)
    sampled, retry = split_retry(retrying)  # with_retry() went under the tool binding
    assert retry is not None
    assert retry.max_attempt_number == 2
    assert split_retry(sampled) == (sampled, None)
    assert chat_model_of(sampled) is chat_model_of(model)
    assert supports_n(sampled)
    runnable = TaskCalibratedRunnable(retrying, tasks.tool_decision(), n_samples=6)
    with collect_runs() as cb:
        decision = invoke(runnable, "weather?", mode)
    assert [r["n"] for r in server.requests] == [6, 6]  # one request with n, retried once
    assert server.requests[1]["tools"][0]["function"]["name"] == "get_weather"
    assert decision.fallback is False
    assert decision.n_samples == 6
    tags = [tag for c in cb.traced_runs[0].child_runs for tag in (c.tags or [])]
    assert "retry:attempt:2" in tags


@pytest.mark.parametrize("mode", MODES)
def test_with_retry_on_a_fake_chat_model_that_fails_once(mode: str) -> None:
    model = Flaky(1).model()
    runnable = TaskCalibratedRunnable(
        model.with_retry(wait_exponential_jitter=False), tasks.tool_decision(), n_samples=2
    )
    decision = invoke(runnable, "x", mode)
    assert decision.action == "request_for_info"
    assert decision.fallback is False
    assert model.i == 2 + 2  # both samples of the failed attempt, then both again


def test_with_retry_policy_is_applied() -> None:
    # stop after one attempt, and only retry ValueError: a ConnectionError is final
    for retrying in (
        Flaky(1).model().with_retry(stop_after_attempt=1, wait_exponential_jitter=False),
        Flaky(1).model().with_retry(retry_if_exception_type=(ValueError,)),
    ):
        runnable = TaskCalibratedRunnable(retrying, tasks.tool_decision(), n_samples=1)
        with pytest.raises(SamplingError, match=re.escape("after 1 attempt(s): ConnectionError")):
            runnable.invoke("x")


def test_retries_come_from_one_place() -> None:
    msg = (
        "TaskCalibratedRunnable takes retries from 'max_retries'/'retry_wait' or from the "
        "model's with_retry() layer, not both; drop one of them."
    )
    with pytest.raises(ConfigurationError, match=f"^{re.escape(msg)}$"):
        TaskCalibratedRunnable(generic([]).with_retry(), tasks.tool_decision(), max_retries=2)


def test_chat_model_bind_tools_keeps_the_retry_layer() -> None:
    server = FailsOnce()
    retrying = server.chat_openai().with_retry(stop_after_attempt=2, wait_exponential_jitter=False)
    chat = TaskCalibratedChatModel(retrying, tasks.tool_decision(), n_samples=3)
    bound = chat.bind_tools([get_weather])
    assert isinstance(bound.runnable.model, RunnableRetry)
    assert bound.runnable.model.max_attempt_number == 2
    bound.invoke("weather?")
    assert len(server.requests) == 2
    assert server.requests[1]["tools"][0]["function"]["name"] == "get_weather"


def test_with_retry_predicate_and_wait() -> None:
    # langchain also takes a predicate for which errors to retry
    retrying = (
        Flaky(1)
        .model()
        .with_retry(
            retry_if_exception_type=lambda exc: isinstance(exc, ConnectionError),
            wait_exponential_jitter=False,
        )
    )
    runnable = TaskCalibratedRunnable(retrying, tasks.tool_decision(), n_samples=1)
    assert runnable.invoke("x").fallback is False
    # tenacity's exponential jitter: initial * exp_base ** (retry - 1) + U(0, jitter), capped
    _, retry = split_retry(
        generic([]).with_retry(exponential_jitter_params={"initial": 0.5, "jitter": 0, "max": 1.5})
    )
    assert retry is not None
    policy = RetryPolicy.of_runnable_retry(retry)
    assert [policy.wait_before(attempt) for attempt in (1, 2, 3, 4)] == [0.0, 0.5, 1.0, 1.5]
