"""Relevance signals: the request's fit to the tools, and what the samples say of it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from langchain_core.messages import AIMessage

from calibrators import make_calibrator
from taskcal_agents.decision._adaptive import check_adaptive
from taskcal_agents.decision._decider import Decider, item_relevance
from taskcal_agents.decision._task import GroundingSpec, Task
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.parsing._grounding import GroundingContext
from taskcal_agents.parsing._relevance import (
    RELEVANCE_FEATURES,
    SAMPLE_SIGNALS,
    lexical_fit,
    relevance_features,
    sample_signals,
)
from taskcal_agents.workflow import read_samples
from taskcal_agents.workflow._crossfit import calibrator_inputs
from taskcal_agents.workflow._data import eval_arrays
from taskcal_agents.workflow._runner import message_from_dict
from tests.unit_tests.taskcal_agents.helpers.workflow_fakes import _samples_file, tool_task

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather conditions in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city's name."}},
            "required": ["city"],
        },
    },
}
BOOKING = {  # a bare function block (BFCL style)
    "name": "Restaurants_2_ReserveRestaurant",
    "description": "Reserve a table at a restaurant.",
    "parameters": {"type": "dict", "properties": {"party_size": {"type": "integer"}}},
}


def call(name: str, **args: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": "c"}])


def test_the_fit_is_the_share_of_request_words_the_best_tool_holds() -> None:
    # "weather" and "city" are the tool's; "Paris" is not: 2 of 3 content words.
    assert lexical_fit("What's the weather in the city of Paris?", [WEATHER]) == pytest.approx(
        2 / 3
    )
    # Plurals fold and camel-case names split: "restaurants", "tables", "reserve" all fit.
    assert lexical_fit("Reserve tables at restaurants", [WEATHER, BOOKING]) == 1.0
    assert lexical_fit("Book me a flight to the Moon", [WEATHER, BOOKING]) == 0.0
    assert lexical_fit("What's the weather?", []) == 0.0
    assert lexical_fit("Can you please?", [WEATHER]) == 0.0  # no content word


def test_the_samples_tell_unoffered_calls_refusals_text_and_disagreement() -> None:
    samples = [
        call("get_weather", city="Paris"),
        call("get_weather", city="Rome"),
        call("book_flight", to="Moon"),  # not offered
        AIMessage(content="Sorry, I can't help with that."),
        AIMessage(content="The moon is far away."),  # plain text, unparsed
    ]
    labels = ["tool_call", "tool_call", None, "cannot_answer", None]
    signals = sample_signals(samples, labels, ["get_weather"])
    assert signals == {
        "unoffered_share": 1 / 5,
        "refusal_share": 1 / 5,
        "text_share": 1 / 5,
        "tool_disagreement": pytest.approx(1 - 2 / 3),
    }
    broken = AIMessage(content="", invalid_tool_calls=[
        {"name": "teleport", "args": "{", "id": "x", "error": None, "type": "invalid_tool_call"}
    ])  # fmt: skip
    assert sample_signals([broken], [None], ["get_weather"])["unoffered_share"] == 1.0
    assert sample_signals([], [], ["get_weather"]) == dict.fromkeys(SAMPLE_SIGNALS, 0.0)
    one_call = sample_signals([call("get_weather", city="Paris")], ["tool_call"], ["get_weather"])
    assert one_call["tool_disagreement"] == 0.0
    with pytest.raises(ValueError, match=r"shorter|longer"):
        sample_signals(samples, labels[:2], ["get_weather"])


def test_the_features_come_in_their_declared_order() -> None:
    samples = [call("get_weather", city="Paris"), call("teleport")]
    features = relevance_features(
        "What's the weather in Paris?", [WEATHER], samples, ["tool_call", None], modal_calls=1
    )
    assert len(features) == len(RELEVANCE_FEATURES)
    assert dict(zip(RELEVANCE_FEATURES, features, strict=True)) == {
        "lexical_fit": pytest.approx(0.5),  # "weather" of "weather", "paris"
        "unoffered_share": 0.5,
        "refusal_share": 0.0,
        "text_share": 0.0,
        "tool_disagreement": 0.5,
        "call_agreement": 0.5,  # one of the two samples makes the modal call
    }


# ------------------------------------------------- the features reach the calibrator


class RecordingCalibrator:
    """A fitted-calibrator stand-in of a given input width that records what it reads."""

    def __init__(self, width: int, k: int = 3) -> None:
        self.n_features_in_ = width
        self.n_classes_ = k
        self.classes_ = np.arange(k)
        self.rows: list[np.ndarray] = []

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        self.rows.extend(np.atleast_2d(X))
        return np.full((np.atleast_2d(X).shape[0], self.n_classes_), 1 / self.n_classes_)


def relevance_task() -> Task:
    return tool_task(grounding=GroundingSpec(relevance=True))


def test_the_task_declares_the_inputs_after_the_belief_features() -> None:
    task = relevance_task()
    assert task.reads_relevance and not tool_task().reads_relevance
    assert (task.n_features, task.n_inputs) == (4, 4 + len(RELEVANCE_FEATURES))
    assert tool_task().n_inputs == tool_task().n_features == 4
    Decider(task, RecordingCalibrator(task.n_inputs))  # accepted
    with pytest.raises(ConfigurationError, match=r"or 10 \(with the relevance features\)"):
        Decider(task, RecordingCalibrator(7))
    with pytest.raises(ConfigurationError, match="fitted on 10 input columns"):
        Decider(tool_task(), RecordingCalibrator(10))  # the task reads no relevance


def test_evaluation_and_runtime_feed_the_calibrator_the_same_row(tmp_path: Path) -> None:
    # Served as run: taskcal evaluate's input row of each item is the one the Decider
    # builds from the same samples and context, relevance features included.
    task = relevance_task()
    samples = read_samples(_samples_file(tmp_path, n=30))
    data = eval_arrays(task, samples, alpha=0.1)
    assert data.inputs is not None and data.inputs.shape == (30, task.n_inputs)
    for i, item_id in enumerate(data.ids):
        record = samples.records[item_id]
        calibrator = RecordingCalibrator(task.n_inputs)
        decision = Decider(task, calibrator, alpha=0.1).decide(
            [message_from_dict(m) for m in record["samples"]],
            tool_names=record["tool_names"],
            context=GroundingContext(record["tools"], record["messages"]),
        )
        if decision.fallback and not calibrator.rows:
            continue  # no parsed sample: the fallback reads no calibrator
        np.testing.assert_allclose(calibrator.rows[0], data.inputs[i])
        assert decision.relevance is not None
        assert list(decision.relevance.values()) == pytest.approx(
            list(data.inputs[i][-len(RELEVANCE_FEATURES) :])
        )
    unoffered = data.inputs[:, task.n_features + RELEVANCE_FEATURES.index("unoffered_share")]
    assert unoffered.max() > 0  # the file has calls to a tool that was not offered


def test_a_raw_columns_calibrator_reads_the_inputs_in_evaluation(tmp_path: Path) -> None:
    task = relevance_task()
    data = eval_arrays(task, read_samples(_samples_file(tmp_path, n=12)), alpha=0.1)

    class Raw(RecordingCalibrator):
        reads_raw_columns = True

        def set_params(self, **params: object) -> Raw:
            return self

    X, _, kind = calibrator_inputs(data, lambda: Raw(task.n_inputs))
    assert kind == "inputs" and X is data.inputs
    X, _, kind = calibrator_inputs(data, lambda: make_calibrator("matrix"))
    assert kind == "features" and X is data.X  # the other maps read what they read before


def test_adaptive_n_refuses_a_task_that_reads_relevance() -> None:
    with pytest.raises(ConfigurationError, match="reads the relevance features"):
        check_adaptive(relevance_task(), "TaskCalibratedRunnable")


def test_an_artefact_is_evaluated_held_out_as_it_is_served(tmp_path: Path) -> None:
    # Fitted on one file (train), scored on another (held out): mbr_artefact's actions
    # are the Decider's with that artefact on each held-out item, relevance inputs included.
    from taskcal_agents._files import write_json
    from taskcal_agents.decision._artefact import CalibratorArtefact
    from taskcal_agents.workflow import evaluate_samples, fit_artefact

    task = relevance_task()
    train = _samples_file(tmp_path / "train", n=120, seed=1)
    held = _samples_file(tmp_path / "held", n=45, seed=2)
    artefact, _ = fit_artefact(train, calibrator="logistic", task=task, alpha=0.1, cv_folds=0)
    path = write_json(artefact, tmp_path / "artefact.json")
    evaluation, _ = evaluate_samples(held, calibrators=(), folds=3, permutations=19, artefact=path)
    assert evaluation["meta"]["artefact"]["path"] == str(path)
    assert len(evaluation["meta"]["artefact"]["sha256"]) == 16
    row = next(r for r in evaluation["decoders"] if r["decoder"] == "mbr_artefact")
    assert row["inputs"] == "inputs" and not row.get("error")
    assert evaluation["permutation_test"]["calibrator"] == "artefact"
    loaded = CalibratorArtefact.load(path)
    decider = Decider(task, loaded.calibrator, alpha=loaded.alpha)
    samples = read_samples(held)
    acts = evaluation["items"]["actions"]["mbr_artefact"]
    for item_id, action in zip(evaluation["items"]["ids"], acts, strict=True):
        record = samples.records[item_id]
        decision = decider.decide(
            [message_from_dict(m) for m in record["samples"]],
            tool_names=record["tool_names"],
            context=GroundingContext(record["tools"], record["messages"]),
        )
        assert task.action_list[action] == decision.action, item_id


def test_the_runtime_features_are_those_of_the_offered_tools() -> None:
    # What item_relevance reads through the grounding context (name, description and
    # parameters of each offered tool) gives the features of the raw tool schemas.
    samples = [call("get_weather", city="Paris"), call("teleport"), AIMessage(content="No.")]
    labels = ["tool_call", None, None]
    request = "What's the weather in the city of Paris?"
    context = GroundingContext([WEATHER, BOOKING], [{"role": "user", "content": request}])
    got = item_relevance(relevance_task(), samples, labels, context)
    want = relevance_features(request, [WEATHER, BOOKING], samples, labels, modal_calls=1)
    assert got == pytest.approx(want)
    assert got is not None and got[-1] == pytest.approx(1 / 3)  # the Paris call, once of 3
    assert got is not None and got[0] == pytest.approx(2 / 3)  # "weather", "city" of 3
    assert got[1] == pytest.approx(1 / 3)  # only teleport was not offered
    assert item_relevance(tool_task(), samples, labels, context) is None
    with pytest.raises(ConfigurationError, match="need the request's tools and conversation"):
        item_relevance(relevance_task(), samples, labels, None)
