"""Risk-controlled decisions: specs, p-values, the guard, Learn-then-Test and its guarantee."""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from scipy import stats

from calibrators import mbr_actions
from taskcal_agents.decision import _presets as tasks
from taskcal_agents.decision._artefact import CalibratorArtefact, CalibratorMismatchWarning
from taskcal_agents.decision._decider import Decider
from taskcal_agents.decision._options import SamplingOptions
from taskcal_agents.decision._risk_control import (
    DEFAULT_GRID,
    RiskControl,
    RiskCurve,
    RiskGuard,
    RiskNotCertifiedWarning,
    RiskSettingsWarning,
    RiskSpec,
    binomial_pvalues,
    calibrate_risk,
    hoeffding_bentkus_pvalues,
    ltt_select,
    naive_threshold,
    risk_curve,
)
from taskcal_agents.decision._task import Task
from taskcal_agents.errors import ConfigurationError, DataFileError
from taskcal_agents.langchain._middleware import TaskCalibrationMiddleware
from taskcal_agents.langchain._runnable import TaskCalibratedRunnable
from taskcal_agents.parsing._grounding import GroundingContext
from tests.unit_tests.taskcal_agents.helpers.calibration import fitted
from tests.unit_tests.taskcal_agents.helpers.data import WEATHER  # get_weather(city) schema

TOOL = tasks.tool_decision(cost=[[0, 1, 2], [4, 0, 2], [4, 1, 0]])
SYMMETRIC = tasks.answer_or_abstain(wrong_answer_cost=1, abstain_cost=1)
RATING = tasks.rating(k=5)


# --------------------------------------------------------------------------- specs


