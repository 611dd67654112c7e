"""Hot reload of a replaced calibrator artefact file in the front doors (``reload_artefact``)."""

from __future__ import annotations

import asyncio
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
from langchain_core.decisions import Choice
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import HumanMessage

from calibrators import make_calibrator
from taskcal_agents.decision._artefact import CalibratorArtefact, resolve_calibrator
from taskcal_agents.decision._options import SamplingOptions
from taskcal_agents.decision._presets import tool_decision
from taskcal_agents.errors import ArtefactReloadWarning, ConfigurationError
from taskcal_agents.langchain._chat_model import DECISION_METADATA_KEY, TaskCalibratedChatModel
from taskcal_agents.langchain._decision_model import TaskCalibratedDecisionModel
from taskcal_agents.langchain._graph_node import decision_node
from taskcal_agents.langchain._runnable import TaskCalibratedRunnable
from taskcal_agents.production._decision_log import artefact_id, open_decision_log
from taskcal_agents.production._reload import ArtefactReloader

TASK = tool_decision()
QUESTION = "Which city?"


def _artefact(target: int | None) -> CalibratorArtefact:
    """Vector scaling fitted on outcomes that follow p̂ (``None``) or are all ``target``."""
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(3), size=300)
    y = np.array([rng.choice(3, p=p) for p in P]) if target is None else np.full(300, target)
    return CalibratorArtefact(
        calibrator=make_calibrator("vector").fit(P, y), labels=list(TASK.labels), alpha=0.5,
        task=TASK, metadata={"created": f"2026-01-01T00:00:0{0 if target is None else 1}+00:00"},
    )  # fmt: skip


