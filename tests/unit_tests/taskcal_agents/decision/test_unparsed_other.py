"""The ``unparsed: other`` policy end to end: belief, Decider, evaluation arrays, fit."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.messages import AIMessage, HumanMessage

from calibrators import DirichletCalibrator, MatrixScaling
from taskcal_agents._files import write_json
from taskcal_agents.decision import CalibratorArtefact
from taskcal_agents.decision import _presets as tasks
from taskcal_agents.decision._artefact import check_calibrator
from taskcal_agents.decision._belief import Belief
from taskcal_agents.decision._decider import Decider, decide_from_messages
from taskcal_agents.decision._task import Task
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.parsing._grounding import GroundingContext
from taskcal_agents.workflow import (
    EvalArrays,
    SampleSettings,
    SamplesStore,
    fit_calibrator,
    read_samples,
    run_sampling,
    sample_header,
)
from taskcal_agents.workflow._data import eval_arrays
from taskcal_agents.workflow._evaluate import evaluate_arrays
from taskcal_agents.workflow._fit import make_artefact
from tests.unit_tests.taskcal_agents.helpers.data import WEATHER  # get_weather(city) schema
from tests.unit_tests.taskcal_agents.helpers.workflow_fakes import (
    LABELS,
    FakeSampler,
    label_message,
    tool_items,
)

README_COST = [[0.0, 1.0, 2.0], [4.0, 0.0, 2.0], [4.0, 1.0, 0.0]]
CHATTER = "Sure! The Moon has no restaurants yet, but here is a nice place."


MOON = GroundingContext([WEATHER], [HumanMessage("Book me a table at a restaurant on the Moon.")])
"""The Moon request: the user names the Moon, so the sampled get_weather(city="Moon") is
grounded (the default tool_decision() grounds each call in the tools and conversation)."""


def moon_samples() -> list[AIMessage]:
    """One tool call and seven unparsed replies of eight (seen with Qwen2.5-Coder-0.5B)."""
    call = AIMessage(
        content="", tool_calls=[{"name": "get_weather", "args": {"city": "Moon"}, "id": "c1"}]
    )
    return [call] + [AIMessage(content=CHATTER)] * 7


class RecordingCalibrator:
    """A fitted stand-in that records its inputs and returns a fixed row."""

    def __init__(self, n_features: int, row: list[float]) -> None:
        self.n_classes_ = 3
        self.classes_ = np.arange(3)
        self.n_features_in_ = n_features
        self.row = row
        self.calls: list[np.ndarray] = []

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        self.calls.append(np.array(X))
        return np.array([self.row])


# --------------------------------------------------------------------------------------
# the runtime


def test_tool_decision_defaults_to_other() -> None:
    task = tasks.tool_decision()
    assert (task.unparsed, task.unparsed_evidence, task.n_features) == ("other", True, 4)


def test_moon_request_no_longer_calls_the_tool() -> None:
    other = tasks.tool_decision(cost=README_COST)
    decision = decide_from_messages(other, moon_samples(), context=MOON)
    assert (decision.n_samples, decision.n_unparsed, decision.fallback) == (8, 7, False)
    assert decision.probs["tool_call"] == pytest.approx((1.1 + 7 / 3) / 8.3)
    assert decision.probs["tool_call"] == pytest.approx(0.4137, abs=1e-4)
    assert decision.action != "tool_call"
    assert decision.action == "request_for_info"
    # Under "drop" one usable sample of eight looked like strong evidence.
    drop = tasks.tool_decision(cost=README_COST, unparsed="drop")
    dropped = decide_from_messages(drop, moon_samples(), context=MOON)
    assert dropped.probs["tool_call"] == pytest.approx(1.1 / 1.3)
    assert dropped.action == "tool_call"
    assert dropped.message is not None
    assert dropped.message.tool_calls[0]["args"] == {"city": "Moon"}


def test_all_unparsed_still_falls_back() -> None:
    task = tasks.tool_decision(cost=README_COST)
    calibrator = RecordingCalibrator(4, [1.0, 0.0, 0.0])
    decision = Decider(task, calibrator).decide([AIMessage(content=CHATTER)] * 4, context=MOON)
    assert decision.fallback
    assert decision.fallback_reason == "all 4 samples were unparsed by parser 'tool_decision'"
    assert decision.action == task.fallback_action == "request_for_info"
    assert calibrator.calls == []


def test_decider_feeds_a_k_plus_1_calibrator_the_belief_features() -> None:
    task = tasks.tool_decision(cost=README_COST)
    calibrator = RecordingCalibrator(4, [0.1, 0.1, 0.8])
    decision = Decider(task, calibrator, alpha=0.1).decide(moon_samples(), context=MOON)
    np.testing.assert_allclose(calibrator.calls[0], [[1.1 / 8.4, 0.1 / 8.4, 0.1 / 8.4, 7.1 / 8.4]])
    assert decision.calibrated == pytest.approx(
        {"tool_call": 0.1, "request_for_info": 0.1, "cannot_answer": 0.8}
    )
    assert decision.action == "cannot_answer"
    # The decision's probs stay the k-label raw belief.
    assert list(decision.probs) == list(task.labels)
    assert decision.probs["tool_call"] == pytest.approx((1.1 + 7 / 3) / 8.3)


def test_decider_feeds_a_k_calibrator_the_raw_belief_under_other() -> None:
    task = tasks.tool_decision(cost=README_COST)
    calibrator = RecordingCalibrator(3, [0.2, 0.5, 0.3])
    Decider(task, calibrator, alpha=0.1).decide(moon_samples(), context=MOON)
    spread = 7 / 3
    np.testing.assert_allclose(
        calibrator.calls[0], [[(1.1 + spread) / 8.3, (0.1 + spread) / 8.3, (0.1 + spread) / 8.3]]
    )


def test_decider_with_a_real_k_plus_1_calibrator() -> None:
    """A matrix-scaling map fitted where mostly-unparsed beliefs mean cannot_answer."""
    task = tasks.tool_decision(cost=README_COST)
    rng = np.random.default_rng(0)
    beliefs = []
    y = []
    for i in range(600):
        label = i % 3
        unparsed = rng.binomial(8, 0.8 if label == 2 else 0.1)
        parsed = rng.choice(3, size=8 - unparsed, p=np.where(np.arange(3) == label, 0.7, 0.15))
        beliefs.append(
            task.belief_from_labels([LABELS[j] for j in parsed] + [None] * unparsed).features
        )
        y.append(label)
    calibrator = MatrixScaling(n_classes=3).fit(np.array(beliefs), np.array(y))
    decider = Decider(task, calibrator)
    decision = decider.decide(moon_samples(), context=MOON)
    assert decision.calibrated["cannot_answer"] > 0.5
    assert decision.action == "cannot_answer"
    confident = decider.decide(moon_samples()[:1] * 8, context=MOON)
    assert confident.action == "tool_call"


def test_check_calibrator_input_width() -> None:
    other = tasks.tool_decision(cost=README_COST)
    drop = tasks.tool_decision(cost=README_COST, unparsed="drop")
    check_calibrator(other, RecordingCalibrator(3, [1, 0, 0]))
    check_calibrator(other, RecordingCalibrator(4, [1, 0, 0]))
    check_calibrator(drop, RecordingCalibrator(3, [1, 0, 0]))
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "calibrator RecordingCalibrator was fitted on 5 input columns but task "
            "'tool_decision' (unparsed: other) feeds it 3 (p̂) or 4 (p̂'s counts plus the "
            "unparsed share), or 10 (with the relevance features); fit the calibrator on this "
            "task's beliefs."
        ),
    ):
        Decider(other, RecordingCalibrator(5, [1, 0, 0]))
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "calibrator RecordingCalibrator was fitted on 4 input columns but task "
            "'tool_decision' (unparsed: drop) feeds it 3 (p̂; 4 inputs, with the unparsed "
            "share, need the task's unparsed: other policy), or 9 (with the relevance "
            "features); fit the calibrator on this task's beliefs."
        ),
    ):
        Decider(drop, RecordingCalibrator(4, [1, 0, 0]))


def test_decide_belief_needs_features_for_a_k_plus_1_calibrator() -> None:
    task = tasks.tool_decision(cost=README_COST)
    decider = Decider(task, RecordingCalibrator(4, [1, 0, 0]))
    belief = Belief([2, 0, 0], task.labels, n_unparsed=1)
    # The message now names the feature widths (grounded features add a column of their own).
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "calibrator RecordingCalibrator for task 'tool_decision' reads 4 belief features, "
            "but the belief Belief(counts={'tool_call': 2.0, 'request_for_info': 0.0, "
            "'cannot_answer': 0.0}, n=3, n_unparsed=1, alpha=0.1) has 3; build it with the "
            "task's rule (task.belief_from_outcomes(task.sample_outcomes(labels, ungrounded)))."
        ),
    ):
        decider.decide_belief(belief)
    flagged = Belief([2, 0, 0], task.labels, n_unparsed=1, unparsed_evidence=True)
    # The task sends only grounded calls: the decision takes one grounding per sample (none).
    decision = decider.decide_belief(flagged, groundings=[])
    assert decision.calibrated["tool_call"] == 1.0
    np.testing.assert_allclose(decider.calibrator.calls[0], [flagged.features])


# --------------------------------------------------------------------------------------
# the workflow


class UnparsedSampler(FakeSampler):
    """Weak label signal; cannot_answer requests are mostly answered with unparsed text."""

    def sample(self, messages: Any, *, n: int, temperature: float, **kw: Any) -> list[AIMessage]:
        out = super().sample(messages, n=n, temperature=temperature, **kw)
        truth = str(messages[-1]["content"]).rsplit("truth=", 1)[-1]
        if temperature == 0:
            return out
        rate = 0.6 if truth == "cannot_answer" else 0.1
        seed = int(hashlib.sha256(str(messages[-1]["content"]).encode()).hexdigest()[:8], 16)
        rng = np.random.default_rng(seed)
        return [label_message(None) if rng.random() < rate else m for m in out]


def _sampled(tmp_path: Path, n: int = 240) -> Path:
    task = tasks.tool_decision(cost=README_COST, name="when2call")
    settings = SampleSettings(n=8)
    path = tmp_path / "s.jsonl"
    with SamplesStore.open(path, sample_header(task, settings, None)) as store:
        run_sampling(
            task, tool_items(n), UnparsedSampler(signal=0.3, unparsed=0.0), store, settings
        )
    return path


def _task(unparsed: str) -> Task:
    return tasks.tool_decision(cost=README_COST, name="when2call", unparsed=unparsed)


def test_eval_arrays_under_other(tmp_path: Path) -> None:
    samples = read_samples(_sampled(tmp_path, n=30))
    data = eval_arrays(_task("other"), samples, alpha=0.1)
    assert data.P.shape == (30, 3)
    assert data.X is not None
    assert data.X.shape == (30, 4)
    np.testing.assert_allclose(data.X.sum(axis=1), 1.0)
    record = samples.records[data.ids[0]]
    belief = _task("other").belief_from_labels(record["labels"], alpha=0.1)
    np.testing.assert_allclose(data.X[0], belief.features)
    np.testing.assert_allclose(data.P[0], belief.probs)
    dropped = eval_arrays(_task("drop"), samples, alpha=0.1)
    assert dropped.X is None
    assert not np.allclose(dropped.P, data.P)


def test_eval_arrays_x_shape_is_validated() -> None:
    P = np.full((2, 3), 1 / 3)
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "EvalArrays are inconsistent: X must have shape (n, d) with d > k = 3 (the belief "
            "features: counts plus the unparsed or ungrounded shares) and n = 2, got (2, 3)."
        ),
    ):
        EvalArrays(
            P=P,
            y=np.array([0, 1]),
            cost=np.array(README_COST),
            labels=LABELS,
            actions=LABELS,
            greedy=np.array([0, 1]),
            no_sample=np.zeros(2, dtype=bool),
            fallback=1,
            X=P,
        )


def test_evaluation_fits_extra_column_maps_on_the_features(tmp_path: Path) -> None:
    samples = read_samples(_sampled(tmp_path))
    data = eval_arrays(_task("other"), samples)
    evaluation = evaluate_arrays(
        data, calibrators=("temperature", "matrix", "dirichlet"), n_permutations=0
    )
    rows = {row["decoder"]: row for row in evaluation.rows}
    assert rows["mbr_matrix"]["inputs"] == rows["mbr_dirichlet"]["inputs"] == "features"
    assert rows["mbr_temperature"]["inputs"] == "probs"
    assert rows["mbr_matrix"]["description"] == (
        "MBR on the matrix-calibrated belief (reads the unparsed share)"
    )
    assert rows["mbr_temperature"]["description"] == (
        "MBR on the temperature-calibrated belief (reads p̂ only: this map needs one input "
        "column per label)"
    )
    assert all(row["error"] is None for row in evaluation.rows)
    assert evaluation.probs["matrix"].shape == (240, 3)
    # The unparsed share carries the label here, so the map that reads it beats the same
    # map on the belief without it (both cross-fitted on the same folds).
    without = evaluate_arrays(
        eval_arrays(_task("drop"), samples), calibrators=("matrix",), n_permutations=0
    )
    assert without.row("mbr_matrix")["inputs"] == "probs"
    assert rows["mbr_matrix"]["nll"] < without.row("mbr_matrix")["nll"] - 0.05
    assert rows["mbr_matrix"]["expected_cost"] <= without.row("mbr_matrix")["expected_cost"]


def test_permutation_test_reads_the_features(tmp_path: Path) -> None:
    samples = read_samples(_sampled(tmp_path, n=60))
    data = eval_arrays(_task("other"), samples)
    evaluation = evaluate_arrays(
        data, calibrators=(), n_permutations=3, test_calibrator="dirichlet:reg_lambda=0.01"
    )
    assert evaluation.permutation is not None
    assert len(evaluation.permutation.null) == 3


def test_fit_on_features_and_decide_with_the_artefact(tmp_path: Path) -> None:
    samples = read_samples(_sampled(tmp_path, n=90))
    task = _task("other")
    data = eval_arrays(task, samples)
    calibrator, metrics = fit_calibrator(data, "dirichlet", params={"reg_lambda": 0.01})
    assert isinstance(calibrator, DirichletCalibrator)
    assert metrics["inputs"] == "features"
    assert (calibrator.n_features_in_, calibrator.n_classes_) == (4, 3)
    assert metrics["crossval"]["folds"] == 5
    temperature, t_metrics = fit_calibrator(data, "temperature", cv_folds=0)
    assert (t_metrics["inputs"], temperature.n_features_in_) == ("probs", 3)
    artefact = make_artefact(
        task_name=task.name,
        labels=task.labels,
        actions=task.action_list,
        alpha=0.1,
        calibrator_name="dirichlet",
        calibrator=calibrator,
        fit_metrics=metrics,
        task_spec=task.model_dump(mode="json"),
    )
    read = CalibratorArtefact.load(write_json(artefact, tmp_path / "cal.json"))
    read.check_for(labels=task.labels)
    assert read.task == task and read.to_dict()["task_spec"]["unparsed"] == "other"
    loaded = read.calibrator
    np.testing.assert_allclose(loaded.predict_proba(data.X), calibrator.predict_proba(data.X))
    decision = Decider(task, loaded).decide(moon_samples(), context=MOON)
    assert sum(decision.calibrated.values()) == pytest.approx(1.0)
    with pytest.raises(ConfigurationError, match=r"fitted on 4 input columns"):
        Decider(_task("drop"), loaded)