@pytest.mark.parametrize(
    ("text", "kind", "action", "alpha"),
    [
        ("tool_call_when_not:0.05", "when_not", "tool_call", 0.05),
        ("answer_wrong:0.1", "wrong", "answer", 0.1),
        ("any_wrong:0.2", "wrong", "any", 0.2),
        ("cost:0.25", "cost", None, 0.25),
        (" request_for_info_when_not:1e-2 ", "when_not", "request_for_info", 0.01),
    ],
)
def test_parse_and_print(text: str, kind: str, action: str | None, alpha: float) -> None:
    spec = RiskSpec.parse(text)
    assert (spec.kind, spec.action, spec.alpha) == (kind, action, alpha)
    assert RiskSpec.parse(str(spec)) == spec


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("tool_call_when_not", "must look like"),
        ("tool_call_when_not:x", "must look like"),
        ("tool_call_when_not:nan", "must look like"),
        ("tool_call:0.05", "unknown risk kind in 'tool_call:0.05'"),
        ("_wrong:0.1", "unknown risk kind"),
        ("cost:0", "must lie strictly between 0 and 1, got 0.0"),
        ("cost:1.5", "must lie strictly between 0 and 1"),
        ("answer_wrong:-0.1", "must lie strictly between 0 and 1"),
    ],
)
def test_parse_errors(text: str, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        RiskSpec.parse(text)


def test_spec_must_fit_the_task() -> None:
    with pytest.raises(ConfigurationError, match=r"names action 'answer', but task 'tool_decis"):
        RiskGuard(TOOL, "answer_wrong:0.1")
    nq = tasks.answer_or_abstain()
    with pytest.raises(ConfigurationError, match="no safe action other than 'abstain'"):
        RiskGuard(nq, "abstain_when_not:0.1")
    with pytest.raises(ConfigurationError, match="must be a RiskSpec"):
        RiskGuard(nq, 0.1)  # type: ignore[arg-type]


def test_safe_and_guarded_actions() -> None:
    g = RiskGuard(TOOL, "tool_call_when_not:0.05")
    assert g.safe.tolist() == [False, True, True] and g.guarded.tolist() == [True, False, False]
    # a mistake is an action that is not least-cost for the truth, of a guarded action only
    assert g.loss.tolist() == [[0, 0, 0], [1, 0, 0], [1, 0, 0]]
    g = RiskGuard(TOOL, "request_for_info_when_not:0.05")  # safe: cannot_answer only
    assert g.safe.tolist() == [False, False, True]
    g = RiskGuard(TOOL, "cost:0.2")
    np.testing.assert_allclose(g.loss, TOOL.cost_matrix() / 4)
    assert g.guarded.tolist() == [True, False, False]
    g = RiskGuard(RATING, "cost:0.2")  # no ask/abstain: the fallback (minimax) rating
    assert RATING.action_list[int(np.flatnonzero(g.safe)[0])] == RATING.default_action
    assert g.guarded.sum() == len(RATING.action_list) - 1


# ------------------------------------------------------------------------- p-values


def test_binomial_pvalues_are_the_binomial_tail() -> None:
    n_loss, n = np.array([0, 3, 10, 0]), np.array([100, 100, 100, 0])
    p = binomial_pvalues(n_loss, n, 0.05)
    np.testing.assert_allclose(p[:3], stats.binom.cdf([0, 3, 10], 100, 0.05))
    assert p[3] == 1.0  # nothing taken: no evidence


def test_hoeffding_bentkus_pvalues() -> None:
    n, alpha = 200, 0.1
    r = np.array([0.0, 0.03, 0.08, 0.1, 0.3])

    def h1(a: float, b: float) -> float:
        return (a * math.log(a / b) if a > 0 else 0.0) + (1 - a) * math.log((1 - a) / (1 - b))

    expected = [
        min(
            math.exp(-n * h1(min(x, alpha), alpha)),
            math.e * stats.binom.cdf(math.ceil(n * x), n, alpha),
            1.0,
        )
        for x in r
    ]
    np.testing.assert_allclose(hoeffding_bentkus_pvalues(r, n, alpha), expected)
    assert hoeffding_bentkus_pvalues(r, 0, alpha).tolist() == [1.0] * 5


# ------------------------------------------------------------------------ the guard


def _random(rng: np.random.Generator, n: int, task: Task) -> dict[str, Any]:
    k, m = len(task.labels), len(task.action_list)
    Q = rng.dirichlet(np.full(k, 0.7), size=n)
    return {
        "Q": Q,
        "y": rng.integers(0, k, size=n),
        "executable": rng.random((n, m)) < 0.8,
        "guardable": rng.random(n) < 0.9,
    }


@pytest.mark.parametrize(
    ("task", "spec"),
    [
        (TOOL, "tool_call_when_not:0.1"),
        (TOOL, "tool_call_wrong:0.1"),
        (TOOL, "any_wrong:0.1"),
        (TOOL, "cost:0.2"),
        (RATING, "cost:0.2"),
        (RATING, "any_when_not:0.3"),
    ],
)
def test_risk_curve_matches_the_guard_item_by_item(task: Task, spec: str) -> None:
    rng = np.random.default_rng(3)
    data = _random(rng, 60, task)
    guard = RiskGuard(task, spec)
    C = task.cost_matrix()
    actions = mbr_actions(data["Q"], C, allowed=data["executable"])
    lam = np.array([math.inf, 1.0, 0.8, 0.5, 0.2, 0.0])
    curve = risk_curve(guard, data["Q"], data["y"], lam, actions=actions,
                       guardable=data["guardable"], executable=data["executable"])  # fmt: skip
    previous = None
    for j, threshold in enumerate(lam):
        acts, down, _ = guard.apply(data["Q"], actions, threshold, guardable=data["guardable"],
                                    executable=data["executable"])  # fmt: skip
        losses = guard.loss[data["y"], acts]
        taken = guard.guarded[acts]
        assert curve.n_loss[j] == pytest.approx(losses.sum())
        if guard.spec.kind == "wrong":
            assert curve.n_taken[j] == taken.sum()
            assert curve.risk[j] == pytest.approx(losses[taken].mean() if taken.any() else 0.0)
        else:
            assert curve.risk[j] == pytest.approx(losses.mean())
        assert curve.coverage[j] == pytest.approx(1 - down.mean())
        assert curve.mean_cost[j] == pytest.approx(C[data["y"], acts].mean())
        assert not down[~data["guardable"]].any()
        # a downgrade goes to a safe action that can be carried out (when there is one)
        some_safe = (data["executable"] & guard.safe).any(axis=1)
        assert guard.safe[acts[down & some_safe]].all()
        if guard.spec.kind != "cost" and previous is not None:  # non-increasing in λ
            assert np.all(previous <= losses)
        previous = losses


def test_risk_curve_keeps_batch_axes() -> None:
    rng = np.random.default_rng(0)
    guard = RiskGuard(SYMMETRIC, "answer_when_not:0.1")
    s = rng.uniform(size=(2, 3, 40))
    Q = np.stack([s, 1 - s], axis=-1)
    y = rng.integers(0, 2, size=(2, 3, 40))
    curve = risk_curve(guard, Q, y, DEFAULT_GRID)
    assert curve.risk.shape == (2, 3, DEFAULT_GRID.size)
    one = risk_curve(guard, Q[1, 2], y[1, 2], DEFAULT_GRID)
    np.testing.assert_allclose(curve.n_loss[1, 2], one.n_loss)
    with pytest.raises(ConfigurationError, match=r"Q must have shape \(\.\.\., n, 2\)"):
        risk_curve(guard, Q[..., :1], y, DEFAULT_GRID)


# ------------------------------------------------------------------ calibrate_risk


def test_not_certified_means_always_guard_with_a_warning() -> None:
    rng = np.random.default_rng(0)
    s = rng.uniform(size=20)
    Q, y = np.stack([s, 1 - s], 1), (rng.uniform(size=20) >= s).astype(int)
    with pytest.warns(RiskNotCertifiedWarning, match="could not be certified"):
        rc = calibrate_risk(SYMMETRIC, "answer_when_not:0.01", Q, y, delta=0.05)
    assert (rc.threshold, rc.certified, rc.coverage) == (math.inf, False, 1 - (s >= 0.5).mean())
    assert rc.risk == 0.0  # the guarded action is never taken
    assert RiskControl.from_dict(json.loads(json.dumps(rc.to_dict()))) == rc
    assert rc.to_dict()["threshold"] is None


def test_calibrate_risk_round_trip_and_errors() -> None:
    rng = np.random.default_rng(1)
    s = rng.uniform(size=400)
    Q, y = np.stack([s, 1 - s], 1), (rng.uniform(size=400) >= s).astype(int)
    rc = calibrate_risk(SYMMETRIC, "answer_when_not:0.1", Q, y, delta=0.1)
    assert rc.certified and 0.0 <= rc.threshold <= 1.0
    assert rc.method == "ltt-binomial-fixed-sequence" and rc.n == 400 and rc.n_grid == 101
    assert RiskControl.from_dict(json.loads(json.dumps(rc.to_dict()))) == rc
    with pytest.raises(ConfigurationError, match="delta δ must lie strictly between 0 and 1"):
        calibrate_risk(SYMMETRIC, "answer_when_not:0.1", Q, y, delta=0)
    with pytest.raises(ConfigurationError, match="strictly decreasing"):
        calibrate_risk(SYMMETRIC, "answer_when_not:0.1", Q, y, grid=[0.1, 0.5])
    with pytest.raises(ConfigurationError, match=r"risk control .* is invalid"):
        RiskControl.from_dict({"spec": "cost:0.1"})


# ------------------------------------------------------------ the guarantee (item 2)

DRAWS = 500
DELTA = 0.1
SLACK = DELTA + 3 * math.sqrt(DELTA * (1 - DELTA) / DRAWS)


def _naive(curve: RiskCurve, alpha: float) -> np.ndarray:
    index = naive_threshold(curve, alpha)
    return np.where(index >= 0, curve.thresholds[index], math.inf)


def _ltt(guard: RiskGuard, curve: RiskCurve) -> np.ndarray:
    index, _, _ = ltt_select(guard.spec, curve, DELTA)
    return np.where(index >= 0, curve.thresholds[index], math.inf)


def _draws(n: int, seed: int, truth: Any) -> tuple[np.ndarray, np.ndarray]:
    """DRAWS calibration sets: q(answer) = s ~ U(0, 1), truth 'answer' w.p. truth(s)."""
    rng = np.random.default_rng(seed)
    s = rng.uniform(size=(DRAWS, n))
    y = (rng.uniform(size=(DRAWS, n)) >= truth(s)).astype(np.intp)  # 0: answer, 1: abstain
    return np.stack([s, 1 - s], axis=-1), y


def _violations(
    task: Task, spec: str, n: int, seed: int, truth: Any, risk: Any
) -> tuple[float, float, float]:
    guard = RiskGuard(task, spec)
    Q, y = _draws(n, seed, truth)
    curve = risk_curve(guard, Q, y, DEFAULT_GRID)
    ltt, naive = _ltt(guard, curve), _naive(curve, guard.spec.alpha)
    # the batched path is the one calibrate_risk takes
    for d in range(3):
        rc = calibrate_risk(task, spec, Q[d], y[d], delta=DELTA, warn=False)
        assert rc.threshold == ltt[d]
    alpha = guard.spec.alpha
    return (
        float(np.mean(risk(ltt) > alpha)),
        float(np.mean(risk(naive) > alpha)),
        float(np.mean(np.isfinite(ltt))),
    )


def test_guarantee_marginal_mistake_rate() -> None:
    """``answer_when_not``: symmetric 0/1 costs, calibrated q(answer) = s ~ U(0, 1).

    MBR answers iff s >= 1/2, the guard's score of 'answer' is s, and an answer is a
    mistake with probability 1 − s, so R(λ) = ∫_m^1 (1 − s) ds = (1 − m)² / 2 with
    m = max(λ, 1/2); α = 0.05 holds iff λ >= 1 − √0.1 ≈ 0.684.
    """

    def risk(lam: np.ndarray) -> np.ndarray:
        return (1 - np.maximum(np.minimum(lam, 1.0), 0.5)) ** 2 / 2

    ltt, naive, certified = _violations(
        SYMMETRIC, "answer_when_not:0.05", 500, 0, lambda s: s, risk
    )
    print(f"when_not: LTT violates {ltt:.3f}, naive {naive:.3f}, certified {certified:.3f}")
    assert ltt <= SLACK
    assert naive > SLACK
    assert certified > 0.9


def test_guarantee_conditional_mistake_rate() -> None:
    """``answer_wrong``: same source; among answers R(λ) = (1 − m)/2, α = 0.2 iff λ >= 0.6."""

    def risk(lam: np.ndarray) -> np.ndarray:
        m = np.maximum(np.minimum(lam, 1.0), 0.5)
        return np.where(m < 1, (1 - m) / 2, 0.0)

    ltt, naive, certified = _violations(SYMMETRIC, "answer_wrong:0.2", 1000, 1, lambda s: s, risk)
    print(f"wrong: LTT violates {ltt:.3f}, naive {naive:.3f}, certified {certified:.3f}")
    assert ltt <= SLACK
    assert naive > SLACK
    assert certified > 0.9


def test_guarantee_bounded_cost() -> None:
    """``cost``: symmetric 0/1 costs (C_max = 1), overconfident q: q(answer) = s ~ U(0, 1)
    but the truth is 'answer' with probability s/2.

    MBR answers iff s >= 1/2; the score 1 − E_q[C(answer)] is s; with m = max(λ, 1/2),
    R(λ) = ∫_0^m s/2 ds + ∫_m^1 (1 − s/2) ds = m²/2 − m + 3/4, decreasing from 0.375 to
    0.25; α = 0.3 holds iff λ >= 1 − √0.1. Always guarding costs 0.25 <= α.
    """

    def risk(lam: np.ndarray) -> np.ndarray:
        m = np.maximum(np.minimum(lam, 1.0), 0.5)
        return m**2 / 2 - m + 0.75

    ltt, naive, certified = _violations(SYMMETRIC, "cost:0.3", 2000, 2, lambda s: s / 2, risk)
    print(f"cost: LTT violates {ltt:.3f}, naive {naive:.3f}, certified {certified:.3f}")
    assert ltt <= SLACK
    assert naive > SLACK
    assert certified > 0.5


# -------------------------------------------------------------------- the Decider

CALL = AIMessage(content="", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"},
                                          "id": "c1"}])  # fmt: skip
