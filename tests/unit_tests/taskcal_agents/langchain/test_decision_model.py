"""TaskCalibratedDecisionModel (langchain_core.decisions) with fake chat models."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from langchain_core.decisions import (
    BaseDecisionModel,
    Box,
    Choice,
    ChoiceAnswer,
    ClassifierResponse,
    Noul,
    Score,
)
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage

from taskcal_agents.errors import ConfigurationError
from taskcal_agents.langchain._decision_model import TaskCalibratedDecisionModel, render_state
from taskcal_agents.parsing._labels import LabelParser
from taskcal_agents.production._decision_log import open_decision_log
from tests.unit_tests.taskcal_agents.helpers.data import TEAM

STATE = "Stripe fails whenever I connect my account."


def fake(*replies: str) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter(list(replies)))


def classify(model: TaskCalibratedDecisionModel, questions: dict[str, Any], mode: str) -> Any:
    request = {"state": STATE, "questions": questions}
    if mode == "sync":
        return model.invoke(request)
    return asyncio.run(model.ainvoke(request))


MODES = ["sync", "async"]


def test_is_a_decision_model() -> None:
    model = TaskCalibratedDecisionModel(chat_model=fake(), n_samples=2)
    assert isinstance(model, BaseDecisionModel)
    assert model.model == "GenericFakeChatModel"
    assert TaskCalibratedDecisionModel(chat_model=fake(), model="m").model == "m"


@pytest.mark.parametrize("mode", MODES)
def test_choice_answer_is_the_mbr_label_with_calibrated_probabilities(mode: str) -> None:
    model = TaskCalibratedDecisionModel(
        chat_model=fake("technical", "Technical.", "billing", "The answer is technical"),
        n_samples=4,
        alpha=0.0,
    )
    response = classify(model, {"team": TEAM}, mode)
    assert isinstance(response, ClassifierResponse)
    answer = response.choices["team"]
    assert isinstance(answer, ChoiceAnswer)
    assert answer.choice == "technical"
    assert answer.probabilities == pytest.approx({"billing": 0.25, "technical": 0.75, "sales": 0})
    assert answer.confidence == pytest.approx(0.75)
    assert response.model == "GenericFakeChatModel"


@pytest.mark.parametrize("mode", MODES)
def test_each_question_is_logged_as_the_other_doors_log(mode: str, tmp_path: Any) -> None:
    log = tmp_path / "decisions.jsonl"
    model = TaskCalibratedDecisionModel(
        chat_model=fake("technical", "billing", "technical", "technical"),
        calibrators={"team": None}, n_samples=4, alpha=0.0, decision_log=log,
    )  # fmt: skip
    classify(model, {"team": TEAM}, mode)
    [record] = list(open_decision_log(log).read())
    assert (record["task"], record["action"], record["n_samples"]) == ("team", "technical", 4)
    assert (
        record["model_name"] == "generic-fake-chat-model"
    )  # the sampled model, as every door logs it
    assert record["probs"] == pytest.approx({"billing": 0.25, "technical": 0.75, "sales": 0})


def test_costs_move_the_choice_away_from_the_mode() -> None:
    # Sending a billing request to sales is costly; 'billing' is safer although rarer.
    costs = {"team": [[0, 1, 10], [1, 0, 1], [1, 1, 0]]}
    model = TaskCalibratedDecisionModel(
        chat_model=fake("sales", "sales", "billing", "billing", "sales"),
        n_samples=5,
        alpha=0.0,
        costs=costs,
    )
    answer = model.invoke({"state": STATE, "questions": {"team": TEAM}}).choices["team"]
    assert answer.probabilities["sales"] == pytest.approx(0.6)
    assert answer.choice == "billing"


class Flip:
    """Calibrator stub: all mass on the first label."""

    n_classes_ = 3

    def predict_proba(self, P: np.ndarray) -> np.ndarray:
        return np.array([[0.8, 0.1, 0.1]] * len(P))


def test_calibrator_by_question_id() -> None:
    model = TaskCalibratedDecisionModel(
        chat_model=fake("sales", "sales"), n_samples=2, calibrators={"team": Flip()}
    )
    answer = model.invoke({"state": STATE, "questions": {"team": TEAM}}).choices["team"]
    assert answer.choice == "billing"
    assert answer.probabilities == pytest.approx({"billing": 0.8, "technical": 0.1, "sales": 0.1})


@pytest.mark.parametrize("mode", MODES)
def test_noul_and_score_questions(mode: str) -> None:
    model = TaskCalibratedDecisionModel(
        chat_model=fake("Yes.", "yes", "No", "yes, urgent", "2", "2", "1", "level 2"),
        n_samples=4,
        alpha=0.0,
    )
    questions = {
        "urgent": Noul(instructions="Is this urgent?"),
        "frustration": Score(instructions="How frustrated?", criteria=["calm", "annoyed", "angry"]),
    }
    if mode == "async":  # questions run concurrently: give each its own model
        model = model.model_copy(update={"chat_model": fake("Yes.", "yes", "No", "yes, urgent")})
        questions = {"urgent": questions["urgent"]}
    response = classify(model, questions, mode)
    assert response.nouls["urgent"].noul == pytest.approx(0.75)
    if mode == "sync":
        score = response.scores["frustration"]
        assert score.probabilities == pytest.approx({0: 0.0, 1: 0.25, 2: 0.75})
        assert score.score == pytest.approx(1.75)
        assert score.legend == {0: "calm", 1: "annoyed", 2: "angry"}
        assert score.confidence == pytest.approx(0.75)


def test_all_unparsed_gives_the_uniform_distribution() -> None:
    model = TaskCalibratedDecisionModel(chat_model=fake("hmm", "no idea"), n_samples=2)
    answer = model.invoke({"state": STATE, "questions": {"team": TEAM}}).choices["team"]
    assert answer.probabilities == pytest.approx({k: 1 / 3 for k in TEAM.criteria})
    decision = TaskCalibratedDecisionModel(chat_model=fake("hmm", "?"), n_samples=2).decide(
        STATE, "team", TEAM
    )
    assert decision.fallback is True
    assert decision.n_unparsed == 2


def test_prompt_lists_the_labels_and_renders_messages() -> None:
    model = TaskCalibratedDecisionModel(chat_model=fake())
    system, human = model.prompt_for([HumanMessage("hi"), AIMessage("hello")], TEAM)
    assert "exactly one of the allowed labels" in system.text
    assert human.text == (
        "Input:\nhuman: hi\nai: hello\n\nQuestion: Which team should handle this request?\n\n"
        "Allowed labels:\n- billing: Payment, invoice, or subscription issues.\n"
        "- technical: Product bugs or integration failures.\n"
        "- sales: Pricing or purchasing questions.\n\nAnswer with one label only."
    )
    assert render_state({"user": HumanMessage("hi"), "n": 1}) == (
        '{\n "user": {\n  "role": "human",\n  "content": "hi"\n },\n "n": 1\n}'
    )


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        ("Billing", "billing"),
        ("**technical**", "technical"),
        ("Sales, because they asked about pricing", "sales"),
        ("I would route it to the technical team.", "technical"),
        ("billing or sales", None),
        ("", None),
    ],
)
def test_label_parser(reply: str, label: str | None) -> None:
    assert LabelParser(labels=("billing", "technical", "sales"))(AIMessage(reply)) == label


def test_label_parser_prefers_an_opening_label_when_several_occur() -> None:
    parser = LabelParser(labels=("yes", "no"))
    assert parser(AIMessage("Yes, there is no doubt.")) == "yes"
    assert parser(AIMessage("I know it: no.")) == "no"


def test_box_questions_are_rejected() -> None:
    model = TaskCalibratedDecisionModel(chat_model=fake())
    match = (
        r"^TaskCalibratedDecisionModel answers Choice, Noul and Score questions, got a Box "
        r"question; use a vision model for Box questions\.$"
    )
    with pytest.raises(ConfigurationError, match=match):
        model.invoke({"state": STATE, "questions": {"where": Box(instructions="Find the cat")}})


def test_single_label_choice_is_rejected() -> None:
    model = TaskCalibratedDecisionModel(chat_model=fake())
    question = Choice(instructions="Pick", criteria={"only": None})
    match = (
        r"^TaskCalibratedDecisionModel question 'q' must offer at least two labels, got "
        r"\['only'\]\.$"
    )
    with pytest.raises(ConfigurationError, match=match):
        model.invoke({"state": STATE, "questions": {"q": question}})


def test_calibrator_with_the_wrong_class_count_is_rejected_before_sampling() -> None:
    class Two(Flip):
        n_classes_ = 2

    chat = fake()
    model = TaskCalibratedDecisionModel(chat_model=chat, calibrators={"team": Two()})
    match = (
        r"^calibrator Two was fitted on 2 classes but task 'team' has 3 labels \['billing', "
        r"'technical', 'sales'\]; fit the calibrator on this task's beliefs\.$"
    )
    with pytest.raises(ConfigurationError, match=match):
        model.invoke({"state": STATE, "questions": {"team": TEAM}})


def test_a_task_file_of_0_1_still_names_the_label_parser() -> None:
    """Artefacts written by 0.1 hold the parser under its module of then."""
    from taskcal_agents.decision._task import ParserSpec, Task

    old = Task(
        name="team",
        labels=["billing", "technical"],
        cost=[[0, 1], [1, 0]],
        parser=ParserSpec(
            name="taskcal_agents.decision_model:LabelParser",
            options={"labels": ["billing", "technical"]},
        ),
    )
    assert old.parse_completion(AIMessage("Technical.")) == "technical"
