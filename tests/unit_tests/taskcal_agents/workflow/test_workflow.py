from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from langchain_core.messages import AIMessage

import taskcal_agents.workflow as wf
from taskcal_agents._files import write_json
from taskcal_agents.datasets import DatasetItem
from taskcal_agents.decision import CalibratorArtefact
from taskcal_agents.decision import _presets as tasks
from taskcal_agents.errors import ConfigurationError, DataFileError, LabelMismatchError
from taskcal_agents.workflow import (
    EvalArrays,
    SampleSettings,
    SamplesStore,
    fit_calibrator,
    read_samples,
    run_sampling,
    sample_header,
    write_report,
)
from taskcal_agents.workflow import _report as _report
from taskcal_agents.workflow._calibrator_specs import (
    default_factory,
    parse_calibrator_spec,
)
from taskcal_agents.workflow._crossfit import in_fold_prior, stratified_folds
from taskcal_agents.workflow._data import eval_arrays, resolve_task
from taskcal_agents.workflow._evaluate import evaluate_arrays
from taskcal_agents.workflow._evaluation_json import evaluation_to_dict
from taskcal_agents.workflow._fit import make_artefact
from taskcal_agents.workflow._permutation import permutation_test
from taskcal_agents.workflow._report import load_evaluation
from taskcal_agents.workflow._runner import (
    build_messages,
    grade_item,
    message_from_dict,
    message_to_dict,
)
from taskcal_agents.workflow._scores import score_actions
from tests.unit_tests.taskcal_agents.helpers.workflow_fakes import (
    WHEN2CALL_COST,
    FakeSampler,
    QASampler,
    ScriptedSampler,
    _sampled,
    tool_items,
    tool_task,
)

COST = np.array(WHEN2CALL_COST)


def test_exports_match_public_names() -> None:
    assert set(wf.__all__) == set(wf._EXPORTS)


# --------------------------------------------------------------------------------------
# synthetic arrays