RC = RiskControl(spec=RiskSpec.parse("tool_call_when_not:0.05"), delta=0.05, threshold=0.99,
                 certified=True, n=100, n_taken=100, risk=0.03, coverage=0.8,
                 method="ltt-binomial-fixed-sequence", n_grid=101)  # fmt: skip


# TOOL grounds its calls: the user names the city, so CALL is grounded.
CONTEXT = GroundingContext([WEATHER], [HumanMessage("What's the weather in Paris?")])


def _with_threshold(threshold: float) -> RiskControl:
    return RiskControl(**{**RC.__dict__, "threshold": threshold})


def test_decider_guards_a_tool_call_below_the_threshold() -> None:
    messages = [CALL] * 8  # p̂(tool_call) = 8.1 / 8.3 = 0.976: MBR calls the tool
    plain = Decider(TOOL).decide(messages, context=CONTEXT)
    assert plain.action == "tool_call" and plain.guard is None and not plain.guarded
    assert plain.unguarded_action == "tool_call"
    d = Decider(TOOL, risk_control=RC).decide(messages, context=CONTEXT)
    assert (d.action, d.unguarded_action, d.guarded) == ("request_for_info", "tool_call", True)
    assert (d.guard, d.guard_threshold) == ("tool_call_when_not:0.05", 0.99)
    assert d.guard_score == pytest.approx(8.1 / 8.3)
    assert d.message is not None and d.message.content == TOOL.ask_text
    assert not d.fallback
    meta = d.to_metadata()
    assert meta["guarded"] is True and meta["unguarded_action"] == "tool_call"
    lenient = Decider(TOOL, risk_control=_with_threshold(0.5)).decide(messages, context=CONTEXT)
    assert (lenient.action, lenient.guarded) == ("tool_call", False)
    always = Decider(TOOL, risk_control=_with_threshold(math.inf)).decide(messages, context=CONTEXT)
    assert always.guarded and always.to_metadata()["guard_threshold"] is None
    json.dumps(always.to_metadata(), allow_nan=False)


