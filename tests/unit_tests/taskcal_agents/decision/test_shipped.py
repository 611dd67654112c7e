"""Shipped calibrators: their record, ``calibrator="auto"`` at every front door, the id a
decision records, and ``taskcal calibrate`` that writes them."""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain.agents.middleware.types import ModelRequest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from typer.testing import CliRunner

import taskcal_agents.decision._shipped as shipped
from calibrators import TemperatureScaling
from taskcal_agents.cli import app
from taskcal_agents.decision import _presets as presets
from taskcal_agents.decision._artefact import CalibratorArtefact, content_sha256, resolve_calibrator
from taskcal_agents.decision._shipped import (
    ServedSettings,
    UncalibratedWarning,
    auto_artefact,
    fitted_on,
    load_shipped,
    mismatch,
)
from taskcal_agents.decision._task import GroundingSpec
from taskcal_agents.errors import ConfigurationError, DataFileError
from taskcal_agents.langchain._chat_model import TaskCalibratedChatModel
from taskcal_agents.langchain._decision_model import TaskCalibratedDecisionModel
from taskcal_agents.langchain._middleware import TaskCalibrationMiddleware
from taskcal_agents.langchain._runnable import TaskCalibratedRunnable
from taskcal_agents.parsing._relevance import RELEVANCE_FEATURES
from taskcal_agents.sampling import served_settings
from taskcal_agents.workflow._calibrate import calibrate_endpoint, calibrate_task
from tests.unit_tests.taskcal_agents.helpers.calibration import MODEL, PROMPT, shipped_artefact
from tests.unit_tests.taskcal_agents.helpers.chat_fakes import get_weather
from tests.unit_tests.taskcal_agents.helpers.data import TEAM, write_category


@pytest.fixture
def ship(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CalibratorArtefact:
    folder = tmp_path / "calibrators"
    folder.mkdir()
    shipped_artefact().save(folder / f"{MODEL}.json")
    (loaded,) = load_shipped(folder)
    monkeypatch.setattr(shipped, "shipped_artefacts", lambda: (loaded,))
    shipped._WARNED.clear()
    return loaded


class NamedModel(GenericFakeChatModel):
    """A fake chat model with a served name and a length limit, as ChatOpenAI has."""

    model_name: str = MODEL
    max_tokens: int | None = None


def replies(n: int) -> Iterator[AIMessage]:
    return iter([AIMessage(content="Which city do you mean?")] * n)


SERVED = ServedSettings(MODEL, 16, 1.0, None)


# ----------------------------------------------------------------------------- the record


def test_the_package_ships_valid_calibrators_with_their_record() -> None:
    for artefact in shipped.shipped_artefacts():
        rec = artefact.metadata["record"]
        assert rec["sampling"]["prompt"] == artefact.task.prompt == PROMPT
        assert rec["data"]["split"] == "train" and rec["command"].startswith("taskcal calibrate")
        assert (
            mismatch(artefact, presets.tool_decision(), SERVED._replace(model=rec["model"])) is None
        )


TRAIN_ITEMS = {MODEL: 688, "qwen2.5-coder-1.5b-instruct": 688}
"""The train split each shipped calibrator was fitted on (688: with its near misses and
generic names)."""


@pytest.mark.parametrize("model", [MODEL, "qwen2.5-coder-1.5b-instruct"])
def test_the_registry_models_calibrator_ships_and_a_front_door_takes_it(model: str) -> None:
    # The real package data, not a fixture: each Qwen2.5-Coder model's calibrator (fitted by
    # `taskcal calibrate` on the BFCL train split) is what "auto" picks for that model.
    (artefact,) = [a for a in shipped.shipped_artefacts() if a.metadata["record"]["model"] == model]
    assert artefact.metadata["calibrator_name"] == "logistic"
    assert artefact.metadata["relevance_features"] == list(RELEVANCE_FEATURES)
    n_items = TRAIN_ITEMS[model]
    assert artefact.metadata["record"]["data"]["n_items"] == n_items
    assert artefact.stopping_prior is not None and artefact.stopping_prior.n_items == n_items
    shipped._WARNED.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UncalibratedWarning)
        runnable = TaskCalibratedRunnable(
            NamedModel(messages=replies(16), model_name=model), presets.tool_decision()
        )
        decision = runnable.invoke([HumanMessage("What's the weather?")])
    assert runnable.decider.calibrator_id == decision.calibrator_id == artefact.content_id
    assert decision.relevance is not None and decision.calibrated != decision.probs