def _arrays(
    n: int = 300, signal: float = 0.0, seed: int = 0, k: int = 3, **kw: object
) -> EvalArrays:
    """Beliefs from 16 samples; with probability *signal* a sample names the truth."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % k
    counts = np.zeros((n, k))
    for i in range(n):
        for _ in range(16):
            j = y[i] if rng.random() < signal else rng.integers(k)
            counts[i, j] += 1
    P = (counts + 0.1) / (counts + 0.1).sum(axis=1, keepdims=True)
    fields: dict[str, object] = {
        "P": P,
        "y": y.astype(np.intp),
        "cost": COST[:k, :k],
        "labels": ("tool_call", "request_for_info", "cannot_answer")[:k],
        "actions": ("tool_call", "request_for_info", "cannot_answer")[:k],
        "greedy": np.argmax(P, axis=1).astype(np.intp),
        "no_sample": np.zeros(n, dtype=bool),
        "fallback": 1,
        "ids": tuple(f"i{i}" for i in range(n)),
    }
    fields.update(kw)
    return EvalArrays(**fields)  # type: ignore[arg-type]


def test_stratified_folds_balanced_and_seeded() -> None:
    y = np.array([0] * 50 + [1] * 30 + [2] * 7)
    folds = stratified_folds(y, 5, seed=3)
    assert np.array_equal(folds, stratified_folds(y, 5, seed=3))
    assert not np.array_equal(folds, stratified_folds(y, 5, seed=4))
    sizes = np.bincount(folds, minlength=5)
    assert sizes.max() - sizes.min() <= 1
    for label in range(3):
        per_fold = np.bincount(folds[y == label], minlength=5)
        assert per_fold.max() - per_fold.min() <= 1
    msg = "folds must be between 2 and the number of items (3), got 5."
    with pytest.raises(ConfigurationError, match=re.escape(msg)):
        stratified_folds(np.array([0, 1, 2]), 5, seed=0)


def test_in_fold_prior_uses_other_folds_only() -> None:
    y = np.array([0, 0, 1, 1])
    folds = np.array([0, 1, 0, 1])
    prior = in_fold_prior(y, folds, 3)
    np.testing.assert_allclose(prior[0], np.array([1.5, 1.5, 0.5]) / 3.5)
    np.testing.assert_allclose(prior.sum(axis=1), 1.0)


def test_best_constant_for_balanced_when2call_is_ask() -> None:
    data = _arrays(n=300, signal=0.0)
    evaluation = evaluate_arrays(data, calibrators=(), n_permutations=0)
    row = evaluation.row("constant")
    assert row["action_counts"] == {"tool_call": 0, "request_for_info": 300, "cannot_answer": 0}
    assert row["expected_cost"] == pytest.approx(2 / 3)
    assert row["accuracy"] == pytest.approx(1 / 3)


def test_uninformative_beliefs_calibrated_mbr_falls_back_to_constant() -> None:
    data = _arrays(n=300, signal=0.0, seed=1)
    evaluation = evaluate_arrays(
        data,
        calibrators=("temperature", "dirichlet"),
        n_permutations=99,
        seed=0,
        test_calibrator="temperature",
    )
    constant = evaluation.row("constant")["expected_cost"]
    assert evaluation.row("majority")["expected_cost"] > constant + 0.3
    for name in ("mbr_temperature", "mbr_dirichlet"):
        row = evaluation.row(name)
        assert abs(row["expected_cost"] - constant) <= 2 * row["cost_se"]
    assert evaluation.permutation is not None
    assert evaluation.permutation.p_value > 0.05


def test_informative_beliefs_beat_constant_and_test_detects_it() -> None:
    data = _arrays(n=300, signal=0.5, seed=2)
    fixed = "dirichlet:reg_lambda=0.1:reg_mu=0.1"  # the auto default costs 8x per fit
    evaluation = evaluate_arrays(
        data, calibrators=("dirichlet",), n_permutations=49, seed=0, test_calibrator=fixed
    )
    assert evaluation.row("mbr_dirichlet")["expected_cost"] < (
        evaluation.row("constant")["expected_cost"] - 0.3
    )
    test = evaluation.permutation
    assert test is not None
    assert test.statistic > 0.3
    assert test.p_value == pytest.approx(1 / 50)
    assert len(test.null) == 49
    assert max(test.null) < test.statistic


def test_permutation_test_is_seeded() -> None:
    data = _arrays(n=120, signal=0.1, seed=5)
    make = default_factory("temperature")
    a = permutation_test(data, make, calibrator="temperature", n_permutations=20, seed=1)
    b = permutation_test(data, make, calibrator="temperature", n_permutations=20, seed=1)
    assert a.null == b.null
    assert a.p_value == b.p_value


def test_decoder_rows_and_columns() -> None:
    data = _arrays(n=90, signal=0.4, seed=3)
    evaluation = evaluate_arrays(data, n_permutations=0)
    names = [r["decoder"] for r in evaluation.rows]
    assert names == [
        "constant",
        "greedy",
        "majority",
        "mbr_raw",
        "mbr_temperature",
        "mbr_vector",
        "mbr_matrix",
        "mbr_dirichlet",
        "mbr_isotonic",
        "mbr_histogram",
        "argmax_dirichlet",
    ]
    for row in evaluation.rows:
        assert row["error"] is None
        assert 0 <= row["accuracy"] <= 1
        assert sum(row["action_counts"].values()) == 90
    assert evaluation.row("greedy")["nll"] is None
    assert evaluation.row("majority")["nll"] == evaluation.row("mbr_raw")["nll"]
    assert np.array_equal(evaluation.actions["majority"], np.argmax(data.P, axis=1))
    for name in ("raw", "constant", "dirichlet", "isotonic"):
        np.testing.assert_allclose(evaluation.probs[name].sum(axis=1), 1.0)
    assert evaluation.permutation is None


def test_score_actions_brute_force() -> None:
    data = _arrays(n=30, signal=0.3, seed=4)
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 3, 30)
    row = score_actions(actions, data)
    assert row["expected_cost"] == pytest.approx(
        np.mean([COST[y, a] for y, a in zip(data.y, actions, strict=True)])
    )
    assert row["accuracy"] == pytest.approx(np.mean(actions == data.y))
    f1s = []
    for c in range(3):
        tp = np.sum((actions == c) & (data.y == c))
        fp = np.sum((actions == c) & (data.y != c))
        fn = np.sum((actions != c) & (data.y == c))
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    assert row["macro_f1"] == pytest.approx(np.mean(f1s))


def test_fallback_for_items_without_samples_and_unparsed_greedy() -> None:
    no_sample = np.zeros(60, dtype=bool)
    no_sample[:10] = True
    greedy = np.full(60, 0, dtype=np.intp)
    greedy[:5] = -1
    data = _arrays(n=60, signal=0.9, seed=6, no_sample=no_sample, greedy=greedy)
    evaluation = evaluate_arrays(data, calibrators=("temperature",), n_permutations=0)
    for name in ("majority", "mbr_raw", "mbr_temperature"):
        assert np.all(evaluation.actions[name][:10] == 1)
    assert np.all(evaluation.actions["greedy"][:5] == 1)
    assert np.all(evaluation.actions["greedy"][5:] == 0)


def test_labels_that_are_not_actions_skip_greedy_and_majority() -> None:
    base = _arrays(n=40, k=2, signal=0.5, seed=7)
    data = EvalArrays(
        P=base.P,
        y=base.y,
        cost=np.array([[0.0, 1.0, 0.5], [3.0, 0.0, 0.5]]),
        labels=("good", "bad"),
        actions=("go", "stop", "ask"),
        greedy=base.greedy,
        no_sample=base.no_sample,
        fallback=2,
    )
    evaluation = evaluate_arrays(data, calibrators=("temperature",), n_permutations=0)
    assert [r["decoder"] for r in evaluation.rows] == ["constant", "mbr_raw", "mbr_temperature"]
    assert evaluation.row("mbr_raw")["accuracy"] is None


def test_failing_calibrator_gets_an_error_row() -> None:
    def factory(name: str):  # type: ignore[no-untyped-def]
        if name == "broken":

            def make():  # type: ignore[no-untyped-def]
                raise RuntimeError("optimiser failed")

            return make
        return default_factory(name)

    data = _arrays(n=60, signal=0.3)
    evaluation = evaluate_arrays(
        data, calibrators=("broken", "temperature"), n_permutations=0, factory=factory
    )
    assert evaluation.row("mbr_broken")["error"] == "RuntimeError: optimiser failed"
    assert evaluation.row("mbr_temperature")["error"] is None


def test_eval_arrays_are_validated() -> None:
    with pytest.raises(ConfigurationError, match=r"^EvalArrays are inconsistent: cost has shape"):
        _arrays(n=10, cost=np.zeros((2, 2)))
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "EvalArrays are inconsistent: fallback must be an action index in [0, 3), got 7."
        ),
    ):
        _arrays(n=10, fallback=7)


def test_negative_permutations_rejected() -> None:
    with pytest.raises(ConfigurationError, match=re.escape("permutations must be >= 0, got -1.")):
        evaluate_arrays(_arrays(n=30), n_permutations=-1)


def test_zero_jobs_rejected() -> None:
    msg = "jobs must be a number of processes >= 1, or negative (-1: all cores), got 0."
    with pytest.raises(ConfigurationError, match=re.escape(msg)):
        evaluate_arrays(_arrays(n=30), n_permutations=2, n_jobs=0)


def test_parallel_shuffles_give_the_same_test() -> None:
    data = _arrays(n=60, signal=0.2, seed=4)
    make = default_factory("temperature")
    serial = permutation_test(data, make, calibrator="temperature", n_permutations=6, seed=2)
    ticks: list[int] = []
    parallel = permutation_test(
        data,
        make,
        calibrator="temperature",
        n_permutations=6,
        seed=2,
        n_jobs=2,
        progress=ticks.append,
    )
    assert parallel.null == serial.null
    assert parallel.p_value == serial.p_value
    assert ticks == [1] * 6


# The default evaluation at commit 1db30a0 (L-BFGS-B solver) of _arrays(150, 0.2, seed=7) with
# 2 shuffles; decoder: (expected_cost, nll, brier, ece, tce).
PINNED_EVALUATION = {
    "constant": (0.6666667, 1.0986123, 0.6666667, 0.0, 0.0),
    "greedy": (0.6733333, None, None, None, None),
    "majority": (0.6733333, 0.7988052, 0.4639793, 0.2625767, 0.1533333),
    "mbr_raw": (0.62, 0.7988052, 0.4639793, 0.2625767, 0.1533333),
    "mbr_temperature": (0.46, 0.6696185, 0.3624868, 0.0996489, 0.0),
    "mbr_vector": (0.4733333, 0.6880916, 0.3649947, 0.0819515, 0.0133333),
    "mbr_matrix": (0.4866667, 0.7048210, 0.3698079, 0.0567751, -0.04),
    "mbr_dirichlet": (0.4533333, 0.6714047, 0.3626189, 0.0965439, -0.0333333),
    "mbr_isotonic": (0.4666667, 1.1302362, 0.3700860, 0.0872345, -0.1533333),
    "mbr_histogram": (0.5333333, 1.4875440, 0.3931299, 0.0929293, -0.0933333),
}


def test_evaluation_matches_the_pinned_lbfgs_evaluation() -> None:
    """The solver changed (Newton's method); the evaluation and its test must not.

    The Dirichlet folds here pick reg_mu = 1, where L-BFGS-B needed hundreds of steps.
    """
    evaluation = evaluate_arrays(_arrays(n=150, signal=0.2, seed=7), n_permutations=2)
    for decoder, expected in PINNED_EVALUATION.items():
        row = evaluation.row(decoder)
        got = tuple(row[key] for key in ("expected_cost", "nll", "brier", "ece", "tce"))
        assert got == pytest.approx(expected, abs=1e-4), decoder
    test = evaluation.permutation
    assert test is not None
    assert test.statistic == pytest.approx(0.2133333, abs=1e-6)
    assert test.null == pytest.approx([0.0, 0.0066667], abs=1e-6)
    assert test.p_value == pytest.approx(1 / 3)
    chosen = [(c.reg_lambda_, c.reg_mu_) for c in evaluation.calibrators["dirichlet"].values()]
    assert chosen == [(10.0, 1.0), (1.0, 1.0), (10.0, 1.0), (10.0, 1.0), (10.0, 1.0)]


# --------------------------------------------------------------------------------------
# messages and grading


def test_message_round_trip() -> None:
    message = AIMessage(
        content="hi",
        tool_calls=[{"name": "f", "args": {"a": [1, 2]}, "id": "c"}],
        response_metadata={"finish_reason": "tool_calls"},
    )
    data = message_to_dict(message)
    assert json.loads(json.dumps(data)) == data
    assert data["finish_reason"] == "tool_calls"
    back = message_from_dict(data)
    assert back.content == "hi"
    assert back.tool_calls == [{"name": "f", "args": {"a": [1, 2]}, "id": "c", "type": "tool_call"}]


def test_build_messages_merges_the_task_prompt_once() -> None:
    item = tool_items(1)[0]
    assert build_messages(tool_task(prompt=None), item) == item.messages
    task = tool_task(prompt="Decide.")
    assert build_messages(task, item) == [{"role": "system", "content": "Decide."}, *item.messages]
    with_system = item.model_copy(
        update={"messages": [{"role": "system", "content": "own"}, *item.messages]}
    )
    # an item's own system message keeps the task prompt too (it used to be dropped)
    assert build_messages(task, with_system) == [
        {"role": "system", "content": "own\n\nDecide."},
        *item.messages,
    ]
    assert with_system.messages[0] == {"role": "system", "content": "own"}


# --------------------------------------------------------------------------------------
# runner


def test_run_sampling_records_and_resume(tmp_path: Path) -> None:
    task, items = tool_task(), tool_items(12)
    settings = SampleSettings(n=8, temperature=1.0, max_tokens=32, model="fake")
    path = tmp_path / "s.jsonl"
    sampler = FakeSampler(fail_ids=["item-004"])
    seen: list[object] = []
    with SamplesStore.open(path, sample_header(task, settings, "d.jsonl")) as store:
        report = run_sampling(
            task, items, sampler, store, settings, concurrency=3, on_record=seen.append
        )
    assert (report.total, report.skipped, report.written) == (12, 0, 11)
    assert [f[0] for f in report.failures] == ["item-004"]
    assert report.failures[0][1] == (
        "sampling item 'item-004' failed: ConnectionError: connection refused"
    )
    assert len(seen) == 12 and seen.count(None) == 1
    samples = read_samples(path)
    assert samples.settings["n"] == 8
    assert samples.header["dataset"] == "d.jsonl"
    record = samples.records["item-000"]
    assert record["label"] == "tool_call"
    assert len(record["labels"]) == len(record["samples"]) == 8
    assert record["greedy_label"] == "tool_call"
    assert record["greedy"]["tool_calls"][0]["name"] == "lookup"
    assert {c["n"] for c in sampler.calls} == {8, 1}
    assert {c["temperature"] for c in sampler.calls} == {1.0, 0.0}
    assert all(c["tools"] == items[0].tools for c in sampler.calls)
    # the rerun only samples the failed item
    sampler2 = FakeSampler()
    with SamplesStore.open(path, sample_header(task, settings, "d.jsonl")) as store:
        report = run_sampling(task, items, sampler2, store, settings)
    assert (report.skipped, report.written, report.failures) == (11, 1, [])
    assert len(sampler2.calls) == 2
    assert len(read_samples(path).records) == 12


def test_run_sampling_counts_unparsed_reasons_and_length_cuts(tmp_path: Path) -> None:
    task, items = tool_task(), tool_items(3)
    settings = SampleSettings(n=8, temperature=1.0, max_tokens=16, model="fake")
    with SamplesStore.open(tmp_path / "s.jsonl", sample_header(task, settings, None)) as store:
        report = run_sampling(task, items, ScriptedSampler(), store, settings)
    record = read_samples(tmp_path / "s.jsonl").records["item-000"]
    assert record["labels"] == [
        "tool_call", "tool_call", None, None, None, None, None, "request_for_info",
    ]  # fmt: skip
    assert record["unparsed_reasons"] == {"unoffered_tool": 2, "length": 1, "empty": 1, "other": 1}
    assert record["greedy_label"] == "tool_call"
    assert record["tool_names"] == ["lookup"]
    assert record["samples"][1]["finish_reason"] == "length"
    assert (report.n_samples, report.n_length) == (24, 12)
    assert report.length_share == 0.5
    assert report.unparsed_reasons == {"unoffered_tool": 6, "length": 3, "empty": 3, "other": 3}


def test_message_from_dict_restores_finish_reason() -> None:
    message = AIMessage(content="cut", response_metadata={"finish_reason": "length"})
    assert message_from_dict(message_to_dict(message)).response_metadata == {
        "finish_reason": "length"
    }
    assert message_from_dict({"content": "x"}).response_metadata == {}


def test_logprob_belief_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    import taskcal_agents.workflow._runner as runner_mod

    calls: list[dict[str, object]] = []

    def fake_belief(sampler, messages, choices, **options):  # type: ignore[no-untyped-def]
        calls.append({"choices": choices, **options})
        truth = str(messages[-1]["content"]).rsplit("truth=", 1)[-1]
        probs = np.full(3, 0.2)
        probs[["tool_call", "request_for_info", "cannot_answer"].index(truth)] = 0.6
        return SimpleNamespace(probs=probs, coverage=0.99, requests=1, unresolved_mass=0.0)

    monkeypatch.setattr(runner_mod, "_logprob_belief", fake_belief)
    task, items = tool_task(), tool_items(30)
    settings = SampleSettings(n=16, belief="logprob", choices=("call", "ask", "refuse"))
    path = tmp_path / "s.jsonl"
    with SamplesStore.open(path, sample_header(task, settings, None)) as store:
        report = run_sampling(task, items, FakeSampler(), store, settings)
    assert report.written == 30
    # A rerun with the same choices resumes (the header holds them as a JSON list).
    with SamplesStore.open(path, sample_header(task, settings, None)) as store:
        assert len(store.done) == 30
    assert calls[0]["choices"] == ["call", "ask", "refuse"]
    assert calls[0]["temperature"] == 1.0
    samples = read_samples(path)
    record = samples.records["item-001"]
    assert record["samples"] == [] and record["labels"] == []
    assert record["probs"] == pytest.approx([0.2, 0.6, 0.2])
    assert record["logprob"] == {"coverage": 0.99, "requests": 1, "unresolved_mass": 0.0}
    assert record["greedy_label"] == "request_for_info"
    data = eval_arrays(resolve_task(samples, None), samples, alpha=0.1)
    expected = (np.array([0.2, 0.6, 0.2]) * 16 + 0.1) / (16 + 0.3)
    np.testing.assert_allclose(data.P[1], expected)
    assert not data.no_sample.any()
    # A one-pass belief has no sample to carry out a tool call: like the runtime, every
    # MBR decoder takes another action there; the other items are all decided right.
    assert not data.executable[:, 0].any() and data.executable[:, 1:].all()
    evaluation = evaluate_arrays(data, calibrators=("temperature",), n_permutations=0)
    row = evaluation.row("mbr_temperature")
    assert row["action_counts"]["tool_call"] == 0
    is_tool = data.y == 0
    assert is_tool.any()
    np.testing.assert_array_equal(evaluation.actions["mbr_temperature"][~is_tool], data.y[~is_tool])
    msg = (
        "SampleSettings parameter 'choices' must give one string per task label "
        "['tool_call', 'request_for_info', 'cannot_answer'], got ['a', 'b']."
    )
    bad = SampleSettings(belief="logprob", choices=("a", "b"))
    store = SamplesStore.open(tmp_path / "t.jsonl", sample_header(task, bad, None))
    with store, pytest.raises(ConfigurationError, match=re.escape(msg)):
        run_sampling(task, items, FakeSampler(), store, bad)
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "SampleSettings parameter 'belief' must be 'samples' or 'one_pass', got 'x'."
        ),
    ):
        SampleSettings(belief="x")
    with pytest.raises(
        ConfigurationError, match=re.escape("it needs 'adaptive' (an epsilon), got adaptive=None")
    ):
        SampleSettings(adaptive_artefact="0123456789abcdef")


def test_run_sampling_keyboard_interrupt_keeps_finished_records(tmp_path: Path) -> None:
    class Interrupting(FakeSampler):
        def sample(self, messages, **kwargs):  # type: ignore[no-untyped-def, override]
            if "request 5 " in str(messages[-1]["content"]):
                raise KeyboardInterrupt
            return super().sample(messages, **kwargs)

    task, items = tool_task(), tool_items(12)
    settings = SampleSettings(n=2)
    path = tmp_path / "s.jsonl"
    with SamplesStore.open(path, sample_header(task, settings, None)) as store:
        report = run_sampling(task, items, Interrupting(), store, settings, concurrency=1)
    assert report.interrupted
    assert report.written == 5
    assert list(read_samples(path).records) == [f"item-{i:03d}" for i in range(5)]


def test_run_sampling_stops_after_max_failures(tmp_path: Path) -> None:
    task, items = tool_task(), tool_items(20)
    settings = SampleSettings(n=2)
    sampler = FakeSampler(fail_ids=[i.id for i in items])
    with SamplesStore.open(tmp_path / "s.jsonl", sample_header(task, settings, None)) as store:
        report = run_sampling(task, items, sampler, store, settings, concurrency=2, max_failures=3)
    assert report.interrupted
    assert 3 <= len(report.failures) < 20
    assert report.written == 0


def test_run_sampling_rejects_foreign_labels_and_bad_concurrency(tmp_path: Path) -> None:
    task = tool_task()
    settings = SampleSettings(n=2)
    bad = [DatasetItem(id="x", messages=[{"role": "user", "content": "q"}], label="A")]
    with SamplesStore.open(tmp_path / "s.jsonl", sample_header(task, settings, None)) as store:
        msg = (
            "item 'x' has label 'A', which is not one of task 'when2call''s labels "
            "['tool_call', 'request_for_info', 'cannot_answer']; use the task the data was "
            "written for."
        )
        with pytest.raises(ConfigurationError, match=re.escape(msg)):
            run_sampling(task, bad, FakeSampler(), store, settings)
        with pytest.raises(
            ConfigurationError, match=re.escape("concurrency must be an integer >= 1, got 0.")
        ):
            run_sampling(task, bad, FakeSampler(), store, settings, concurrency=0)


def test_sample_settings_validation() -> None:
    with pytest.raises(
        ConfigurationError,
        match=re.escape("SampleSettings parameter 'n' must be an integer >= 1, got 0."),
    ):
        SampleSettings(n=0)
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "SampleSettings parameter 'temperature' must be >= 0, got -1.0; use 1.0 for "
            "plain sampling."
        ),
    ):
        SampleSettings(temperature=-1.0)
    with pytest.raises(
        ConfigurationError, match="temperature 0 with n = 16 would draw 16 identical"
    ):
        SampleSettings(temperature=0.0)
    assert SampleSettings(n=1, temperature=0.0).n == 1
    assert SampleSettings(n=16, temperature=0.0, belief="logprob").temperature == 0.0


def test_graded_items(tmp_path: Path) -> None:
    task = tasks.answer_or_abstain()
    questions = {"Who wrote Hamlet?": "William Shakespeare wrote it.", "Capital of Peru?": "Quito"}
    items = [
        DatasetItem(
            id=f"q{i}",
            messages=[{"role": "user", "content": f"Answer.\n\nQuestion: {q}"}],
            meta={"references": [ref]},
        )
        for i, (q, ref) in enumerate(zip(questions, ["Shakespeare", "Lima"], strict=True))
    ]
    settings = SampleSettings(n=4)
    path = tmp_path / "s.jsonl"
    with SamplesStore.open(path, sample_header(task, settings, None)) as store:
        run_sampling(task, items, QASampler(questions), store, settings)
    records = read_samples(path).records
    assert records["q0"]["label"] == "answer"
    assert records["q0"]["grading"] == {
        "label": "answer",
        "answer": "William Shakespeare wrote it.",
        "from": "greedy",
        "correct": True,
        "references": ["Shakespeare"],
    }
    assert records["q1"]["label"] == "abstain"
    assert records["q1"]["grading"]["correct"] is False
    assert records["q0"]["labels"] == ["abstain", "answer", "abstain", "answer"]
    # graded items need an answer-or-abstain task
    with SamplesStore.open(
        tmp_path / "t.jsonl", sample_header(tool_task(), settings, None)
    ) as store:
        msg = (
            "task 'when2call' is not an answer-or-abstain task: graded items and answer "
            "clusters need the parser 'answer_or_abstain' (its answer and abstain labels among "
            "the task labels), got parser 'tool_decision' and labels ['tool_call', "
            "'request_for_info', 'cannot_answer']."
        )
        with pytest.raises(ConfigurationError, match=re.escape(msg)):
            run_sampling(tool_task(), items, QASampler(questions), store, settings)


def test_grading_falls_back_to_samples_when_greedy_abstains() -> None:
    task = tasks.answer_or_abstain()
    item = DatasetItem(
        id="q", messages=[{"role": "user", "content": "Q"}], meta={"references": ["Lima"]}
    )
    samples = [AIMessage(content=c) for c in ["Lima.", "I don't know.", "lima", "Quito"]]
    labels = [task.parse_completion(m) for m in samples]
    grading = grade_item(task, item, AIMessage(content="I don't know."), samples, labels)
    assert (grading["from"], grading["answer"], grading["label"]) == ("samples", "Lima.", "answer")
    none = grade_item(task, item, AIMessage(content="I don't know."), samples[1:2], labels[1:2])
    assert (none["from"], none["answer"], none["label"]) == (None, None, "abstain")


# --------------------------------------------------------------------------------------
# samples -> arrays -> fit -> artefact


def test_eval_arrays_from_samples(tmp_path: Path) -> None:
    path = _sampled(tmp_path)
    samples = read_samples(path)
    task = resolve_task(samples, None)
    assert task.name == "when2call"
    data = eval_arrays(task, samples, alpha=0.1)
    assert data.P.shape == (45, 3)
    np.testing.assert_allclose(data.P.sum(axis=1), 1.0)
    assert data.ids == tuple(f"item-{i:03d}" for i in range(45))
    assert list(data.y[:3]) == [0, 1, 2]
    assert data.fallback == 1
    again = eval_arrays(task, samples, alpha=0.1, reparse=True)
    np.testing.assert_allclose(again.P, data.P)
    np.testing.assert_array_equal(again.greedy, data.greedy)


def test_eval_arrays_unknown_label_names_file_and_line(tmp_path: Path) -> None:
    path = _sampled(tmp_path, n=6)
    lines = path.read_text().splitlines()
    record = json.loads(lines[3])
    record["label"] = "maybe"
    lines[3] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    samples = read_samples(path)
    msg = (
        f"{path}:4: record {record['id']!r} has label 'maybe', which is not one of task "
        "'when2call''s labels ['tool_call', 'request_for_info', 'cannot_answer']; evaluate "
        "with the sampling task."
    )
    with pytest.raises(DataFileError, match=re.escape(msg)):
        eval_arrays(resolve_task(samples, None), samples)


def test_resolve_task_refuses_another_task(tmp_path: Path) -> None:
    samples = read_samples(_sampled(tmp_path, n=6))
    other = tasks.answer_or_abstain()
    msg = (
        f"samples file {samples.path} was written for task 'when2call' with labels "
        "['tool_call', 'request_for_info', 'cannot_answer'], not for task 'answer_or_abstain' "
        "with labels ['answer', 'abstain']; pass the task the samples were drawn for."
    )
    with pytest.raises(LabelMismatchError, match=re.escape(msg)):
        resolve_task(samples, other)
    cheaper = tool_task(fallback_action="cannot_answer")
    assert resolve_task(samples, cheaper) is cheaper


def test_fit_artefact_round_trip(tmp_path: Path) -> None:
    samples = read_samples(_sampled(tmp_path))
    task = resolve_task(samples, None)
    data = eval_arrays(task, samples)
    calibrator, metrics = fit_calibrator(data, "dirichlet", params={"reg_lambda": 0.01})
    assert metrics["n"] == 45
    assert metrics["after"]["nll"] <= metrics["before"]["nll"] + 1e-9
    assert metrics["crossval"]["folds"] == 5
    artefact = make_artefact(
        task_name=task.name,
        labels=task.labels,
        actions=task.action_list,
        alpha=0.1,
        calibrator_name="dirichlet",
        calibrator=calibrator,
        fit_metrics=metrics,
    )
    path = write_json(artefact, tmp_path / "cal.json")
    read = CalibratorArtefact.load(path)
    read.check_for(task_name="when2call", labels=task.labels)
    loaded, info = read.calibrator, read.to_dict()
    assert info["format"] == "taskcal.calibrator"
    assert info["format_version"] == 1
    assert info["calibrator_name"] == "dirichlet"
    # tool_task() keeps unparsed samples as evidence: the map reads the k + 1 features.
    assert data.X is not None
    assert metrics["inputs"] == "features"
    np.testing.assert_allclose(loaded.predict_proba(data.X), calibrator.predict_proba(data.X))
    msg = (
        f"calibrator artefact {path} was fitted for task 'when2call', not for task 'rating'; "
        "fit one on samples of this task with `taskcal fit`."
    )
    with pytest.raises(LabelMismatchError, match=re.escape(msg)):
        CalibratorArtefact.load(path).check_for(task_name="rating")
    msg = (
        f"calibrator artefact {path} has labels ['tool_call', 'request_for_info', "
        "'cannot_answer'], but the task has labels ['a', 'b']; fit one on samples of this "
        "task with `taskcal fit`."
    )
    with pytest.raises(LabelMismatchError, match=re.escape(msg)):
        CalibratorArtefact.load(path).check_for(labels=["a", "b"])


def test_fit_rejects_unknown_calibrator(tmp_path: Path) -> None:
    samples = read_samples(_sampled(tmp_path, n=12))
    data = eval_arrays(resolve_task(samples, None), samples)
    with pytest.raises(
        ConfigurationError, match=r"^cannot make calibrator 'platt' with parameters \{\}: "
    ):
        fit_calibrator(data, "platt")
    calibrator, _ = fit_calibrator(data, "dirichlet:reg_lambda=auto", cv_folds=0)
    assert calibrator.reg_lambda == "auto"


def test_calibrator_specs() -> None:
    assert parse_calibrator_spec("dirichlet") == ("dirichlet", {})
    assert parse_calibrator_spec("dirichlet:reg_lambda=auto:reg_mu=0.01") == (
        "dirichlet",
        {"reg_lambda": "auto", "reg_mu": 0.01},
    )
    msg = (
        "calibrator spec 'dirichlet:auto': parameters must be key=value, got 'auto'; write "
        "e.g. 'dirichlet:reg_lambda=0.01'."
    )
    with pytest.raises(ConfigurationError, match=re.escape(msg)):
        parse_calibrator_spec("dirichlet:auto")
    data = _arrays(n=60, signal=0.4)
    evaluation = evaluate_arrays(data, calibrators=("dirichlet:reg_lambda=0.1",), n_permutations=0)
    assert evaluation.row("mbr_dirichlet:reg_lambda=0.1")["error"] is None
    with pytest.raises(ConfigurationError, match=r"^cannot make calibrator 'nope' with"):
        evaluate_arrays(data, calibrators=("nope",), n_permutations=0)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{", "calibrator artefact is not valid JSON: "),
        (
            '{"format": "other"}',
            "not a calibrator artefact: expected format 'taskcal.calibrator', got 'other'; "
            "write one with `taskcal fit`.",
        ),
        (
            '{"format": "taskcal.calibrator", "format_version": 7}',
            "format_version must be 1 or 2, got 7; refit with this version of taskcal.",
        ),
        (
            '{"format": "taskcal.calibrator", "format_version": 1, "calibrator": {}}',
            "calibrator artefact field 'calibrator' holds no valid calibrator: ",
        ),
    ],
)
def test_bad_artefacts(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "cal.json"
    path.write_text(content)
    with pytest.raises(
        DataFileError, match=re.escape(f"{path}") + r"(:\d+)?: " + re.escape(expected)
    ):
        CalibratorArtefact.load(path)


def test_missing_artefact(tmp_path: Path) -> None:
    path = tmp_path / "none.json"
    msg = f"{path}: calibrator artefact not found; write one with `taskcal fit` or check the path."
    with pytest.raises(DataFileError, match=re.escape(msg)):
        CalibratorArtefact.load(path)


# --------------------------------------------------------------------------------------
# evaluation JSON and report


def test_evaluation_json_and_report(tmp_path: Path) -> None:
    data = _arrays(n=60, signal=0.4, seed=8)
    evaluation = evaluate_arrays(data, calibrators=("temperature", "dirichlet"), n_permutations=9)
    out = evaluation_to_dict(
        evaluation,
        data,
        task={
            "name": "t",
            "labels": list(data.labels),
            "actions": list(data.actions),
            "cost": data.cost.tolist(),
        },
    )
    text = json.dumps(out)
    back = json.loads(text)
    assert back["format"] == "taskcal.evaluation"
    assert [d["decoder"] for d in back["decoders"]][:4] == [
        "constant",
        "greedy",
        "majority",
        "mbr_raw",
    ]
    assert back["permutation_test"]["n_permutations"] == 9
    assert len(back["items"]["probs"]["dirichlet"]) == 60
    path = write_json(back, tmp_path / "eval.json")
    loaded = load_evaluation(path)
    written = write_report(loaded, tmp_path / "report")
    assert [p.name for p in written] == [
        "reliability.png",
        "costs.png",
        "risk_coverage.png",
        "summary.md",
    ]
    for png in written[:3]:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = written[3].read_text()
    assert "| TCE (cross-fit) | AURC |" in summary
    assert "| decoder | cost | ± se |" in summary
    assert "| mbr_dirichlet |" in summary
    assert "label-shuffle p = " in summary
    assert "![costs](costs.png)" in summary


def test_report_needs_items(tmp_path: Path) -> None:
    data = _arrays(n=30)
    evaluation = evaluation_to_dict(
        evaluate_arrays(data, calibrators=(), n_permutations=0), data, include_items=False
    )
    msg = "evaluation has no per-item data; re-run `taskcal evaluate` without --no-items."
    with pytest.raises(DataFileError, match=re.escape(msg)):
        write_report(evaluation, tmp_path)


def test_verdicts() -> None:
    base = {"calibrator": "dirichlet", "n_permutations": 200}

    def verdict(statistic: float, se: float, p: float) -> str:
        test = {**base, "statistic": statistic, "gap_se": se, "p_value": p}
        return _report.verdict({"permutation_test": test})

    def head(statistic: str, se: str, p: str) -> str:
        return (
            f"MBR + dirichlet vs the best constant action: paired cost saving {statistic} ± "
            f"{se} (positive = calibrated MBR is cheaper), label-shuffle p = {p} (200 "
            "shuffles)."
        )

    assert verdict(0.3, 0.05, 0.005) == head("+0.300", "0.050", "0.005") + (
        " The beliefs carry signal beyond the label prior, and calibrated MBR saves cost over "
        "the best constant action by more than two paired standard errors."
    )
    # p < 0.05 always says "signal", also when the gap is small or even negative.
    small = (
        " The beliefs carry signal beyond the label prior, but the saving over the best "
        "constant action is within two paired standard errors."
    )
    assert verdict(0.013, 0.016, 0.01) == head("+0.013", "0.016", "0.010") + small
    assert verdict(-0.01, 0.02, 0.04) == head("-0.010", "0.020", "0.040") + small
    assert verdict(-0.01, 0.02, 0.6) == head("-0.010", "0.020", "0.600") + (
        " No evidence of signal beyond the label prior; calibrated MBR stays within two "
        "paired standard errors of the best constant action, as it should for an "
        "uninformative model."
    )
    assert verdict(-0.3, 0.05, 0.9) == head("-0.300", "0.050", "0.900") + (
        " No evidence of signal beyond the label prior; calibrated MBR costs more than the "
        "best constant action by more than two paired standard errors: the calibrator "
        "overfits this little data; prefer the constant action or a simpler map."
    )
    assert verdict(0.2, 0.05, 0.08) == head("+0.200", "0.050", "0.080") + (
        " No evidence of signal beyond the label prior; the saving over the best constant "
        "action exceeds two paired standard errors, but the shuffle test does not confirm it."
    )
    assert _report.verdict({"permutation_test": None}) == "No label-shuffle test was run."


def test_reparse_uses_the_items_offered_tools(tmp_path: Path) -> None:
    # A call to a tool the item did not offer is unparsed on reparse, as when sampled;
    # a record without "tool_names" (older files) treats every tool as offered.
    path = _sampled(tmp_path, n=6)
    lines = path.read_text().splitlines()
    record = json.loads(lines[1])
    call = {"content": "", "tool_calls": [{"name": "book_flight", "args": {}, "id": "c1"}]}
    record["samples"] = [call] * len(record["samples"])
    record["labels"] = ["tool_call"] * len(record["samples"])
    lines[1] = json.dumps({**record, "tool_names": ["get_weather"]})
    path.write_text("\n".join(lines) + "\n")
    samples = read_samples(path)
    task = resolve_task(samples, None)
    stored = eval_arrays(task, samples, alpha=0.1)
    i = stored.ids.index(record["id"])
    again = eval_arrays(task, samples, alpha=0.1, reparse=True)
    assert (stored.no_sample[i], again.no_sample[i]) == (False, True)
    lines[1] = json.dumps({k: v for k, v in record.items() if k != "tool_names"})
    path.write_text("\n".join(lines) + "\n")
    legacy = eval_arrays(task, read_samples(path), alpha=0.1, reparse=True)
    assert not legacy.no_sample[i]


# ------------------------------------------------------------- audit: mutations caught


def test_the_shuffle_test_refits_the_whole_procedure_on_every_shuffle() -> None:
    # Every calibrator fit is recorded with the rows and labels it saw (distinct beliefs
    # identify the items). The observed gap and each shuffle must each fit one map per
    # fold, on folds stratified by that shuffle's labels, and each null gap must be the
    # observed gap of the same test run from scratch on the shuffled labels.
    n, k, n_folds, shuffles = 60, 3, 5, 3
    rng = np.random.default_rng(11)
    P = rng.dirichlet(np.ones(k), size=n)
    y = (np.arange(n) % k).astype(np.intp)
    data = _arrays(n=n, k=k, P=P, y=y, greedy=np.argmax(P, axis=1).astype(np.intp))
    item = {row.tobytes(): i for i, row in enumerate(P)}
    fits: list[tuple[np.ndarray, np.ndarray]] = []
    temperature = default_factory("temperature")

    class Recording:
        def __init__(self) -> None:
            self.inner = temperature()

        def fit(self, X: np.ndarray, labels: np.ndarray) -> Recording:
            fits.append((np.array([item[row.tobytes()] for row in X]), np.asarray(labels)))
            self.inner.fit(X, labels)
            return self

        def predict_proba(self, X: np.ndarray) -> np.ndarray:
            return np.asarray(self.inner.predict_proba(X))

    test = permutation_test(data, Recording, calibrator="temperature", n_folds=n_folds,
                            n_permutations=shuffles, seed=3)  # fmt: skip
    assert len(fits) == (1 + shuffles) * n_folds, "a map per fold per shuffle"
    seen = []
    for group in range(1 + shuffles):
        labels = np.full(n, -1)
        folds = np.full(n, -1)
        for f, (rows, fit_y) in enumerate(fits[group * n_folds : (group + 1) * n_folds]):
            assert np.all((labels[rows] == -1) | (labels[rows] == fit_y)), "one label per item"
            labels[rows] = fit_y
            held_out = np.setdiff1d(np.arange(n), rows)
            assert np.all(folds[held_out] == -1), "the held-out rows partition the items"
            folds[held_out] = f
        assert np.all(folds >= 0) and np.all(labels >= 0)
        assert sorted(labels.tolist()) == sorted(y.tolist()), "a permutation of the labels"
        np.testing.assert_array_equal(
            folds, stratified_folds(labels, n_folds, seed=0),
            err_msg=f"group {group}: the folds are not stratified by its own labels",
        )  # fmt: skip
        seen.append(labels)
    np.testing.assert_array_equal(seen[0], y)  # the observed gap: the true labels
    assert all(not np.array_equal(s, y) for s in seen[1:])  # each shuffle: shuffled labels
    assert len({s.tobytes() for s in seen}) == 1 + shuffles
    for gap, labels in zip(test.null, seen[1:], strict=True):
        shuffled = _arrays(n=n, k=k, P=P, y=labels.astype(np.intp),
                           greedy=np.argmax(P, axis=1).astype(np.intp))  # fmt: skip
        again = permutation_test(shuffled, temperature, calibrator="temperature",
                                 n_folds=n_folds, n_permutations=0)  # fmt: skip
        assert gap == pytest.approx(again.statistic, abs=1e-12)