def test_decider_does_not_guard_other_actions_or_fallbacks() -> None:
    ask = AIMessage(content="Which city?")
    d = Decider(TOOL, risk_control=RC).decide([ask] * 4, context=CONTEXT)
    assert (d.action, d.guarded, d.guard_score) == ("request_for_info", False, None)
    f = Decider(TOOL, risk_control=RC).decide([], context=CONTEXT)
    assert f.fallback and not f.guarded and f.guard == "tool_call_when_not:0.05"
    assert f.unguarded_action == f.action


def test_decider_checks_the_risk_control() -> None:
    with pytest.raises(ConfigurationError, match="must be a RiskControl"):
        Decider(TOOL, risk_control="tool_call_when_not:0.05")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="names action 'tool_call'"):
        Decider(tasks.answer_or_abstain(), risk_control=RC)


# ------------------------------------------------------------- artefact and doors


def _artefact(**kwargs: Any) -> CalibratorArtefact:
    return CalibratorArtefact(calibrator=fitted(), labels=list(TOOL.labels), alpha=0.5,
                              task=TOOL, **kwargs)  # fmt: skip


def test_artefact_round_trip_with_risk_control(tmp_path: Path) -> None:
    path = _artefact(risk_control=RC).save(tmp_path / "cal.json")
    data = json.loads(path.read_text())
    assert data["format_version"] == 2 and data["risk_control"]["spec"] == str(RC.spec)
    loaded = CalibratorArtefact.load(path)
    assert loaded.risk_control == RC and "risk_control" not in loaded.metadata
    old = _artefact().save(tmp_path / "old.json")  # no risk control: still version 1
    assert json.loads(old.read_text())["format_version"] == 1
    assert CalibratorArtefact.load(old).risk_control is None
    data["risk_control"]["spec"] = "answer_wrong:0.1"
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(DataFileError, match=r"field 'risk_control' is invalid: .*names action"):
        CalibratorArtefact.load(tmp_path / "bad.json")