def _replace(path: Path, text: str) -> None:
    """Replace the file atomically with ``text`` (a new inode)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _model() -> FakeListChatModel:
    return FakeListChatModel(responses=[QUESTION])


def _runnable(path: Path, **kw: object) -> TaskCalibratedRunnable:
    return TaskCalibratedRunnable(
        _model(), TASK, str(path), n_samples=4, temperature=None, **kw
    )  # fmt: skip


def test_runnable_reloads_a_replaced_artefact_and_logs_its_id(tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    old, new = _artefact(None), _artefact(2)
    old.save(path)
    log = tmp_path / "log.jsonl"
    runnable = _runnable(path, reload_artefact=True, decision_log=log)
    first = runnable.invoke("Weather?")
    assert first.action == "request_for_info"
    new.save(path)
    second = runnable.invoke("Weather?")
    assert second.action == "cannot_answer"
    assert second.calibrated["cannot_answer"] > 0.9 > first.calibrated["cannot_answer"]
    ids = [r["artefact_id"] for r in open_decision_log(log).read()]
    assert ids == [artefact_id(old), artefact_id(new)]
    assert runnable.decider.calibrator is not None
    np.testing.assert_allclose(
        runnable.decider.calibrate(np.array([0.2, 0.5, 0.3])),
        new.calibrator.predict_proba([[0.2, 0.5, 0.3]])[0],
    )


def test_runnable_reloads_async(tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    _artefact(None).save(path)
    runnable = _runnable(path, reload_artefact=True)
    assert asyncio.run(runnable.ainvoke("Weather?")).action == "request_for_info"
    _artefact(2).save(path)
    assert asyncio.run(runnable.ainvoke("Weather?")).action == "cannot_answer"


def test_chat_model_passes_reload_to_its_runnable(tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    _artefact(None).save(path)
    chat = TaskCalibratedChatModel(
        _model(), TASK, str(path), n_samples=4, temperature=None, reload_artefact=True
    )
    meta = chat.invoke("Weather?").response_metadata[DECISION_METADATA_KEY]
    assert meta["action"] == "request_for_info"
    _artefact(2).save(path)
    meta = chat.invoke("Weather?").response_metadata[DECISION_METADATA_KEY]
    assert meta["action"] == "cannot_answer"


@pytest.mark.parametrize(
    "bad",
    [
        "{not json",
        '{"format": "taskcal.calibrator", "format_version": 1, "labels": ["a", "b"]}',
        "wrong-labels",
    ],
)
def test_a_bad_replacement_keeps_the_old_and_warns_once(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "cal.json"
    old = _artefact(None)
    old.save(path)
    log = tmp_path / "log.db"
    runnable = _runnable(path, reload_artefact=True, decision_log=log)
    if bad == "wrong-labels":
        other = CalibratorArtefact(
            calibrator=old.calibrator, labels=["x", "y", "z"], alpha=0.5, task_name="other"
        )
        other.save(path)
    else:
        _replace(path, bad)
    with pytest.warns(ArtefactReloadWarning, match="stays") as caught:
        decisions = [runnable.invoke("Weather?") for _ in range(3)]
    assert len([w for w in caught if w.category is ArtefactReloadWarning]) == 1
    assert [d.action for d in decisions] == ["request_for_info"] * 3
    assert {r["artefact_id"] for r in open_decision_log(log).read()} == {artefact_id(old)}
    # a later valid replacement is picked up
    _artefact(2).save(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert runnable.invoke("Weather?").action == "cannot_answer"


def test_a_missing_file_keeps_the_old_and_warns_once(tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    _artefact(None).save(path)
    runnable = _runnable(path, reload_artefact=True)
    path.unlink()
    with pytest.warns(ArtefactReloadWarning) as caught:
        actions = [runnable.invoke("Weather?").action for _ in range(2)]
    assert actions == ["request_for_info"] * 2 and len(caught) == 1


def test_no_reload_when_the_flag_is_off(tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    old = _artefact(None)
    old.save(path)
    log = tmp_path / "log.jsonl"
    runnable = _runnable(path, decision_log=log)
    _artefact(2).save(path)
    assert runnable.invoke("Weather?").action == "request_for_info"
    [record] = open_decision_log(log).read()
    assert record["artefact_id"] == artefact_id(old)


def test_reload_needs_a_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="reload_artefact"):
        TaskCalibratedRunnable(_model(), TASK, _artefact(None), reload_artefact=True)
    from tests.unit_tests.taskcal_agents.helpers.middleware_fakes import middleware

    with pytest.raises(ConfigurationError, match="reload_artefact"):
        middleware(calibrator=_artefact(None), reload_artefact=True)


def test_reloader_swaps_once_per_replacement(tmp_path: Path) -> None:
    path = tmp_path / "cal.json"
    _artefact(None).save(path)
    built: list[object] = []

    def build(r: object) -> object:
        built.append(r)
        return r

    reloader = ArtefactReloader(path, TASK, build, owner="test")
    first = reloader.current()
    assert reloader.current() is first and len(built) == 1
    _artefact(2).save(path)
    second = reloader.current()
    assert second is not first and reloader.current() is second
    assert (len(built), reloader.reloads, reloader.failures) == (2, 1, 0)
    expected = resolve_calibrator(str(path), TASK, owner="test")
    assert reloader.resolved.alpha == expected.alpha


# ---------------------------------------------------------------- middleware


def test_middleware_reloads_and_logs_the_new_id(tmp_path: Path) -> None:
    from tests.unit_tests.taskcal_agents.helpers.middleware_fakes import (
        CountingHandler,
        make_request,
        middleware,
        unwrap,
    )

    path = tmp_path / "cal.json"
    old, new = _artefact(None), _artefact(2)
    old.save(path)
    log = tmp_path / "log.jsonl"
    mw = middleware(calibrator=str(path), reload_artefact=True, decision_log=str(log))
    _, meta = unwrap(mw.wrap_model_call(make_request(), CountingHandler([QUESTION] * 4)))
    assert meta["action"] == "request_for_info"
    new.save(path)
    _, meta = unwrap(mw.wrap_model_call(make_request(), CountingHandler([QUESTION] * 4)))
    assert meta["action"] == "cannot_answer"
    _replace(path, "{broken")
    with pytest.warns(ArtefactReloadWarning):
        _, meta = unwrap(mw.wrap_model_call(make_request(), CountingHandler([QUESTION] * 4)))
    assert meta["action"] == "cannot_answer"  # the artefact in force stays
    ids = [r["artefact_id"] for r in open_decision_log(log).read()]
    assert ids == [artefact_id(old), artefact_id(new), artefact_id(new)]


def test_middleware_without_the_flag_does_not_reload(tmp_path: Path) -> None:
    from tests.unit_tests.taskcal_agents.helpers.middleware_fakes import (
        CountingHandler,
        make_request,
        middleware,
        unwrap,
    )

    path = tmp_path / "cal.json"
    _artefact(None).save(path)
    mw = middleware(calibrator=str(path))
    _artefact(2).save(path)
    _, meta = unwrap(mw.wrap_model_call(make_request(), CountingHandler([QUESTION] * 4)))
    assert meta["action"] == "request_for_info"


def test_decision_model_reloads_a_question_artefact_and_logs_its_id(tmp_path: Path) -> None:
    team = Choice(
        instructions="Which team?", criteria={"billing": "Pay.", "technical": "Bugs.", "sales": "$"}
    )
    labels = ["billing", "technical", "sales"]
    task = TaskCalibratedDecisionModel(chat_model=_model()).task_for("team", team)

    def fitted(target: int) -> CalibratorArtefact:
        P = np.random.default_rng(0).dirichlet(np.ones(3), size=300)
        cal = make_calibrator("vector").fit(P, np.full(300, target))
        return CalibratorArtefact(calibrator=cal, labels=labels, alpha=0.5, task=task)

    path, log = tmp_path / "team.json", tmp_path / "log.jsonl"
    old, new = fitted(0), fitted(2)
    old.save(path)
    model = TaskCalibratedDecisionModel(
        chat_model=FakeListChatModel(responses=["technical"]), calibrators={"team": str(path)},
        n_samples=4, temperature=None, reload_artefact=True, decision_log=log,
    )  # fmt: skip
    assert model.decide("Stripe fails.", "team", team).action == "billing"
    new.save(path)
    assert model.decide("Stripe fails.", "team", team).action == "sales"
    ids = [r["artefact_id"] for r in open_decision_log(log).read()]
    assert ids == [artefact_id(old), artefact_id(new)]


def test_graph_node_reloads_a_replaced_artefact_and_logs_its_id(tmp_path: Path) -> None:
    path, log = tmp_path / "cal.json", tmp_path / "log.jsonl"
    old, new = _artefact(None), _artefact(2)
    old.save(path)
    node = decision_node(
        _model(), TASK, str(path), options=SamplingOptions(n_samples=4, temperature=None),
        decision_log=log, reload_artefact=True,
    )  # fmt: skip
    state = {"messages": [HumanMessage("Weather?")], "taskcal_decisions": []}
    assert node.invoke(state)["taskcal_decisions"][-1]["action"] == "request_for_info"
    new.save(path)
    assert node.invoke(state)["taskcal_decisions"][-1]["action"] == "cannot_answer"
    ids = [r["artefact_id"] for r in open_decision_log(log).read()]
    assert ids == [artefact_id(old), artefact_id(new)]