UPSTREAM_15B = "Qwen/Qwen2.5-Coder-1.5B-Instruct"
NOTE_15B = (
    "The calibrator bb6b8e905995d9ad was fitted on the registry's quantised weights of "
    "'qwen2.5-coder-1.5b-instruct' (GGUF, dequantised and served in bfloat16); this front "
    "door serves 'Qwen/Qwen2.5-Coder-1.5B-Instruct', so its calibration on the "
    "full-precision upstream weights is unmeasured."
)


def test_an_upstream_name_finds_the_registry_models_calibrator(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # `vllm serve Qwen/Qwen2.5-Coder-1.5B-Instruct`: the real package data, no warning, and
    # one INFO line saying the map was fitted on the registry's quantised weights.
    (artefact,) = [
        a
        for a in shipped.shipped_artefacts()
        if a.metadata["record"]["model"] == "qwen2.5-coder-1.5b-instruct"
    ]
    shipped._WARNED.clear()
    shipped._NOTED.clear()
    with warnings.catch_warnings(), caplog.at_level(logging.INFO, logger=shipped.__name__):
        warnings.simplefilter("error")
        runnables = [
            TaskCalibratedRunnable(
                NamedModel(messages=replies(16), model_name=UPSTREAM_15B), presets.tool_decision()
            )
            for _ in range(2)
        ]
    assert all(r.decider.calibrator_id == artefact.content_id for r in runnables)
    logged = [r for r in caplog.records if r.name == shipped.__name__]
    assert [(r.levelno, r.getMessage()) for r in logged] == [(logging.INFO, NOTE_15B)]  # once
    served = served_settings(
        NamedModel(messages=replies(1), model_name=UPSTREAM_15B), n_samples=16, temperature=1.0
    )
    assert served.registry_model == "qwen2.5-coder-1.5b-instruct"
    assert fitted_on(artefact, served) == NOTE_15B


@pytest.mark.parametrize(
    "name", ["/models/Qwen2.5-Coder-1.5B-Instruct", "qwen/qwen2.5-coder-1.5b-instruct"]
)
def test_a_path_ending_in_the_upstream_name_finds_it_too(name: str) -> None:
    model = NamedModel(messages=replies(1), model_name=name)
    served = served_settings(model, n_samples=16, temperature=1.0)
    shipped._WARNED.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = auto_artefact(presets.tool_decision(), served, owner="X")
    assert found is not None and found.content_id == "bb6b8e905995d9ad"


def test_a_quantised_upstream_variant_finds_none() -> None:
    model = NamedModel(messages=replies(1), model_name=f"{UPSTREAM_15B}-AWQ")
    served = served_settings(model, n_samples=16, temperature=1.0)
    assert served.registry_model is None
    shipped._WARNED.clear()
    with pytest.warns(
        UncalibratedWarning,
        match=(
            r"on model 'Qwen/Qwen2.5-Coder-1.5B-Instruct-AWQ' \(calibrators are shipped for "
            r"qwen2.5-coder-0.5b-instruct, qwen2.5-coder-1.5b-instruct\)"
        ),
    ):
        assert auto_artefact(presets.tool_decision(), served, owner="X") is None


def test_the_note_is_only_for_an_upstream_name(ship: CalibratorArtefact) -> None:
    upstream = SERVED._replace(model="Qwen/Qwen2.5-Coder-0.5B-Instruct", registry_model=MODEL)
    assert mismatch(ship, presets.tool_decision(), upstream) is None
    note = fitted_on(ship, upstream)
    assert note is not None and note.startswith(f"The calibrator {ship.content_id} was fitted")
    assert fitted_on(ship, SERVED) is None  # the registry name itself
    assert fitted_on(ship, SERVED._replace(registry_model=MODEL)) is None
    assert fitted_on(ship, SERVED._replace(model="other")) is None  # names no registry model
    bare = CalibratorArtefact(calibrator=ship.calibrator, labels=ship.labels)
    assert fitted_on(bare, upstream) is None  # no record
    with pytest.warns(UncalibratedWarning, match=r"shipped calibrator \w{16} does not fit: it"):
        auto_artefact(presets.tool_decision(), upstream._replace(n_samples=8), owner="X")


def test_the_demo_prompts_as_the_shipped_calibrators_were_fitted() -> None:
    from taskcal_agents.workflow._demo import DEMO_PROMPT, demo_task

    assert DEMO_PROMPT == PROMPT == presets.tool_decision().prompt
    assert mismatch(shipped_artefact(), demo_task(), SERVED) is None


def test_a_changed_shipped_file_is_refused(tmp_path: Path) -> None:
    data = shipped_artefact().to_dict()
    assert data["content_sha256"] == content_sha256(data)
    data["alpha"] = 0.5
    (tmp_path / "x.json").write_text(json.dumps(data))
    with pytest.raises(DataFileError, match="does not match its content_sha256"):
        load_shipped(tmp_path)


def test_a_shipped_file_without_a_record_is_refused(tmp_path: Path) -> None:
    artefact = shipped_artefact()
    del artefact.metadata["record"]
    artefact.save(tmp_path / "x.json")
    with pytest.raises(DataFileError, match="no complete record"):
        load_shipped(tmp_path)


@pytest.mark.parametrize(
    ("task", "served", "why"),
    [
        (presets.tool_decision(), SERVED._replace(model="Qwen/Qwen2.5-7B"), "model"),
        (presets.tool_decision(), SERVED._replace(n_samples=8), "N = 16"),
        (presets.tool_decision(), SERVED._replace(temperature=0.7), "temperature 1.0"),
        (presets.tool_decision(), SERVED._replace(temperature=None), "temperature"),
        (presets.tool_decision(), SERVED._replace(max_tokens=64), "max_tokens 256"),
        (presets.tool_decision(), SERVED._replace(task_prompt=False), "prompt"),
        (presets.tool_decision(prompt="Be brief."), SERVED, "prompt"),
        (presets.tool_decision(unparsed="drop"), SERVED, "unparsed"),
        (presets.tool_decision(grounding=None), SERVED, "grounding"),
        (presets.tool_decision(direct_answer=True), SERVED, "labels"),
    ],
)
def test_a_record_matches_only_its_model_settings_and_belief(
    ship: CalibratorArtefact, task: Any, served: ServedSettings, why: str
) -> None:
    assert why in (mismatch(ship, task, served) or "")


def test_costs_names_tools_and_a_longer_limit_do_not_change_the_belief(
    ship: CalibratorArtefact,
) -> None:
    task = presets.tool_decision(cost=[[0, 1, 1], [8, 0, 1], [8, 1, 0]], name="mine",
                                 tool_names=["get_weather"], ask_text="Say more?")  # fmt: skip
    for served in (SERVED, SERVED._replace(max_tokens=256), SERVED._replace(max_tokens=4096)):
        assert mismatch(ship, task, served) is None


# ------------------------------------------------------------------------ the front doors


def test_auto_picks_the_shipped_calibrator_and_decisions_name_it(ship: CalibratorArtefact) -> None:
    runnable = TaskCalibratedRunnable(NamedModel(messages=replies(16)), presets.tool_decision())
    assert runnable.decider.calibrator_id == ship.content_id
    decision = runnable.invoke([HumanMessage("What's the weather?")])
    assert decision.calibrator_id == ship.content_id
    assert decision.calibrated != decision.probs  # the shipped map decided
    assert runnable.decider.alpha == ship.alpha and runnable.alpha is None
    chat = TaskCalibratedChatModel(NamedModel(messages=replies(16)), presets.tool_decision())
    assert chat.runnable.decider.calibrator_id == ship.content_id


def test_auto_without_a_match_warns_once_and_decides_on_the_raw_belief(
    ship: CalibratorArtefact,
) -> None:
    def build() -> TaskCalibratedRunnable:
        return TaskCalibratedRunnable(
            NamedModel(messages=replies(8)), presets.tool_decision(), n_samples=8
        )

    with pytest.warns(UncalibratedWarning, match=r"fitted on N = 16 samples.*taskcal calibrate"):
        runnable = build()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = build()  # once per reason
    for r in (runnable, again):
        assert r.decider.calibrator is None and r.decider.calibrator_id is None
    decision = runnable.invoke([HumanMessage("What's the weather?")])
    assert decision.calibrated == decision.probs and decision.calibrator_id is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # None: the raw belief, silently
        TaskCalibratedRunnable(NamedModel(messages=replies(8)), presets.tool_decision(),
                               calibrator=None, n_samples=8)  # fmt: skip


def test_another_model_is_told_which_models_have_calibrators(ship: CalibratorArtefact) -> None:
    with pytest.warns(
        UncalibratedWarning, match=f"on model 'other' .calibrators are shipped for {MODEL}"
    ):
        TaskCalibratedRunnable(NamedModel(messages=replies(1), model_name="other"),
                               presets.tool_decision())  # fmt: skip
    shipped._WARNED.clear()
    with pytest.warns(UncalibratedWarning, match="task 'rating'"):
        assert auto_artefact(presets.rating(), SERVED, owner="X") is None
    with pytest.raises(ConfigurationError, match="must be resolved by the front door"):
        resolve_calibrator("auto", presets.rating(), owner="X")


def test_the_middleware_resolves_auto_for_the_requests_model(ship: CalibratorArtefact) -> None:
    middleware = TaskCalibrationMiddleware(task=presets.tool_decision())
    request = ModelRequest(
        model=NamedModel(messages=replies(1)), messages=[HumanMessage("Weather?")],
        system_message=None, tool_choice=None, tools=[], response_format=None, state={},
        runtime=None,  # type: ignore[arg-type]
    )  # fmt: skip
    decider, aid, _ = _in_force(middleware, request)
    assert decider.calibrator_id == aid == ship.content_id
    assert _in_force(middleware, request)[0] is decider  # resolved once per setting
    other = request.override(model=NamedModel(messages=replies(1), model_name="other"))
    with pytest.warns(UncalibratedWarning):
        assert _in_force(middleware, other)[0].calibrator_id is None
    # what the agent binds per request counts: a shorter limit, a forced call, top_p
    for changed, why in (
        ({"model_settings": {"max_tokens": 16}}, "max_tokens 256"),
        ({"model_settings": {"top_p": 0.5}}, "default top_p"),
        ({"tools": [get_weather], "tool_choice": "any"}, "front door sets 'any'"),
    ):
        with pytest.warns(UncalibratedWarning, match=why):
            assert _in_force(middleware, request.override(**changed))[0].calibrator_id is None
    assert _in_force(middleware, request.override(tools=[get_weather]))[0] is decider


def _in_force(middleware: TaskCalibrationMiddleware[Any, Any], request: Any) -> Any:
    """The Decider (and artefact id) the middleware begins ``request``'s decision with."""
    return middleware._begin(request)[0].in_force


def test_an_explicit_alpha_or_a_bound_setting_is_another_belief(ship: CalibratorArtefact) -> None:
    for kwargs, why in (({"alpha": 1.0}, "alpha 0.1"), ({}, "default top_k")):
        model = NamedModel(messages=replies(1))
        bound = model.bind(top_k=5) if not kwargs else model
        with pytest.warns(UncalibratedWarning, match=why):
            TaskCalibratedRunnable(bound, presets.tool_decision(), temperature=1.0, **kwargs)
    sends_any = presets.tool_decision(grounding=GroundingSpec(relevance=True, execute="any"))
    assert mismatch(ship, sends_any, SERVED) is None  # what is sent is not what is believed


def test_front_doors_without_auto_stay_silent(ship: CalibratorArtefact) -> None:
    from taskcal_agents.langchain._interop import risk_classifier

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = risk_classifier(NamedModel(messages=replies(1)))  # calibrator=None: raw
        assert model.calibrators == {"is_risky": None}
        runnable = TaskCalibratedRunnable(
            NamedModel(messages=replies(1)), presets.tool_decision(), calibrator=None
        )
        chat = TaskCalibratedChatModel(runnable=runnable)
        assert chat.runnable is runnable
    with pytest.raises(ConfigurationError, match=r"got runnable and \['calibrator'\]"):
        TaskCalibratedChatModel(runnable=runnable, calibrator=None)
    no_dict = CalibratorArtefact(calibrator=FakeCal(), labels=list(TEAM.criteria))
    assert no_dict.content_id is None
    listed = TaskCalibratedDecisionModel(
        chat_model=NamedModel(messages=replies(1)), n_samples=4, calibrators={"team": no_dict}
    )
    assert listed._decider("team", TEAM).calibrator_id is None


class FakeCal:
    """A calibrator that cannot be written (no ``to_dict``)."""

    n_classes_ = 3

    def predict_proba(self, X: Any) -> Any:
        return np.asarray(X, dtype=float)


def test_the_decision_model_takes_auto_for_unlisted_questions(ship: CalibratorArtefact) -> None:
    model = TaskCalibratedDecisionModel(chat_model=NamedModel(messages=replies(1)), n_samples=4)
    with pytest.warns(UncalibratedWarning, match="question 'team'"):
        decider = model._decider("team", TEAM)  # no shipped calibrator for a choice question
    assert decider.calibrator is None
    fitted = TemperatureScaling().fit(np.eye(3)[[0, 1, 2] * 4], np.array([0, 1, 2] * 4))
    listed = TaskCalibratedDecisionModel(
        chat_model=NamedModel(messages=replies(1)), n_samples=4, calibrators={"team": fitted}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert listed._decider("team", TEAM).calibrator is fitted


def test_auto_cannot_be_reloaded() -> None:
    with pytest.raises(ConfigurationError, match=r"reload_artefact.*got 'auto'"):
        TaskCalibratedRunnable(NamedModel(messages=replies(1)), presets.tool_decision(),
                               reload_artefact=True)  # fmt: skip


# ------------------------------------------------------------------------ taskcal calibrate


class ToolSampler:
    """Calls the first offered tool with the item's words, asks or refuses, by the item."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def sample(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int,
        temperature: float,
        tools: Sequence[Mapping[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> list[AIMessage]:
        self.calls.append({"n": n, "temperature": temperature, "max_tokens": max_tokens,
                           "system": messages[0]["content"]})  # fmt: skip
        name = (tools or [{}])[0].get("function", {}).get("name", "f")
        call = AIMessage(content="", tool_calls=[{"name": name, "args": {}, "id": "c"}])
        ask = AIMessage(content="Which city do you mean?")
        refuse = AIMessage(content="I'm sorry, I cannot help with that.")
        pick = [call, ask, refuse]
        h = sum(map(ord, str(messages[-1]["content"])))
        return [pick[(h + i) % 3] if i % 4 else pick[h % 3] for i in range(n)]


FEW_ITEMS = pytest.mark.filterwarnings("ignore:adaptive N's stopping prior is fitted on")
"""The toy corpus's train split has 15 items (a trial run fewer): the stopping prior warns."""


@pytest.fixture
def source(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    for category, k in (("simple_python", 1), ("multiple", 2), ("live_multiple", 3)):
        write_category(root, category, 36, k)
    return root


@FEW_ITEMS
def test_calibrate_samples_the_train_split_fits_and_records_how(
    tmp_path: Path, source: Path
) -> None:
    sampler = ToolSampler()
    estimates: list[tuple[float, int]] = []
    result = calibrate_endpoint(
        sampler, model="m", source=source, work_dir=tmp_path / "work", n=4, concurrency=2,
        calibrator="temperature", dtype="float32", command="taskcal calibrate --model m",
        on_estimate=lambda s, left: estimates.append((s, left)),
    )  # fmt: skip
    artefact = result.artefact
    assert artefact is not None and result.path == tmp_path / "work" / "calibrator.json"
    rec = artefact.metadata["record"]
    assert artefact.task == calibrate_task() and artefact.task.reads_relevance
    assert artefact.metadata["calibrator_name"] == "temperature"
    n_items = rec["data"]["n_items"]
    assert n_items == result.report.total == len(sampler.calls) > 8
    assert estimates and estimates[0][1] == n_items - 8 and estimates[0][0] >= 0
    assert rec["model"] == "m" and rec["command"] == "taskcal calibrate --model m"
    assert rec["sampling"] == {"task": "bfcl", "n": 4, "temperature": 1.0, "max_tokens": 256,
                               "prompt": PROMPT, "dtype": "float32",
                               "belief": "samples"}  # fmt: skip
    assert rec["data"]["split"] == "train" and rec["data"]["source_sha256"] is None
    assert {c["n"] for c in sampler.calls} == {4} and {c["max_tokens"] for c in sampler.calls} == {
        256
    }
    assert all(PROMPT in c["system"] for c in sampler.calls)
    # what ships: it loads as shipped and matches its own setting
    folder = tmp_path / "ship"
    folder.mkdir()
    (folder / "m.json").write_text(result.path.read_text())
    (loaded,) = load_shipped(folder)
    assert loaded.content_id == artefact.content_id
    assert loaded.stopping_prior is not None and loaded.stopping_prior.n_items == n_items
    assert mismatch(loaded, presets.tool_decision(), ServedSettings("m", 4, 1.0)) is None
    # a rerun resumes: nothing sampled again, the same fit
    again = calibrate_endpoint(
        sampler, model="m", source=source, work_dir=tmp_path / "work", n=4,
        calibrator="temperature", dtype="float32", command="taskcal calibrate --model m",
    )  # fmt: skip
    assert again.report.written == 0 and len(sampler.calls) == n_items
    assert again.artefact is not None
    assert again.artefact.calibrator.to_dict() == artefact.calibrator.to_dict()


@FEW_ITEMS
def test_calibrate_refuses_to_resume_under_other_settings(tmp_path: Path, source: Path) -> None:
    calibrate_endpoint(ToolSampler(), model="m", source=source, work_dir=tmp_path, n=4, limit=3,
                       calibrator="temperature")  # fmt: skip
    with pytest.raises(DataFileError, match="temperature"):
        calibrate_endpoint(ToolSampler(), model="m", source=source, work_dir=tmp_path, n=4,
                           temperature=0.7, limit=3)  # fmt: skip
    with pytest.raises(DataFileError, match="drawn for other items"):
        calibrate_endpoint(ToolSampler(), model="m", source=source, work_dir=tmp_path, n=4,
                           limit=5)  # fmt: skip


class Interrupted(ToolSampler):
    """Fails every call after the first ``ok``: the run stops at ``max_failures``."""

    def __init__(self, ok: int) -> None:
        super().__init__()
        self.ok = ok

    def sample(self, messages: Any, **kwargs: Any) -> list[AIMessage]:
        if len(self.calls) >= self.ok:
            msg = "connection refused"
            raise ConnectionError(msg)
        return super().sample(messages, **kwargs)


@FEW_ITEMS
def test_an_interrupted_calibrate_resumes_with_honest_totals(tmp_path: Path, source: Path) -> None:
    first = calibrate_endpoint(Interrupted(ok=10), model="m", source=source, work_dir=tmp_path,
                               n=4, concurrency=1, max_failures=2)  # fmt: skip
    assert first.artefact is None
    assert (first.report.written, first.report.skipped) == (10, 0) and first.report.failures
    second = calibrate_endpoint(ToolSampler(), model="m", source=source, work_dir=tmp_path, n=4,
                                calibrator="temperature")  # fmt: skip
    total = second.report.total
    assert (second.report.skipped, second.report.written) == (10, total - 10)
    assert second.artefact is not None


@FEW_ITEMS
def test_the_command_prints_its_expected_duration_and_the_artefact(
    tmp_path: Path, source: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import taskcal_agents.commands._calibrate as cmd

    monkeypatch.setattr(cmd, "make_sampler", lambda *a: ToolSampler())
    args = ["calibrate", "--base-url", "http://x/v1", "--model", "m", "--source", str(source),
            "--work-dir", str(tmp_path / "w"), "--n", "4",
            "--calibrator", "temperature"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "expected duration: about" in result.output
    assert "wrote" in result.output and "content id" in result.output
    text = (tmp_path / "w" / "calibrator.json").read_text()
    assert str(tmp_path) not in text and "http://x" not in text  # no local path, no server
    assert json.loads(text)["record"]["command"] == (
        "taskcal calibrate --base-url URL --model m --source data --work-dir WORK_DIR --n 4 "
        "--temperature 1 --max-tokens 256 --calibrator temperature --concurrency 4"
    )
    missing = CliRunner().invoke(app, ["calibrate", "--source", str(source), "--work-dir", "w"],
                                 env={"TASKCAL_BASE_URL": "", "TASKCAL_MODEL": ""})  # fmt: skip
    assert missing.exit_code == 2 and "--base-url and --model are required" in missing.output


def test_an_artefact_of_other_relevance_features_is_refused(ship: CalibratorArtefact) -> None:
    old = shipped_artefact()
    old.metadata["relevance_features"] = list(RELEVANCE_FEATURES[:5])  # before call_agreement
    assert "relevance features" in (mismatch(old, presets.tool_decision(), SERVED) or "")
    with pytest.raises(ConfigurationError, match="refit it"):
        resolve_calibrator(old, presets.tool_decision(), owner="X")


@FEW_ITEMS
def test_calibrate_fits_its_own_task_whatever_the_samples_were_drawn_under(
    tmp_path: Path, source: Path
) -> None:
    first = calibrate_endpoint(ToolSampler(), model="m", source=source, work_dir=tmp_path, n=4,
                               calibrator="logistic")  # fmt: skip
    samples = tmp_path / "samples.jsonl"
    lines = samples.read_text().splitlines()
    header = json.loads(lines[0])
    header["task"]["grounding"]["relevance"] = False  # drawn under the plain grounding
    samples.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    again = calibrate_endpoint(ToolSampler(), model="m", source=source, work_dir=tmp_path, n=4,
                               calibrator="logistic")  # fmt: skip
    for result in (first, again):
        assert result.artefact is not None and result.artefact.task == calibrate_task()
        assert result.artefact.calibrator.n_features_in_ == calibrate_task().n_inputs
        assert result.artefact.metadata["relevance_features"] == list(RELEVANCE_FEATURES)


class OnePassToolSampler(ToolSampler):
    """Scripted top tokens for a choice request (by the item), else :class:`ToolSampler`."""

    def sample(self, messages: Sequence[Mapping[str, Any]], **params: Any) -> list[AIMessage]:  # type: ignore[override]
        choices = (params.get("structured_outputs") or {}).get("choice")
        if choices is None:
            return super().sample(messages, **params)
        self.calls.append({"n": params["n"], "choices": choices})
        h = sum(map(ord, str(messages[-1]["content"])))
        first = ["call", "ask", "no"]
        top = {t: np.log(0.7 if i == h % 3 else 0.15) for i, t in enumerate(first)}
        entries = [{"token": t, "bytes": list(t.encode()), "logprob": lp} for t, lp in top.items()]
        content = [{"token": "call", "logprob": 0.0, "top_logprobs": entries}]
        return [AIMessage(content="", response_metadata={"logprobs": {"content": content}})]


@FEW_ITEMS
def test_calibrate_one_pass_fits_on_one_pass_records(tmp_path: Path, source: Path) -> None:
    sampler = OnePassToolSampler()
    result = calibrate_endpoint(
        sampler, model="m", source=source, work_dir=tmp_path / "work", calibrator="temperature",
        belief="one_pass", out=tmp_path / "work" / "one_pass.json",
    )  # fmt: skip
    artefact = result.artefact
    assert artefact is not None and result.samples.name == "samples.one_pass.jsonl"
    assert artefact.metadata["record"]["sampling"]["belief"] == "one_pass"
    choice_requests = [c for c in sampler.calls if "choices" in c]
    greedy = [c for c in sampler.calls if "choices" not in c]
    n_items = artefact.metadata["record"]["data"]["n_items"]
    assert len(choice_requests) == len(greedy) == n_items  # one pass and one greedy per item
    assert {c["temperature"] for c in greedy} == {0.0}
    one_pass = served_settings(GenericFakeChatModel(messages=iter([])), n_samples=16,
                               temperature=1.0, belief="one_pass")._replace(model="m")  # fmt: skip
    assert shipped.mismatch(artefact, calibrate_task(), one_pass) is None
    assert shipped.mismatch(artefact, calibrate_task(), one_pass._replace(belief="samples"))


def test_a_one_pass_door_takes_no_calibrator_fitted_on_samples(ship: CalibratorArtefact) -> None:
    with pytest.warns(UncalibratedWarning, match=r"fitted on sampled beliefs.*one-pass beliefs"):
        runnable = TaskCalibratedRunnable(
            NamedModel(messages=replies(1)), presets.tool_decision(), belief="one_pass"
        )
    assert runnable.decider.calibrator is None and runnable.decider.calibrator_id is None