def test_front_doors_apply_the_artefacts_risk_control(tmp_path: Path) -> None:
    path = _artefact(risk_control=RC).save(tmp_path / "cal.json")
    model = GenericFakeChatModel(messages=iter([CALL] * 8))
    runnable = TaskCalibratedRunnable(model, TOOL, path, n_samples=8)
    assert runnable.risk_control is None and runnable.decider.risk_control == RC
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        decision = runnable.invoke("What's the weather in Paris?")
    assert decision.guard == str(RC.spec) and decision.unguarded_action is not None
    middleware = TaskCalibrationMiddleware(task=TOOL, calibrator=path)
    assert middleware.session.in_force().decider.risk_control == RC
    explicit = TaskCalibratedRunnable(model, TOOL, None, risk_control=RC)
    assert explicit.decider.risk_control == RC
    # An explicit limit replaces the artefact's.
    other = dataclasses.replace(RC, threshold=0.5)
    explicit = TaskCalibratedRunnable(model, TOOL, path, risk_control=other)
    assert explicit.decider.risk_control == other


def _tool(**changes: Any) -> Task:
    return Task.model_validate({**TOOL.model_dump(), **changes})


@pytest.mark.parametrize(
    ("task", "what"),
    [
        (_tool(cost=[[0, 5, 5], [1, 0, 2], [1, 1, 0]]), "cost matrix"),
        (
            _tool(
                actions=["tool_call", "cannot_answer", "request_for_info"],
                cost=[[0, 2, 1], [4, 2, 0], [4, 0, 1]],
            ),
            "actions",
        ),
        (_tool(fallback_action="cannot_answer"), "fallback action"),
        (_tool(ask_action=None, grounding=None), "ask action"),
        (_tool(abstain_action=None), "abstain action"),
        (_tool(unparsed="drop"), "unparsed policy"),
    ],
)
def test_front_doors_refuse_a_risk_limit_certified_for_another_task(
    tmp_path: Path, task: Task, what: str
) -> None:
    path = _artefact(risk_control=RC).save(tmp_path / "cal.json")
    model = GenericFakeChatModel(messages=iter([]))
    pattern = rf"certified for another setting.*{what} .*taskcal fit --risk-control"
    with pytest.raises(ConfigurationError, match=pattern):
        TaskCalibratedRunnable(model, task, path, n_samples=4)
    with pytest.raises(ConfigurationError, match=pattern):
        TaskCalibrationMiddleware(task=task, calibrator=path)
    # without the limit the same artefact is used for the task (labels agree; where a belief
    # field differs it warns, as the user chose it)
    plain = _artefact().save(tmp_path / "plain.json")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibratorMismatchWarning)
        runnable = TaskCalibratedRunnable(model, task, plain, n_samples=4)
    assert runnable.decider.risk_control is None


