"""Adaptive N: the stopping rule alone, then through the Runnable, chat model and middleware."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import warnings
from typing import Any

import httpx
import numpy as np
import pytest
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, HumanMessage
from pydantic import ValidationError

from taskcal_agents.decision import _presets as tasks
from taskcal_agents.decision._adaptive import (
    AdaptiveSampling,
    _actions,
    change_probability,
    check_adaptive,
    outcome_counts,
    stop_check,
    stop_check_messages,
)
from taskcal_agents.decision._decider import Decider
from taskcal_agents.decision._options import SamplingOptions
from taskcal_agents.decision._risk_control import RiskControl, RiskSpec
from taskcal_agents.decision._stopping_prior import StoppingPrior
from taskcal_agents.decision._task import GroundingSpec
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.langchain._chat_model import TaskCalibratedChatModel
from taskcal_agents.langchain._middleware import TaskCalibrationMiddleware
from taskcal_agents.langchain._runnable import TaskCalibratedRunnable
from taskcal_agents.parsing._grounding import GroundingContext
from tests.unit_tests.taskcal_agents.helpers.chat_fakes import (
    FakeOpenAIServer,
    RecordingChatModel,
    completion,
)
from tests.unit_tests.taskcal_agents.helpers.data import WEATHER  # get_weather(city) schema
from tests.unit_tests.taskcal_agents.helpers.middleware_fakes import (
    CountingHandler,
    make_request,
    unwrap,
)

MODES = ["sync", "async"]
CHOICE = tasks.multiple_choice(["Paris", "London", "Rome"])  # labels A, B, C; 0-1 cost
COUNTS_GRID = [[4, 0, 0, 0], [3, 1, 0, 0], [2, 2, 0, 0], [1, 1, 1, 1], [6, 2, 0, 0], [0, 0, 0, 4]]
EPSILONS = [0.001, 0.01, 0.05, 0.2, 0.5]
PARIS = GroundingContext([WEATHER], [HumanMessage("What's the weather in Paris?")])
"""The tools and conversation of the get_weather(city="Paris") samples: grounded calls."""
CALL = AIMessage(
    content="", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "c"}]
)
"""A grounded get_weather(city="Paris") sample under PARIS."""


PLAIN = GroundingSpec()
"""Tool decisions without the relevance features, which adaptive N refuses."""


def call_guard(threshold: float) -> RiskControl:
    """A certified 'tool_call_when_not:0.05' limit whose guard threshold is ``threshold``."""
    return RiskControl(
        spec=RiskSpec.parse("tool_call_when_not:0.05"), delta=0.05, threshold=threshold,
        certified=True, n=100, n_taken=100, risk=0.03, coverage=0.8,
        method="ltt-binomial-fixed-sequence", n_grid=101,
    )  # fmt: skip


def fitted(task: Any, a: float) -> StoppingPrior:
    """A stopping prior as if fitted on 200 items: ``a`` on every outcome."""
    return StoppingPrior(task.outcomes, (a,) * (len(task.outcomes) + 1), n_items=200)


def settled(task: Any, epsilon: float, **kwargs: Any) -> AdaptiveSampling:
    """Adaptive N under a fitted prior of items whose samples agree (a = 0.1 on every outcome).

    A fitted prior looks like this on a task whose samples mostly agree; a = 1 would draw
    more before stopping on the same samples.
    """
    return AdaptiveSampling(epsilon=epsilon, prior=fitted(task, 0.1), **kwargs)


class ConstantCalibrator:
    """A fitted calibrator stand-in that returns the same q for every row."""

    def __init__(self, q: list[float]) -> None:
        self.q = np.asarray(q)
        self.n_classes_ = len(q)
        self.classes_ = np.arange(len(q))
        self.calls = 0

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        self.calls += 1
        return np.tile(self.q, (np.asarray(X).shape[0], 1))


# ------------------------------------------------------------------ the pure rule


def test_rounds_double_from_first_and_end_at_n() -> None:
    assert AdaptiveSampling(epsilon=0.01).rounds(16) == (4, 8, 16)
    assert AdaptiveSampling(epsilon=0.01, first=3).rounds(20) == (3, 6, 12, 20)
    assert AdaptiveSampling(epsilon=0.01, first=8).rounds(5) == (5,)


@pytest.mark.parametrize(
    "kwargs", [{"epsilon": 0}, {"epsilon": 1}, {"epsilon": -0.1}, {"epsilon": 0.1, "first": 0}]
)
def test_bad_epsilon_or_first_is_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        AdaptiveSampling(**kwargs)


def test_bad_n_max_for_rounds_is_refused() -> None:
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "AdaptiveSampling.rounds parameter 'n_max' must be an integer >= 1, got 0."
        ),
    ):
        AdaptiveSampling(epsilon=0.01).rounds(0)


def test_unanimous_samples_stop_early_and_split_ones_do_not() -> None:
    decider = Decider(CHOICE)
    rule = settled(CHOICE, 0.01)
    unanimous = stop_check(decider, [4, 0, 0, 0], 16, rule)
    split = stop_check(decider, [2, 2, 0, 0], 16, rule)
    assert unanimous.stop and unanimous.change_probability < 0.01
    assert not split.stop and split.change_probability > 0.2


def test_the_prior_decides_how_much_four_agreeing_samples_settle() -> None:
    # a = 1 expects more disagreement than a = 0.1 does: the same four agreeing samples
    # do not settle the choice at ε = 0.01.
    broad = stop_check(Decider(CHOICE, stopping_prior=fitted(CHOICE, 1.0)), [4, 0, 0, 0], 16,
                       AdaptiveSampling(epsilon=0.01))  # fmt: skip
    assert not broad.stop and 0.01 < broad.change_probability < 0.05
    narrow = Decider(CHOICE, stopping_prior=fitted(CHOICE, 0.1))
    assert stop_check(narrow, [4, 0, 0, 0], 16, AdaptiveSampling(epsilon=0.01)).stop


@pytest.mark.parametrize(
    "prior", [None, StoppingPrior.uniform(CHOICE), StoppingPrior.uniform(CHOICE, 0.01)]
)
def test_without_a_fitted_prior_it_never_stops_early_and_warns_once(
    prior: StoppingPrior | None,
) -> None:
    # The uniform prior does not hold ε (docs: Adaptive N): with no prior fitted on
    # calibration samples (n_items = 0), the rule draws all N, whatever the samples say.
    import taskcal_agents.decision._adaptive as adaptive

    adaptive._WARNED_UNFITTED.discard(CHOICE.name)
    rule = AdaptiveSampling(epsilon=0.5, prior=prior)
    with pytest.warns(adaptive.UnfittedPriorWarning, match="no fitted stopping prior"):
        first = stop_check(Decider(CHOICE), [4, 0, 0, 0], 16, rule)
    assert (first.stop, first.change_probability) == (False, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per task: the second check is silent
        later = stop_check(Decider(CHOICE, stopping_prior=prior), [12, 0, 0, 0], 16, rule)
        assert not later.stop
        assert stop_check(Decider(CHOICE), [16, 0, 0, 0], 16, rule).stop  # at N it stops


@pytest.mark.parametrize("counts", COUNTS_GRID)
def test_stopping_is_monotone_in_epsilon(counts: list[int]) -> None:
    decider = Decider(CHOICE, stopping_prior=fitted(CHOICE, 1.0))
    stops = [stop_check(decider, counts, 16, AdaptiveSampling(epsilon=e)).stop for e in EPSILONS]
    assert stops == sorted(stops)  # once it stops at some ε, it stops at every larger ε


def test_at_n_it_always_stops() -> None:
    decider = Decider(CHOICE, stopping_prior=fitted(CHOICE, 1.0))
    check = stop_check(decider, [8, 8, 0, 0], 16, AdaptiveSampling(epsilon=1e-9))
    assert (check.stop, check.change_probability, check.n_drawn) == (True, 0.0, 16)


def test_the_estimate_is_reproducible_and_seeded_by_the_counts() -> None:
    decider = Decider(CHOICE)
    first = change_probability(decider, [3, 1, 0, 0], 16)
    assert change_probability(decider, [3, 1, 0, 0], 16) == first
    assert 0 < first < 1


def test_the_calibrator_is_what_decides() -> None:
    # A map that ignores its input never lets more samples change the action.
    calibrator = ConstantCalibrator([0.2, 0.7, 0.1])
    decider = Decider(CHOICE, calibrator)
    assert change_probability(decider, [2, 2, 0, 0], 16) == 0.0
    assert calibrator.calls == 1  # one predict_proba call for all draws


def brute_force_change(
    decider: Decider,
    prefix: list[AIMessage],
    futures: dict[str | None, AIMessage],
    prior: StoppingPrior,
    n_max: int,
) -> float:
    """P(change) by enumerating every ordered sequence of the missing samples.

    Each sequence's probability is the Pólya urn's (sample by sample, the predictive of
    Dirichlet(a + counts so far)), and both actions are ``Decider.decide`` on messages:
    an independent route to the rule's sum over counts.
    """
    task = decider.task
    outcomes = [*task.outcomes, None]
    labels = [task.parse_completion(m) for m in prefix]
    counts = {o: sum(label == o for label in labels) for o in outcomes}
    a = dict(zip(outcomes, prior.concentration, strict=True))
    now = decider.decide(prefix, context=PARIS).action
    total = 0.0
    remaining = n_max - len(prefix)
    for sequence in itertools.product(outcomes, repeat=remaining):
        seen = dict(counts)
        weight = 1.0
        for t, o in enumerate(sequence):
            weight *= (a[o] + seen[o]) / (sum(a.values()) + len(prefix) + t)
            seen[o] += 1
        later = decider.decide(prefix + [futures[o] for o in sequence], context=PARIS).action
        total += weight * (later != now)
    return total


@pytest.mark.parametrize(
    "prefix",
    [
        ["call", "call", "call", "ask"],
        ["ask", "ask", "refuse", "zzz"],
        ["call", "ask", "refuse", "zzz"],
    ],
)
@pytest.mark.parametrize("decides", ["raw", "guarded", "calls"])
def test_the_estimate_is_the_exact_predictive_by_brute_force(
    prefix: list[str], decides: str
) -> None:
    task = tasks.tool_decision(grounding=PLAIN, cost=[[0, 1, 2], [4, 0, 2], [4, 1, 0]])
    guard = call_guard(0.8)
    # "calls": a map that always favours the call, so without a call among the samples the
    # action is not the call, and the first future call makes it executable.
    calibrator = ConstantCalibrator([0.9, 0.05, 0.05]) if decides == "calls" else None
    decider = Decider(task, calibrator, risk_control=guard if decides == "guarded" else None)
    messages = {
        "tool_call": CALL,
        "request_for_info": AIMessage("Which city?"),
        "cannot_answer": AIMessage("I cannot help with that."),
        None: AIMessage("zzz"),
    }
    by_name = {"call": "tool_call", "ask": "request_for_info", "refuse": "cannot_answer"}
    drawn = [messages[by_name.get(x)] for x in prefix]
    assert [task.parse_completion(m) for m in messages.values()] == [*task.outcomes, None]
    prior = StoppingPrior(task.outcomes, (0.7, 0.4, 0.2, 0.05), n_items=100)
    expected = brute_force_change(decider, drawn, messages, prior, 9)
    rule = AdaptiveSampling(epsilon=0.5, prior=prior)
    got = stop_check_messages(decider, drawn, 9, rule, context=PARIS).change_probability
    assert got == pytest.approx(expected, abs=1e-12)
    if decides == "calls" and "call" in prefix:
        assert expected == 0  # the call is executable and the map always takes it
    else:
        assert 0 < expected < 1  # the other cases are not trivial


def test_monte_carlo_past_the_enumeration_limit_agrees_with_the_exact_sum() -> None:
    # Six ratings and unparsed: 18,564 futures after 4 of 16 samples.
    task = tasks.rating(k=6)
    decider = Decider(task)
    counts = [0, 0, 3, 1, 0, 0, 0]
    exact = change_probability(decider, counts, 16, draws=20_000)
    drawn = change_probability(decider, counts, 16, draws=4096)
    se = np.sqrt(exact * (1 - exact) / 4096)
    assert 0.05 < exact < 0.95
    assert abs(drawn - exact) < 4 * se
    assert change_probability(decider, counts, 16, draws=4096) == drawn  # seeded


def test_the_confirm_action_becomes_executable_with_the_call() -> None:
    task = tasks.tool_decision(grounding=PLAIN)
    decider = Decider(task, ConstantCalibrator([0.6, 0.3, 0.1]))
    # q(tool_call) = 0.6 is short of a write's bar: the decision would confirm, which a
    # future tool-call sample makes possible, as it makes the call possible.
    blocked = np.array([False, False, True, True])
    assert change_probability(decider, [1, 0, 0, 3], 16, executable=blocked) > 0.5
    assert change_probability(decider, [1, 0, 0, 3], 16) == 0.0


def test_a_tool_call_no_sample_carries_out_yet_can_become_executable() -> None:
    task = tasks.tool_decision(grounding=PLAIN, cost=tasks.FLAT_TOOL_DECISION_COST)
    decider = Decider(task, ConstantCalibrator([0.9, 0.05, 0.05]))
    # Without an executable tool call, MBR takes the next action; a future tool-call
    # sample makes the call executable and changes the action.
    blocked = np.array([False, True, True])
    assert change_probability(decider, [1, 0, 0, 3], 16, executable=blocked) > 0.5
    assert change_probability(decider, [1, 0, 0, 3], 16) == 0.0


def test_the_rule_watches_the_guarded_action() -> None:
    # Four unanimous tool calls: MBR keeps the call whatever 12 more samples say, nearly
    # always; the guard (score 0.953 against λ̂ = 0.95) downgrades it to asking as soon as
    # one more sample is not a call. The rule must watch the action the Decider returns.
    task = tasks.tool_decision(grounding=PLAIN, cost=[[0, 1, 2], [4, 0, 2], [4, 1, 0]])
    guard = call_guard(0.95)
    plain, guarded = Decider(task), Decider(task, risk_control=guard)
    now, later = [CALL] * 4, [CALL] * 4 + [AIMessage(content="zzz")]
    assert (
        plain.decide(now, context=PARIS).action
        == plain.decide(later, context=PARIS).action
        == "tool_call"
    )
    assert guarded.decide(now, context=PARIS).action == "tool_call"
    assert guarded.decide(later, context=PARIS).action == "request_for_info"
    assert guarded.decide(later, context=PARIS).guarded
    rule = settled(task, 0.1)
    assert stop_check(plain, [4, 0, 0, 0], 16, rule).stop
    check = stop_check(guarded, [4, 0, 0, 0], 16, rule)
    assert not check.stop and check.change_probability > 0.2


def test_choose_actions_is_the_decision_of_decide() -> None:
    task = tasks.tool_decision(grounding=PLAIN, cost=[[0, 1, 2], [4, 0, 2], [4, 1, 0]])
    guard = call_guard(0.9)
    decider = Decider(task, risk_control=guard)
    rows = [[4, 0, 0, 0], [4, 0, 0, 1], [3, 1, 0, 0], [1, 2, 1, 0], [0, 0, 3, 1], [9, 1, 0, 0]]
    texts = ["Which city?", "I cannot help with that.", "zzz"]
    expected = []
    for row in rows:
        messages = [CALL] * row[0] + [
            AIMessage(content=t) for t, c in zip(texts, row[1:], strict=True) for _ in range(c)
        ]
        expected.append(task.action_index(decider.decide(messages, context=PARIS).action))
    counts = np.asarray(rows, dtype=np.int64)
    got = _actions(decider, counts, np.ones((len(rows), 3), dtype=bool))
    assert got.tolist() == expected
    assert len(set(expected)) > 1


def test_outcome_counts_and_bad_input() -> None:
    assert outcome_counts(CHOICE, ["A", None, "B", "A"]).tolist() == [2, 1, 0, 1]
    decider = Decider(CHOICE)
    with pytest.raises(ConfigurationError, match="must hold 4 integer counts >= 0"):
        change_probability(decider, [1, 2], 16)
    with pytest.raises(ConfigurationError, match="must be 3 booleans"):
        change_probability(decider, [1, 0, 0, 0], 16, executable=[True])


def test_answer_clusters_are_refused() -> None:
    task = tasks.answer_or_abstain(answer_clusters="lexical")
    with pytest.raises(ConfigurationError, match="clusters open answers"):
        check_adaptive(task, "X")


# ------------------------------------------------------------------ the front doors


class UnanimousServer(FakeOpenAIServer):
    """A fake OpenAI server whose every choice is the text ``answer``."""

    def __init__(self, answers: list[str]) -> None:
        super().__init__()
        self.answers = answers

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        n = body.get("n", 1)
        start = sum(r.get("n", 1) for r in self.requests[:-1])
        return httpx.Response(
            200,
            json=completion(
                [{"content": self.answers[(start + i) % len(self.answers)]} for i in range(n)]
            ),
        )


def decide(runnable: Any, mode: str) -> Any:
    if mode == "sync":
        return runnable.invoke("Capital of France?")
    return asyncio.run(runnable.ainvoke("Capital of France?"))


@pytest.mark.parametrize("mode", MODES)
def test_runnable_one_request_per_round_stops_when_samples_agree(mode: str) -> None:
    server = UnanimousServer(["Paris"])
    runnable = TaskCalibratedRunnable(
        server.chat_openai(), CHOICE, n_samples=16, adaptive=settled(CHOICE, 0.01), seed=7
    )
    decision = decide(runnable, mode)
    assert [r["n"] for r in server.requests] == [4]
    assert (decision.action, decision.n_samples, decision.stopped_early) == ("A", 4, True)
    assert decision.change_probability is not None and decision.change_probability < 0.01


@pytest.mark.parametrize("mode", MODES)
def test_without_a_fitted_prior_a_front_door_draws_n_in_one_request(mode: str) -> None:
    import taskcal_agents.decision._adaptive as adaptive

    adaptive._WARNED_UNFITTED.discard(CHOICE.name)
    server = UnanimousServer(["Paris"])
    runnable = TaskCalibratedRunnable(
        server.chat_openai(), CHOICE, n_samples=16, adaptive=0.5, seed=7
    )
    with pytest.warns(adaptive.UnfittedPriorWarning, match="draws all N samples"):
        decision = decide(runnable, mode)
    assert [r["n"] for r in server.requests] == [16]  # no rounds: they could never stop
    assert (decision.n_samples, decision.stopped_early) == (16, False)


@pytest.mark.parametrize("mode", MODES)
def test_runnable_draws_all_n_when_samples_split(mode: str) -> None:
    server = UnanimousServer(["Paris", "London"])
    runnable = TaskCalibratedRunnable(
        server.chat_openai(), CHOICE, n_samples=16, adaptive=settled(CHOICE, 0.01), seed=7
    )
    decision = decide(runnable, mode)
    assert [r["n"] for r in server.requests] == [4, 4, 8]
    assert [r["seed"] for r in server.requests] == [7, 11, 15]  # each round new samples
    assert (decision.n_samples, decision.stopped_early, decision.change_probability) == (
        16,
        False,
        0.0,
    )


@pytest.mark.parametrize("mode", MODES)
def test_runnable_without_n_draws_fewer_calls_when_samples_agree(mode: str) -> None:
    agree = RecordingChatModel(responses=["Paris"])
    split = RecordingChatModel(responses=["Paris", "London"])
    for model, calls in ((agree, 4), (split, 16)):
        runnable = TaskCalibratedRunnable(
            model, CHOICE, n_samples=16, adaptive=settled(CHOICE, 0.01)
        )
        decision = decide(runnable, mode)
        assert len(model.calls) == calls == decision.n_samples


def test_runnable_without_adaptive_is_unchanged() -> None:
    server = UnanimousServer(["Paris"])
    decision = decide(TaskCalibratedRunnable(server.chat_openai(), CHOICE, n_samples=16), "sync")
    assert [r["n"] for r in server.requests] == [16]
    assert (decision.n_samples, decision.stopped_early, decision.change_probability) == (
        16,
        False,
        None,
    )


@pytest.mark.parametrize("mode", MODES)
def test_chat_model_takes_the_option(mode: str) -> None:
    server = UnanimousServer(["Paris"])
    chat = TaskCalibratedChatModel(
        server.chat_openai(), CHOICE, adaptive=settled(CHOICE, 0.01, first=2)
    )
    reply = decide(chat, mode)
    assert [r["n"] for r in server.requests] == [2, 2]  # 2 of 2 is not settled, 4 of 4 is
    assert reply.response_metadata["taskcal_decision"]["stopped_early"] is True


def test_front_doors_refuse_answer_clusters() -> None:
    task = tasks.answer_or_abstain(answer_clusters="lexical")
    with pytest.raises(ConfigurationError, match="clusters open answers"):
        TaskCalibratedRunnable(RecordingChatModel(responses=["x"]), task, adaptive=0.01)
    with pytest.raises(ConfigurationError, match="clusters open answers"):
        TaskCalibrationMiddleware(task=task, options=SamplingOptions(adaptive=0.01))


@pytest.mark.parametrize("mode", MODES)
def test_middleware_stops_early_when_samples_agree(mode: str) -> None:
    # the flat matrix: four agreeing samples of a call of unknown effect settle it there (under
    # effects, a write so close to its bar would draw on, as it should)
    task = tasks.tool_decision(grounding=PLAIN, cost=tasks.FLAT_TOOL_DECISION_COST)
    mw = TaskCalibrationMiddleware(
        task=task,
        sampling="handler",
        options=SamplingOptions(n_samples=16, adaptive=settled(task, 0.1)),
    )
    agree = CountingHandler([CALL] * 16)
    split = CountingHandler(["Which city?", "Sorry, I can't help."] * 8)
    for handler, n in ((agree, 4), (split, 16)):
        request = make_request()
        if mode == "sync":
            result = mw.wrap_model_call(request, handler)
        else:
            result = asyncio.run(mw.awrap_model_call(request, handler.acall))
        _, record = unwrap(result)
        assert len(handler.requests) == n == record["n_samples"]
        assert record["stopped_early"] is (n < 16)


def test_middleware_refuses_a_bad_epsilon() -> None:
    with pytest.raises(ValidationError, match=r"adaptive\.epsilon\n.*less than 1"):
        SamplingOptions(adaptive=2.0)  # the middleware's options
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(
            ConfigurationError,
            match=r"^TaskCalibrationMiddleware parameter 'adaptive\.epsilon': Input should be "
            r"less than 1, got 2\.0\.$",
        ),
    ):
        TaskCalibrationMiddleware(task=tasks.tool_decision(grounding=PLAIN), adaptive=2.0)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_decision_model_draws_in_rounds_and_stops_when_settled(mode: str) -> None:
    from langchain_core.decisions import Choice

    from taskcal_agents.langchain._decision_model import TaskCalibratedDecisionModel

    question = Choice(instructions="Pick", criteria={"A": "first", "B": "second"})
    chat = RecordingChatModel(responses=["A"])
    task = TaskCalibratedDecisionModel(chat_model=chat).task_for("q", question)
    model = TaskCalibratedDecisionModel(chat_model=chat, n_samples=16, adaptive=settled(task, 0.05))
    if mode == "sync":
        decision = model.decide("state", "q", question)
    else:
        decision = asyncio.run(model.adecide("state", "q", question))
    assert decision.action == "A"
    assert decision.stopped_early is True
    assert decision.n_samples == 4  # the first round settles a unanimous draw


class RaisingCalibrator(ConstantCalibrator):
    """A calibrator that fails when the stopping rule calls it."""

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        msg = "calibrator broke"
        raise ConfigurationError(msg)


def test_middleware_a_stopping_rule_error_raises_rather_than_falling_back() -> None:
    plain = tasks.tool_decision(grounding=PLAIN)
    mw = TaskCalibrationMiddleware(
        task=plain,
        calibrator=RaisingCalibrator([0.4, 0.3, 0.3]),
        sampling="handler",
        options=SamplingOptions(n_samples=16, adaptive=settled(plain, 0.05), on_error="fallback"),
    )
    handler = CountingHandler(["Which city?"] * 16)
    with pytest.raises(ConfigurationError, match="calibrator broke"):
        mw.wrap_model_call(make_request(), handler)
    assert len(handler.requests) == 4  # the first round was drawn; the rule raised


def test_middleware_a_full_draw_with_an_empty_response_did_not_stop_early() -> None:
    task = tasks.tool_decision(grounding=PLAIN)
    mw = TaskCalibrationMiddleware(
        task=task,
        sampling="handler",
        options=SamplingOptions(n_samples=16, adaptive=settled(task, 0.05)),
    )
    split = CountingHandler(["Which city?", "Sorry, I can't help."] * 8)
    calls = []

    def handler(request: ModelRequest[Any]) -> ModelResponse[Any]:
        calls.append(request)
        if len(calls) == 16:  # the last response carries no message
            return ModelResponse(result=[])
        return split(request)

    _, record = unwrap(mw.wrap_model_call(make_request(), handler))
    assert len(calls) == 16
    assert record["n_samples"] == 16  # the empty response is one unparsed sample
    assert record["n_unparsed"] == 1
    assert record["stopped_early"] is False
    assert record["change_probability"] == 0.0


# ------------------------------------------------------------- audit: mutations caught


class UnparsedShareCalibrator:
    """A map of the ``unparsed: other`` features that answers B once the unparsed share
    (the last feature) exceeds 0.3, else A: only the unparsed count moves its action."""

    n_features_in_ = 4
    n_classes_ = 3
    classes_ = np.arange(3)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        share = np.asarray(X)[:, -1:]
        return np.where(share > 0.3, [0.1, 0.8, 0.1], [0.8, 0.1, 0.1])


def test_the_futures_include_unparsed_samples() -> None:
    # Drop policy, a map that answers B on any parsed sample; with none, the fallback A.
    # Of 60 samples all are unparsed: the remaining 4 are most likely unparsed too, so
    # the action (fallback) most likely stays (P(change) about 0.06 under the uniform
    # stopping prior). Futures that are never unparsed would always bring
    # a parsed sample and change it: P(change) = 1.
    dropped = Decider(CHOICE, ConstantCalibrator([0.2, 0.7, 0.1]))
    assert dropped.task.default_action == "A"
    p_drop = change_probability(dropped, [0, 0, 0, 60], 64)
    assert 0 < p_drop < 0.5, p_drop
    # "other" policy, the unparsed share is evidence: 2 of 8 unparsed (share 0.25), and
    # at N = 16 three or more unparsed of the 8 to come move the share past 0.3 and the
    # action from A to B. Futures whose unparsed samples are never drawn (or dropped)
    # never move it: P(change) = 0.
    other = tasks.multiple_choice(["Paris", "London", "Rome"], unparsed="other")
    share = Decider(other, UnparsedShareCalibrator())
    assert share.reads_features
    p_share = change_probability(share, [6, 0, 0, 2], 16)
    assert 0.1 < p_share < 0.9, p_share
    assert not stop_check(share, [6, 0, 0, 2], 16, AdaptiveSampling(epsilon=0.05)).stop
