"""Adaptive N's stopping prior: the fit, its JSON form, the artefact and the front doors."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from calibrators import IdentityCalibrator
from taskcal_agents.decision import _presets as tasks
from taskcal_agents.decision._adaptive import AdaptiveSampling, change_probability
from taskcal_agents.decision._artefact import CalibratorArtefact, resolve_calibrator
from taskcal_agents.decision._decider import Decider
from taskcal_agents.decision._options import SamplingOptions
from taskcal_agents.decision._stopping_prior import (
    FEW_ITEMS,
    MAX_TOTAL,
    MIN_CONCENTRATION,
    StoppingPrior,
    StoppingPriorWarning,
    fit_stopping_prior,
)
from taskcal_agents.decision._task import GroundingSpec
from taskcal_agents.errors import ConfigurationError, DataFileError
from taskcal_agents.langchain._runnable import TaskCalibratedRunnable
from taskcal_agents.workflow import fit_artefact, read_samples
from tests.unit_tests.taskcal_agents.helpers.chat_fakes import RecordingChatModel
from tests.unit_tests.taskcal_agents.helpers.workflow_fakes import _sampled

TOOL = tasks.tool_decision(grounding=GroundingSpec())  # adaptive N: no relevance features


def dirichlet_multinomial_counts(a: list[float], n_items: int, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(a, size=n_items)
    return np.stack([rng.multinomial(n, row) for row in p])


def test_the_fit_recovers_a_known_dirichlet() -> None:
    truth = np.array([0.6, 0.3, 0.15, 0.05])
    counts = dirichlet_multinomial_counts(truth.tolist(), 4000, 16)
    prior = fit_stopping_prior(TOOL, counts)
    assert prior.n_items == 4000
    assert prior.outcomes == TOOL.outcomes
    np.testing.assert_allclose(prior.concentration, truth, rtol=0.12)
    assert prior.total == pytest.approx(truth.sum(), rel=0.08)


def test_the_fit_tells_settled_items_from_torn_ones() -> None:
    settled = fit_stopping_prior(TOOL, dirichlet_multinomial_counts([0.1] * 4, 2000, 16))
    torn = fit_stopping_prior(TOOL, dirichlet_multinomial_counts([5.0] * 4, 2000, 16))
    assert settled.total < 1 < 10 < torn.total
    # The more items vary, the less four agreeing samples settle the decision.
    choice = tasks.multiple_choice(["Paris", "London", "Rome"])
    four = [4, 0, 0, 0]
    p_settled = change_probability(
        Decider(choice), four, 16, prior=StoppingPrior(choice.outcomes, settled.concentration)
    )
    p_torn = change_probability(
        Decider(choice), four, 16, prior=StoppingPrior(choice.outcomes, torn.concentration)
    )
    assert p_settled < 0.005 < 0.02 < p_torn


def test_an_outcome_never_seen_keeps_the_smallest_concentration() -> None:
    counts = dirichlet_multinomial_counts([0.5, 0.5, 0.5, 0.5], 500, 16)
    counts[:, 3] = 0  # no unparsed sample
    prior = fit_stopping_prior(TOOL, counts)
    assert prior.concentration[3] == MIN_CONCENTRATION
    assert min(prior.concentration[:3]) > 0.1


def test_items_that_do_not_vary_beyond_one_distribution_cap_the_total() -> None:
    rng = np.random.default_rng(0)
    counts = rng.multinomial(16, [0.4, 0.3, 0.2, 0.1], size=1000)
    prior = fit_stopping_prior(TOOL, counts)
    assert prior.total == pytest.approx(MAX_TOTAL)
    np.testing.assert_allclose(
        np.array(prior.concentration) / MAX_TOTAL, [0.4, 0.3, 0.2, 0.1], atol=0.02
    )


def test_items_with_fewer_than_two_samples_are_left_out() -> None:
    counts = dirichlet_multinomial_counts([0.5] * 4, 300, 16)
    padded = np.concatenate([counts, [[1, 0, 0, 0]] * 50, [[0, 0, 0, 0]] * 50])
    assert fit_stopping_prior(TOOL, padded) == fit_stopping_prior(TOOL, counts)


@pytest.mark.parametrize(
    ("counts", "message"),
    [
        (
            np.ones((5, 3), dtype=int),
            "fit_stopping_prior parameter 'counts' must be an (n_items, 4) array of integer "
            "counts >= 0 (per outcome of ['tool_call', 'request_for_info', 'cannot_answer'], "
            "then unparsed), got shape (5, 3).",
        ),
        (
            [[1.5, 0, 0, 0], [2, 0, 0, 0]],
            "fit_stopping_prior parameter 'counts' must be an (n_items, 4) array",
        ),
        (
            [[4, 0, 0, 0], [1, 0, 0, 0]],
            "fit_stopping_prior needs at least 2 items with 2 samples or more, got 1;",
        ),
    ],
)
def test_bad_counts_are_refused(counts: object, message: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        fit_stopping_prior(TOOL, counts)  # type: ignore[arg-type]


def test_the_prior_is_validated_and_round_trips() -> None:
    prior = StoppingPrior(TOOL.outcomes, (0.5, 0.25, 0.125, 0.01), n_items=40)
    data = prior.to_dict()
    assert data == {
        "outcomes": ["tool_call", "request_for_info", "cannot_answer", "<unparsed>"],
        "concentration": [0.5, 0.25, 0.125, 0.01],
        "n_items": 40,
    }
    assert StoppingPrior.from_dict(data) == prior
    with pytest.raises(ConfigurationError, match="one finite concentration > 0 per outcome"):
        StoppingPrior(TOOL.outcomes, (0.5, 0.0, 0.1, 0.1))
    with pytest.raises(ConfigurationError, match="one finite concentration > 0 per outcome"):
        StoppingPrior(TOOL.outcomes, (0.5, 0.1, 0.1))
    with pytest.raises(ConfigurationError, match="stopping prior must be"):
        StoppingPrior.from_dict({"outcomes": ["a", "b"], "concentration": [1, 1]})
    other = tasks.multiple_choice(["Paris", "London"])
    msg = (
        "stopping prior was fitted for outcomes ['tool_call', 'request_for_info', "
        "'cannot_answer'] but task"
    )
    with pytest.raises(ConfigurationError, match=re.escape(msg)):
        Decider(other, stopping_prior=prior)


def _artefact(prior: StoppingPrior | None) -> CalibratorArtefact:
    calibrator = IdentityCalibrator().fit(np.eye(3), np.arange(3))
    return CalibratorArtefact(
        calibrator=calibrator, labels=list(TOOL.labels), alpha=0.1, task=TOOL,
        stopping_prior=prior,
    )  # fmt: skip


def test_the_artefact_stores_the_prior_and_the_front_doors_use_it(tmp_path: Path) -> None:
    prior = StoppingPrior(TOOL.outcomes, (0.3, 0.2, 0.1, 0.01), n_items=12)
    path = _artefact(prior).save(tmp_path / "fit.json")
    loaded = CalibratorArtefact.load(path)
    assert loaded.stopping_prior == prior
    assert loaded.to_dict()["format_version"] == 1  # an old reader falls back to uniform
    resolved = resolve_calibrator(path, TOOL, owner="test")
    assert resolved.stopping_prior_for(TOOL) == prior
    runnable = TaskCalibratedRunnable(
        RecordingChatModel(responses=["x"]), TOOL, calibrator=path, adaptive=0.01
    )
    assert runnable.decider.stopping_prior == prior
    # Without one the rule takes the uniform prior.
    bare = _artefact(None).save(tmp_path / "bare.json")
    assert "stopping_prior" not in CalibratorArtefact.load(bare).to_dict()
    assert resolve_calibrator(bare, TOOL, owner="test").stopping_prior_for(TOOL) is None
    decider = Decider(TOOL)
    assert change_probability(decider, [4, 0, 0, 0], 16) == change_probability(
        decider, [4, 0, 0, 0], 16, prior=StoppingPrior.uniform(TOOL)
    )
    # An explicit prior in AdaptiveSampling wins over the Decider's.
    rule = AdaptiveSampling(epsilon=0.01, prior=StoppingPrior.uniform(TOOL, 5.0))
    assert rule.prior is not None and rule.prior.total == 20.0


def test_a_bad_stored_prior_is_a_data_file_error(tmp_path: Path) -> None:
    data = _artefact(StoppingPrior.uniform(TOOL)).to_dict()
    data["stopping_prior"] = {"outcomes": ["<unparsed>"], "concentration": [1.0]}
    with pytest.raises(DataFileError, match="field 'stopping_prior' is invalid"):
        CalibratorArtefact.from_dict(data)


def test_taskcal_fit_fits_the_prior_on_the_samples(tmp_path: Path) -> None:
    path = _sampled(tmp_path, n=FEW_ITEMS)
    with warnings.catch_warnings():
        warnings.simplefilter("error", StoppingPriorWarning)  # enough items: no warning
        artefact, _ = fit_artefact(path, calibrator="temperature")
    stored = StoppingPrior.from_dict(artefact["stopping_prior"])
    samples = read_samples(path)
    assert stored.n_items == len(samples.records) == FEW_ITEMS
    assert stored.outcomes == TOOL.outcomes
    # Fewer items: the prior is still fitted and stored, with a warning naming the count.
    (tmp_path / "few").mkdir()
    few = _sampled(tmp_path / "few", n=FEW_ITEMS - 1)
    with pytest.warns(StoppingPriorWarning, match=f"fitted on {FEW_ITEMS - 1} items"):
        artefact, _ = fit_artefact(few, calibrator="temperature")
    assert artefact["stopping_prior"]["n_items"] == FEW_ITEMS - 1


def test_the_middleware_and_the_cli_decider_use_the_artefacts_prior(tmp_path: Path) -> None:
    from taskcal_agents.commands._sample import _adaptive_decider
    from taskcal_agents.langchain._middleware import TaskCalibrationMiddleware

    prior = StoppingPrior(TOOL.outcomes, (0.3, 0.2, 0.1, 0.01), n_items=12)
    path = _artefact(prior).save(tmp_path / "fit.json")
    mw = TaskCalibrationMiddleware(
        task=TOOL, calibrator=path, options=SamplingOptions(adaptive=0.05)
    )
    assert mw.session.in_force().decider.stopping_prior == prior
    assert _adaptive_decider(TOOL, 0.05, path)[0].stopping_prior == prior


def test_a_prior_for_other_outcomes_falls_back_or_is_refused_by_name(tmp_path: Path) -> None:
    from taskcal_agents.langchain._middleware import TaskCalibrationMiddleware

    choice = tasks.multiple_choice(["Paris", "London", "Rome"])
    other = StoppingPrior(choice.outcomes, (1.0, 1.0, 1.0, 1.0))
    # An artefact's prior fitted under other outcomes never blocks a front door: uniform.
    artefact = CalibratorArtefact(
        calibrator=IdentityCalibrator().fit(np.eye(3), np.arange(3)),
        labels=list(TOOL.labels),
        alpha=0.1,
        stopping_prior=other,
    )  # fmt: skip  (no task recorded: fitted for another task with the same labels)
    assert resolve_calibrator(artefact, TOOL, owner="test").stopping_prior_for(TOOL) is None
    runnable = TaskCalibratedRunnable(
        RecordingChatModel(responses=["x"]), TOOL, calibrator=artefact
    )
    assert runnable.decider.stopping_prior is None
    # An explicit prior for other outcomes is refused when the front door is built.
    msg = "TaskCalibrationMiddleware parameter 'adaptive.prior' was fitted for outcomes"
    with pytest.raises(ConfigurationError, match=re.escape(msg)):
        TaskCalibrationMiddleware(
            task=TOOL, options=SamplingOptions(adaptive=AdaptiveSampling(epsilon=0.05, prior=other))
        )
    # One for the main task does not reach the after-tool-result task's decisions.
    after = tasks.after_tool_result()
    mine = StoppingPrior.uniform(TOOL, 0.1)
    assert change_probability(
        Decider(after), [4] + [0] * len(after.outcomes), 16, prior=mine
    ) == change_probability(Decider(after), [4] + [0] * len(after.outcomes), 16)


def test_the_decision_model_and_the_tool_result_decider_use_the_artefacts_prior(
    tmp_path: Path,
) -> None:
    from langchain_core.decisions import Choice

    from taskcal_agents.langchain._decision_model import TaskCalibratedDecisionModel
    from taskcal_agents.langchain._middleware import TaskCalibrationMiddleware

    # The decision model: a prior fitted for the question's task reaches its Decider.
    team = Choice(instructions="Which team?", criteria={"billing": "Pay.", "sales": "Price."})
    model = TaskCalibratedDecisionModel(chat_model=RecordingChatModel(responses=["billing"]))
    task = model.task_for("team", team)
    prior = StoppingPrior(task.outcomes, (0.4, 0.3, 0.05), n_items=9)
    artefact = CalibratorArtefact(
        calibrator=IdentityCalibrator().fit(np.eye(2), np.arange(2)), labels=list(task.labels),
        alpha=0.1, task=task, stopping_prior=prior,
    )  # fmt: skip
    model = TaskCalibratedDecisionModel(
        chat_model=RecordingChatModel(responses=["billing"]),
        calibrators={"team": artefact.save(tmp_path / "team.json")},
    )
    assert model._decider("team", team).stopping_prior == prior
    # The middleware's decision after a tool result: its own artefact's prior.
    after = tasks.after_tool_result()
    after_prior = StoppingPrior(after.outcomes, (0.5, 0.2, 0.1, 0.1, 0.02), n_items=7)
    k = len(after.labels)
    after_path = CalibratorArtefact(
        calibrator=IdentityCalibrator().fit(np.eye(k), np.arange(k)), labels=list(after.labels),
        alpha=0.1, task=after, stopping_prior=after_prior,
    ).save(tmp_path / "after.json")  # fmt: skip
    mw = TaskCalibrationMiddleware(
        task=TOOL,
        calibrator=_artefact(None).save(tmp_path / "fit.json"),
        decide_on="every_call",
        options=SamplingOptions(adaptive=0.05),
        tool_result={"task": after, "calibrator": after_path},
    )
    call = AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "1"}])
    after_tool = [HumanMessage("Weather in Paris?"), call, ToolMessage("sunny", tool_call_id="1")]
    assert mw.session.in_force(None, after_tool).decider.stopping_prior == after_prior
    assert mw.session.in_force().decider.stopping_prior is None  # the first artefact has none