def test_front_doors_refuse_a_risk_limit_under_another_alpha(tmp_path: Path) -> None:
    path = _artefact(risk_control=RC).save(tmp_path / "cal.json")
    model = GenericFakeChatModel(messages=iter([]))
    with pytest.raises(ConfigurationError, match=r"Dirichlet prior α 3.0 \(certified: 0.5\)"):
        TaskCalibratedRunnable(model, TOOL, path, n_samples=4, alpha=3.0)
    with pytest.raises(ConfigurationError, match=r"Dirichlet prior α"):
        TaskCalibrationMiddleware(task=TOOL, calibrator=path, options=SamplingOptions(alpha=3.0))
    assert TaskCalibratedRunnable(model, TOOL, path, alpha=0.5).alpha == 0.5


def test_front_doors_refuse_a_risk_limit_without_a_task_spec() -> None:
    artefact = CalibratorArtefact(calibrator=fitted(), labels=list(TOOL.labels), alpha=0.5,
                                  task_name=TOOL.name, risk_control=RC)  # fmt: skip
    with pytest.raises(ConfigurationError, match="records no task_spec"):
        TaskCalibratedRunnable(GenericFakeChatModel(messages=iter([])), TOOL, artefact)


def test_front_doors_warn_when_n_samples_differs_from_the_certified_n(tmp_path: Path) -> None:
    # The map itself was fitted on N = 16 too: the artefact check says so as well.
    path = _artefact(risk_control=RC, metadata={"samples": {"n": 16}}).save(tmp_path / "cal.json")
    model = GenericFakeChatModel(messages=iter([]))
    with (
        pytest.warns(CalibratorMismatchWarning, match="N = 16 samples, this front door draws 4"),
        pytest.warns(
            RiskSettingsWarning, match="from 16 samples per item, but this front door draws 4"
        ),
    ):
        TaskCalibratedRunnable(model, TOOL, path, n_samples=4)
    with (
        pytest.warns(CalibratorMismatchWarning, match="draws 8"),
        pytest.warns(RiskSettingsWarning, match="draws 8"),
    ):
        TaskCalibrationMiddleware(task=TOOL, calibrator=path, options=SamplingOptions(n_samples=8))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RiskSettingsWarning)
        TaskCalibratedRunnable(model, TOOL, path, n_samples=16)


def test_guard_refuses_a_task_whose_only_safe_action_is_sampled() -> None:
    labels = ["tool_call", "direct_answer", "other"]
    task = Task(name="x", labels=labels, cost=[[0, 1, 2], [3, 0, 2], [3, 1, 0]],
                parser={"name": "choice", "options": {"labels": labels}},
                sampled_actions=["tool_call", "direct_answer"],
                fallback_action="direct_answer")  # fmt: skip
    with pytest.raises(ConfigurationError, match=r"\['direct_answer'\].*is a sampled action"):
        RiskGuard(task, "tool_call_when_not:0.05")
    with pytest.raises(ConfigurationError, match="is a sampled action"):
        calibrate_risk(task, "tool_call_when_not:0.05", np.eye(3), np.arange(3))


def test_guard_downgrades_only_to_safe_actions_whatever_the_mask() -> None:
    guard = RiskGuard(TOOL, "tool_call_when_not:0.05")
    rng = np.random.default_rng(0)
    Q = rng.dirichlet(np.ones(3), size=200)
    executable = rng.uniform(size=(200, 3)) < 0.3  # often nothing marked executable
    out, down, _ = guard.apply(Q, np.zeros(200, dtype=np.intp), math.inf, executable=executable)
    assert down.all() and guard.safe[out].all() and not guard.guarded[out].any()
    curve = risk_curve(guard, Q, rng.integers(0, 3, 200), [math.inf],
                       actions=np.zeros(200, dtype=np.intp), executable=executable)  # fmt: skip
    assert curve.risk[0] == 0.0 and curve.coverage[0] == 0.0


# ------------------------------------------------------- ltt_select on set p-values


def _curve(n_loss: list[int], n: int = 100) -> RiskCurve:
    """A curve over the grid 1.0, 0.9, … with the given loss counts out of n each."""
    m = len(n_loss)
    k = np.asarray(n_loss, dtype=np.float64)
    return RiskCurve(thresholds=np.round(np.linspace(1.0, 1.0 - 0.1 * (m - 1), m), 2),
                     risk=k / n, n_loss=k, n_taken=np.full(m, n), coverage=np.ones(m),
                     mean_cost=np.zeros(m), n=n)  # fmt: skip


def test_ltt_select_fixed_sequence_stops_at_the_first_non_rejection() -> None:
    curve = _curve([3, 10, 3, 3])  # α = 0.1, n = 100: p ≈ 0.008, 0.58, 0.008, 0.008
    index, p, method = ltt_select(RiskSpec.parse("a_when_not:0.1"), curve, 0.05)
    assert (p <= 0.05).tolist() == [True, False, True, True]
    assert int(index) == 0 and method == "ltt-binomial-fixed-sequence"
    index, _, _ = ltt_select(RiskSpec.parse("a_when_not:0.1"), _curve([10, 3, 3]), 0.05)
    assert int(index) == -1  # the strictest λ is not rejected: nothing is


def test_ltt_select_bonferroni_compares_with_delta_over_m() -> None:
    curve = _curve([3, 4, 5, 10])  # p ≈ 0.008, 0.024, 0.058, 0.58
    index, p, method = ltt_select(RiskSpec.parse("a_wrong:0.1"), curve, 0.1)
    assert (p <= 0.1 / 4).tolist() == [True, True, False, False] and (p <= 0.1)[2]
    assert int(index) == 1 and method == "ltt-binomial-bonferroni"
    # not monotone: the most lenient rejected λ is taken, past a non-rejected one
    index, _, _ = ltt_select(RiskSpec.parse("a_wrong:0.1"), _curve([3, 10, 3, 10]), 0.1)
    assert int(index) == 2


def test_ltt_select_checks_the_grid() -> None:
    curve = _curve([3, 3, 3])
    bad = RiskCurve(**{**curve.__dict__, "thresholds": curve.thresholds[::-1]})
    with pytest.raises(ConfigurationError, match="strictly decreasing"):
        ltt_select(RiskSpec.parse("a_when_not:0.1"), bad, 0.05)


def test_guarantee_needs_the_multiplicity_correction() -> None:
    """``answer_wrong`` with a score uninformative of the mistake: q(answer) = s ~
    U(0.5, 1) (MBR always answers) and every answer is wrong with probability 0.21 > α =
    0.2, so every λ that leaves an answer is a true null. Testing each λ at δ without a
    correction certifies some λ far more often than δ; Bonferroni does not.
    """
    guard = RiskGuard(SYMMETRIC, "answer_wrong:0.2")
    rng = np.random.default_rng(3)
    s = rng.uniform(0.5, 1.0, size=(DRAWS, 300))
    y = (rng.uniform(size=(DRAWS, 300)) < 0.21).astype(np.intp)
    curve = risk_curve(guard, np.stack([s, 1 - s], axis=-1), y, DEFAULT_GRID)
    index, p, _ = ltt_select(guard.spec, curve, DELTA)
    ltt = float(np.mean(index >= 0))  # any certified λ violates the limit
    uncorrected = float(np.mean((p <= DELTA).any(axis=-1)))
    print(f"null source: LTT violates {ltt:.3f}, uncorrected {uncorrected:.3f}")
    assert ltt <= SLACK
    assert uncorrected > SLACK + 0.05


# ------------------------------------------------------------- audit: mutations caught


def test_a_score_equal_to_the_threshold_is_treated_alike_in_the_curve_and_the_runtime() -> None:
    # Scores s = q(tool_call) exactly on the thresholds (dyadic, so exact in floating
    # point): the curve LTT certifies on and the runtime that serves the threshold must
    # agree on the tie; the rule is the documented one, a guarded action with s < λ is
    # downgraded (s = λ is kept).
    guard = RiskGuard(TOOL, "tool_call_when_not:0.05")
    q_call = np.array([0.8125, 0.875, 0.9375, 1.0])
    Q = np.stack([q_call, 1 - q_call, np.zeros(4)], axis=1)
    y = np.array([0, 1, 0, 0])
    executable = np.ones((4, 3), dtype=bool)
    lam = np.array([math.inf, 1.0, 0.9375, 0.875, 0.8125, 0.5, 0.0])
    curve = risk_curve(guard, Q, y, lam)
    call = TOOL.action_index("tool_call")
    for j, threshold in enumerate(lam):
        choice = Decider(TOOL, risk_control=_with_threshold(float(threshold))).choose_actions(
            Q, executable
        )
        assert (choice.unguarded == call).all()  # MBR calls the tool on every row
        assert choice.scores is not None
        np.testing.assert_array_equal(choice.scores, q_call)
        expected = q_call < threshold
        np.testing.assert_array_equal(choice.guarded, expected, err_msg=f"runtime, λ={threshold}")
        _, down, _ = guard.apply(Q, choice.unguarded, threshold)
        np.testing.assert_array_equal(down, expected, err_msg=f"guard.apply, λ={threshold}")
        assert curve.coverage[j] == 1 - expected.mean(), f"risk_curve, λ={threshold}"
        losses = guard.loss[y, choice.actions]
        assert curve.n_loss[j] == losses.sum(), f"risk_curve, λ={threshold}"
