"""Open-answer latents wired in: the belief of the answer clusters, the label of the modal
answer, the modal answer at run time, one path for sampling, evaluation and runtime."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from typer.testing import CliRunner

from taskcal_agents.cli import app
from taskcal_agents.datasets import DatasetItem, default_task
from taskcal_agents.decision import _presets as tasks
from taskcal_agents.decision._decider import Decider, Decision
from taskcal_agents.decision._options import SamplingOptions
from taskcal_agents.decision._task import AnswerClusterSpec, Task
from taskcal_agents.errors import ConfigurationError, DataFileError
from taskcal_agents.langchain._runnable import TaskCalibratedRunnable
from taskcal_agents.parsing._answer_clusters import (
    AnswerClusters,
    cluster_answers,
    cluster_samples,
    question_of,
)
from taskcal_agents.parsing._grading import DEFAULT_MAX_CONTAINMENT_TOKENS
from taskcal_agents.workflow import (
    SampleSettings,
    SamplesStore,
    read_samples,
    run_sampling,
    sample_header,
)
from taskcal_agents.workflow._data import eval_arrays
from taskcal_agents.workflow._evaluate import evaluate_arrays
from taskcal_agents.workflow._evaluation_json import evaluation_to_dict

QUESTION = "What is the capital of France?"
# The first sample is a minority answer; the modal cluster's representative is sample 1.
SAMPLES = ["Lyon", "The capital is Paris.", "Paris", "paris!", "Lyon.", "I don't know.", ""]


def cluster_task(method: str = "lexical", **kw: Any) -> Task:
    return tasks.answer_or_abstain(answer_clusters=method, **kw)


def messages(texts: Sequence[str]) -> list[AIMessage]:
    return [AIMessage(content=t) for t in texts]


# ------------------------------------------------------------------------- configuration


def test_task_option_selects_the_clustering() -> None:
    assert tasks.answer_or_abstain().answer_clusters is None
    spec = cluster_task().answer_clusters
    assert spec == AnswerClusterSpec(method="lexical")
    assert spec.max_containment_tokens == DEFAULT_MAX_CONTAINMENT_TOKENS
    assert cluster_task("entailment").answer_clusters == AnswerClusterSpec(method="entailment")
    full = tasks.answer_or_abstain().model_dump() | {
        "answer_clusters": {"method": "lexical", "max_containment_tokens": 5}
    }
    assert Task.model_validate(full).answer_clusters == AnswerClusterSpec(max_containment_tokens=5)


def test_task_files_round_trip_and_old_files_load(tmp_path: Path) -> None:
    task = cluster_task(name="nq-open")
    assert Task.from_file(task.to_file(tmp_path / "t.yaml")) == task
    assert Task.from_file(task.to_file(tmp_path / "t.json")) == task
    old = tasks.answer_or_abstain().model_dump(mode="json")
    del old["answer_clusters"]  # a task file written before the option existed
    (tmp_path / "old.json").write_text(json.dumps(old), encoding="utf-8")
    assert Task.from_file(tmp_path / "old.json").answer_clusters is None


def test_task_option_is_validated() -> None:
    msg = (
        "Task 'answer_or_abstain' is invalid (1 error): field 'answer_clusters.method': Input "
        "should be 'lexical' or 'entailment', got 'embedding'."
    )
    with pytest.raises(ConfigurationError, match=f"^{re.escape(msg)}$"):
        cluster_task("embedding")
    msg = (
        "Task 'rating' is invalid (1 error): task 'rating' is not an answer-or-abstain task: "
        "graded items and answer clusters need the parser 'answer_or_abstain' (its answer and "
        "abstain labels among the task labels), got parser 'rating' and labels ['1', '2', '3', "
        "'4', '5']."
    )
    with pytest.raises(ConfigurationError, match=f"^{re.escape(msg)}$"):
        tasks.rating(answer_clusters="lexical")
    msg = (
        "Task 'qa' is invalid (1 error): answer_clusters needs exactly the labels ['answer', "
        "'abstain'] and the action 'answer', got labels ['answer', 'abstain', 'unsure'] and "
        "actions ['answer', 'abstain', 'unsure']."
    )
    with pytest.raises(ConfigurationError, match=f"^{re.escape(msg)}$"):
        Task(
            name="qa",
            labels=["answer", "abstain", "unsure"],
            cost=[[0, 1, 1], [4, 0, 1], [1, 1, 0]],
            parser="answer_or_abstain",
            answer_clusters="lexical",
        )


def test_dataset_tasks_cluster_open_answers() -> None:
    for name in ("nq-open", "simpleqa"):
        task = default_task(name)
        assert task.answer_clusters == AnswerClusterSpec(method="lexical")
        assert task.labels == ["answer", "abstain"]
        assert task.cost == [[0.0, 1.0], [4.0, 0.0]]


# ------------------------------------------------------------------------------- belief


def test_belief_is_the_share_of_the_modal_cluster() -> None:
    task = cluster_task()
    clusters, labels = cluster_samples(
        task,
        messages(SAMPLES),
        [task.parse_completion(m) for m in messages(SAMPLES)],
        question=QUESTION,
    )
    assert clusters is not None
    assert clusters.n_clusters == 2
    assert clusters.sizes == (2, 3)
    assert clusters.representative == 1
    # modal cluster → answer; the other answer and the abstention → abstain; empty: unparsed
    assert labels == ["abstain", "answer", "answer", "answer", "abstain", "abstain", None]
    belief = task.belief_from_labels(labels, alpha=0.1)
    assert belief.counts.tolist() == [3.0, 3.0]
    assert belief.n_unparsed == 1
    np.testing.assert_allclose(belief.probs, [0.5, 0.5])


def test_decision_reads_the_clusters_and_answers_with_the_modal_representative() -> None:
    # C[abstain, answer] = 1: answering pays when the modal share beats one half.
    task = cluster_task(wrong_answer_cost=1.0)
    texts = SAMPLES[:5]
    decision = Decider(task, alpha=0.1).decide(
        messages(texts), question=QUESTION, return_samples=True
    )
    assert decision.action == "answer"
    assert decision.counts == {"answer": 3.0, "abstain": 2.0}
    assert decision.probs["answer"] == pytest.approx(3.1 / 5.2)
    assert decision.n_clusters == 2
    assert decision.sample_labels == ["abstain", "answer", "answer", "answer", "abstain"]
    assert decision.message is not None
    assert decision.message.content == "The capital is Paris."
    # Without clustering the answer would be the most frequent text ("Lyon" ties first).
    plain = Decider(tasks.answer_or_abstain(wrong_answer_cost=1.0)).decide(messages(texts))
    assert plain.n_clusters is None
    assert plain.message is not None
    assert plain.message.content == "Lyon"


def test_decision_abstains_when_the_answers_disagree() -> None:
    texts = ["Paris", "Lyon", "Nice", "Lille", "Paris is the capital."]
    decision = Decider(cluster_task()).decide(messages(texts), question=QUESTION)
    assert decision.counts == {"answer": 2.0, "abstain": 3.0}
    assert decision.n_clusters == 4
    assert decision.action == "abstain"
    assert decision.message is not None
    assert decision.message.content == cluster_task().abstain_text


def test_decision_without_any_answer_takes_the_fallback() -> None:
    decision = Decider(cluster_task()).decide(messages(["", ""]), question=QUESTION)
    assert decision.fallback
    assert decision.action == "abstain"
    assert decision.n_clusters == 0
    empty = Decider(cluster_task()).decide([], question=QUESTION)
    assert empty.fallback
    assert empty.n_clusters is None


def test_the_question_keeps_question_words_from_joining_clusters() -> None:
    texts = ["France", "France", "The capital of France is Paris."]
    with_question = Decider(cluster_task()).decide(messages(texts), question=QUESTION)
    assert with_question.n_clusters == 2
    without = Decider(cluster_task()).decide(messages(texts))
    assert without.n_clusters == 1


def judge_factory(same: set[frozenset[str]], questions: list[str] | None = None) -> Any:
    """A fake entailment judge: two answers mean the same when their pair is in *same*."""

    def make(*, question: str) -> Any:
        if questions is not None:
            questions.append(question)
        return lambda a, b: frozenset((a, b)) in same

    return make


def test_entailment_clusters_with_the_judge() -> None:
    texts = ["Paris", "The French capital", "Lyon", "The French capital"]
    same = {frozenset(("Paris", "The French capital"))}
    questions: list[str] = []
    decider = Decider(cluster_task("entailment"), judge=judge_factory(same, questions))
    decision = decider.decide(messages(texts), question=QUESTION)
    assert decision.n_clusters == 2
    assert decision.counts == {"answer": 3.0, "abstain": 1.0}
    assert questions == [QUESTION]
    # the lexical clustering of the same samples keeps them apart
    assert Decider(cluster_task()).decide(messages(texts), question=QUESTION).n_clusters == 3


def test_entailment_needs_a_judge_and_a_question() -> None:
    msg = (
        "Decider for task 'answer_or_abstain': answer_clusters method 'entailment' asks the "
        "served model whether two answers mean the same, so it needs a judge; pass "
        "judge=functools.partial(entailment_judge, sampler) or use method 'lexical'."
    )
    with pytest.raises(ConfigurationError, match=re.escape(msg)):
        Decider(cluster_task("entailment"))
    with pytest.raises(
        ConfigurationError,
        match=re.escape("Decider parameter 'judge' must be callable (question= → entails(a, b)) "),
    ):
        Decider(cluster_task("entailment"), judge="yes")
    decider = Decider(cluster_task("entailment"), judge=judge_factory(set()))
    msg = (
        "Decider for task 'answer_or_abstain': answer_clusters method 'entailment' asks the "
        "judge about the question the samples answer, got question=None; pass "
        "decide(..., question=...) (the text of the request's last user message, "
        "answer_clusters.question_of)."
    )
    with pytest.raises(ConfigurationError, match=re.escape(msg)):
        decider.decide(messages(["Paris", "Lyon"]))


def test_question_of_reads_the_last_user_message() -> None:
    assert question_of([SystemMessage("Be brief."), HumanMessage(QUESTION)]) == QUESTION
    dicts = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "?"},
        {
            "role": "user",
            "content": [{"type": "text", "text": " What is "}, {"type": "text", "text": "it?"}],
        },
    ]
    assert question_of(dicts) == "What is  it?"
    assert question_of([SystemMessage("x")]) is None
    assert question_of([{"role": "user", "content": "  "}]) is None


def test_clusters_from_assignments_round_trip() -> None:
    answers = ["Paris", None, "Lyon", "paris", ""]
    clusters = cluster_answers(answers)
    assert AnswerClusters.from_assignments(answers, clusters.assignments) == clusters
    with pytest.raises(ConfigurationError, match=re.escape("2 assignments for 5 answers")):
        AnswerClusters.from_assignments(answers, [0, None])
    msg = (
        "AnswerClusters.from_assignments: answer 0 ('Paris') has cluster 1; an answer needs "
        "the index of an earlier cluster or the next one (0), an abstention None."
    )
    with pytest.raises(ConfigurationError, match=re.escape(msg)):
        AnswerClusters.from_assignments(answers, [1, None, 0, 0, None])


# ------------------------------------------------------------------------------ runtime


def invoke(runnable: TaskCalibratedRunnable, input_: Any, mode: str) -> Decision:
    if mode == "sync":
        return runnable.invoke(input_)
    return asyncio.run(runnable.ainvoke(input_))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_runnable_answers_with_the_modal_representative(mode: str) -> None:
    model = GenericFakeChatModel(messages=iter(SAMPLES[:5]))
    runnable = TaskCalibratedRunnable(
        model, cluster_task(wrong_answer_cost=1.0), n_samples=5, temperature=None
    )
    decision = invoke(runnable, QUESTION, mode)
    assert decision.action == "answer"
    assert decision.n_clusters == 2
    assert decision.message is not None
    assert decision.message.content == "The capital is Paris."


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_runnable_passes_the_question_to_the_judge(mode: str) -> None:
    questions: list[str] = []
    same = {frozenset(("Paris", "The French capital"))}
    model = GenericFakeChatModel(messages=iter(["Paris", "The French capital", "Lyon"]))
    runnable = TaskCalibratedRunnable(
        model,
        cluster_task("entailment", wrong_answer_cost=1.0),
        n_samples=3,
        temperature=None,
        judge=judge_factory(same, questions),
    )
    input_ = [SystemMessage("Answer briefly."), HumanMessage(QUESTION)]
    decision = invoke(runnable, input_, mode)
    assert questions == [QUESTION]
    assert decision.n_clusters == 2
    assert decision.counts == {"answer": 2.0, "abstain": 1.0}
    assert decision.message is not None
    assert decision.message.content == "Paris"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_middleware_answers_with_the_modal_representative_of_the_question(mode: str) -> None:
    from taskcal_agents.langchain._middleware import TaskCalibrationMiddleware
    from tests.unit_tests.taskcal_agents.helpers.middleware_fakes import (
        CountingHandler,
        make_request,
        run_hook,
        unwrap,
    )

    questions: list[str] = []
    same = {frozenset(("Paris", "The French capital"))}
    mw = TaskCalibrationMiddleware(
        task=cluster_task("entailment", wrong_answer_cost=1.0),
        sampling="handler",
        judge=judge_factory(same, questions),
        options=SamplingOptions(n_samples=3),
    )
    handler = CountingHandler(["Lyon", "The French capital", "Paris"])
    request = make_request([HumanMessage("Hi"), AIMessage("Hello!"), HumanMessage(QUESTION)])
    message, record = unwrap(run_hook(mw, handler, request, mode))
    assert questions == [QUESTION]
    assert record["action"] == "answer"
    assert record["n_clusters"] == 2
    assert message.content == "The French capital"


# ----------------------------------------------------------------- sampling and evaluation


class OpenQASampler:
    """Greedy: the right answer; sampled: a fixed list per question (the judge: *same*)."""

    def __init__(
        self,
        greedy: Mapping[str, str],
        sampled: Mapping[str, Sequence[str]],
        same: set[frozenset[str]] = frozenset(),  # type: ignore[assignment]
    ) -> None:
        self.greedy, self.sampled, self.same = dict(greedy), dict(sampled), same
        self.judged = 0

    def sample(
        self, messages: Sequence[Mapping[str, Any]], *, n: int, temperature: float, **params: Any
    ) -> list[AIMessage]:
        content = str(messages[-1]["content"])
        if "structured_outputs" in params:  # the entailment judge
            self.judged += 1
            a = content.split("Answer A: ", 1)[1].split("\n", 1)[0]
            b = content.split("Answer B: ", 1)[1].split("\n", 1)[0]
            return [AIMessage(content="yes" if frozenset((a, b)) in self.same else "no")]
        question = content.rsplit("Question: ", 1)[-1]
        if temperature == 0:
            return [AIMessage(content=self.greedy[question])]
        return [AIMessage(content=t) for t in self.sampled[question]][:n]


GREEDY = {"Capital of Peru?": "Lima", "Who wrote Hamlet?": "Marlowe"}
SAMPLED = {
    # greedy right, modal wrong
    "Capital of Peru?": ["Quito", "It is Quito.", "Lima", "I don't know."],
    # greedy wrong, modal right
    "Who wrote Hamlet?": ["Shakespeare", "William Shakespeare", "Marlowe", "Shakespeare."],
}
REFERENCES = {"Capital of Peru?": ["Lima"], "Who wrote Hamlet?": ["William Shakespeare"]}


def qa_items() -> list[DatasetItem]:
    return [
        DatasetItem(
            id=f"q{i}",
            messages=[{"role": "user", "content": f"Answer briefly.\n\nQuestion: {q}"}],
            meta={"references": REFERENCES[q]},
        )
        for i, q in enumerate(SAMPLED)
    ]


def sample_file(path: Path, task: Task, sampler: OpenQASampler) -> dict[str, dict[str, Any]]:
    settings = SampleSettings(n=4)
    with SamplesStore.open(path, sample_header(task, settings, None)) as store:
        report = run_sampling(task, qa_items(), sampler, store, settings)
    assert report.written == 2, report.failures
    return read_samples(path).records


def test_sampling_records_the_clusters_and_grades_the_modal_answer(tmp_path: Path) -> None:
    task = cluster_task(name="nq-open")
    records = sample_file(tmp_path / "s.jsonl", task, OpenQASampler(GREEDY, SAMPLED))
    peru, hamlet = records["q0"], records["q1"]
    assert peru["labels"] == ["answer", "answer", "answer", "abstain"]  # g_T per sample
    assert peru["clusters"] == {
        "method": "lexical",
        "question": "Answer briefly.\n\nQuestion: Capital of Peru?",
        "assignments": [0, 0, 1, None],
        "n_clusters": 2,
        "sizes": [2, 1],
        "modal_share": 0.5,
        "answer": "Quito",
    }
    assert peru["grading"] == {
        "label": "abstain",
        "answer": "Quito",
        "from": "modal_cluster",
        "correct": False,
        "references": ["Lima"],
    }
    assert peru["label"] == "abstain"  # the greedy "Lima" is right, the modal answer is not
    assert hamlet["clusters"]["n_clusters"] == 2
    assert hamlet["clusters"]["answer"] == "Shakespeare"
    assert hamlet["label"] == "answer"  # the greedy "Marlowe" is wrong, the modal answer right
    # the runtime decides on the same clusters and answers with the answer graded
    decision = Decider(task).decide(
        messages(SAMPLED["Capital of Peru?"]), question=peru["clusters"]["question"]
    )
    assert decision.n_clusters == peru["clusters"]["n_clusters"]
    assert decision.counts == {"answer": 2.0, "abstain": 2.0}


def test_evaluation_uses_the_cluster_belief_and_exposes_the_cluster_count(
    tmp_path: Path,
) -> None:
    task = cluster_task(name="nq-open")
    sample_file(tmp_path / "s.jsonl", task, OpenQASampler(GREEDY, SAMPLED))
    samples = read_samples(tmp_path / "s.jsonl")
    data = eval_arrays(task, samples, alpha=0.1)
    assert data.ids == ("q0", "q1")
    assert data.n_clusters is not None
    assert data.n_clusters.tolist() == [2, 2]
    assert data.y.tolist() == [1, 0]  # abstain (modal wrong), answer (modal right)
    np.testing.assert_allclose(data.P[:, 0], [2.1 / 4.2, 3.1 / 4.2])
    assert data.executable.tolist() == [[True, True], [True, True]]
    result = evaluate_arrays(data, calibrators=(), n_folds=2, n_permutations=0)
    out = evaluation_to_dict(result, data)
    assert out["items"]["n_clusters"] == [2, 2]


def test_entailment_clusters_are_judged_at_sampling_and_read_back(tmp_path: Path) -> None:
    task = cluster_task("entailment", name="nq-open")
    same = {frozenset(("Quito", "Lima"))}  # a wrong judge, so that the result is visible
    sampler = OpenQASampler(GREEDY, SAMPLED, same)
    records = sample_file(tmp_path / "s.jsonl", task, sampler)
    assert sampler.judged > 0
    assert records["q0"]["clusters"]["method"] == "entailment"
    assert records["q0"]["clusters"]["assignments"] == [0, 0, 0, None]
    assert records["q0"]["label"] == "abstain"  # "Quito" represents the cluster
    samples = read_samples(tmp_path / "s.jsonl")
    data = eval_arrays(task, samples)  # offline: the stored clusters, no judge
    assert data.n_clusters is not None
    assert data.n_clusters.tolist() == [1, 2]
    with pytest.raises(DataFileError, match=re.escape("but --reparse changes the answers")):
        eval_arrays(task, samples, reparse=True)
    # the lexical clustering of the same file needs no judge either
    lexical = eval_arrays(cluster_task(name="nq-open"), samples)
    assert lexical.n_clusters is not None
    assert lexical.n_clusters.tolist() == [2, 2]


# --------------------------------------------------------------------- old samples files


def old_samples_file(path: Path) -> Path:
    """A samples file written before answer clustering (as runs/nq.n8.samples.jsonl)."""
    task = tasks.answer_or_abstain(name="nq-open").model_dump(mode="json")
    del task["answer_clusters"]
    header = {
        "type": "header",
        "format": "taskcal.samples",
        "format_version": 1,
        "task": task,
        "settings": {"n": 4, "temperature": 0.7, "greedy": True, "model": "m"},
        "dataset": "runs/nq.jsonl",
    }
    record = {
        "type": "record",
        "id": "nq-open-0001",
        "label": "answer",  # graded on the greedy answer
        "labels": ["answer"] * 4,
        "greedy_label": "answer",
        "samples": [
            {"content": c, "tool_calls": [], "finish_reason": "stop"}
            for c in ["Quito", "Quito.", "Lima", "Bogota"]
        ],
        "greedy": {"content": "Lima", "tool_calls": [], "finish_reason": "stop"},
        "grading": {
            "label": "answer",
            "answer": "Lima",
            "from": "greedy",
            "correct": True,
            "references": ["Lima"],
        },
    }
    second = record | {"id": "nq-open-0002", "label": "abstain"}
    second["grading"] = record["grading"] | {"references": ["Quito"], "correct": False}
    lines = [header, record, second]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def test_old_samples_files_load_and_are_regraded_on_the_modal_answer(tmp_path: Path) -> None:
    samples = read_samples(old_samples_file(tmp_path / "old.jsonl"))
    old = eval_arrays(Task.model_validate(samples.task), samples)
    assert old.n_clusters is None
    assert old.y.tolist() == [0, 1]  # as stored
    np.testing.assert_allclose(old.P[:, 0], 4.1 / 4.2)
    clustered = eval_arrays(cluster_task(name="nq-open"), samples)
    assert clustered.n_clusters is not None
    assert clustered.n_clusters.tolist() == [3, 3]
    assert clustered.y.tolist() == [1, 0]  # the modal answer "Quito" graded on the references
    np.testing.assert_allclose(clustered.P[:, 0], 2.1 / 4.2)


def test_old_samples_file_cannot_be_resumed_with_clustering(tmp_path: Path) -> None:
    path = old_samples_file(tmp_path / "old.jsonl")
    settings = SampleSettings(n=4, temperature=0.7, max_tokens=None, model="m")
    header = sample_header(cluster_task(name="nq-open"), settings, None)
    msg = (
        "samples file was written with answer_clusters=None, but this run has "
        "answer_clusters={'method': 'lexical', 'max_containment_tokens': 30}; records would "
        "differ in what they store: use another --out file."
    )
    with pytest.raises(DataFileError, match=re.escape(msg)):
        SamplesStore.open(path, header)


def test_evaluate_command_on_an_old_file_with_a_clustering_task(tmp_path: Path) -> None:
    samples = old_samples_file(tmp_path / "old.jsonl")
    extra = json.loads(samples.read_text().splitlines()[1]) | {"id": "nq-open-0003"}
    with samples.open("a", encoding="utf-8") as f:
        for i in range(3, 7):
            f.write(json.dumps(extra | {"id": f"nq-open-000{i}"}) + "\n")
    task_file = cluster_task(name="nq-open").to_file(tmp_path / "task.yaml")
    out = tmp_path / "eval.json"
    args = ["evaluate", "--samples", str(samples), "--task", str(task_file), "--folds", "2"]
    args += ["--permutations", "0", "--calibrators", "temperature", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "answer clusters (lexical): 3.00 per item on average, 0 of 6 items with one;" in (
        " ".join(result.output.split())
    )
    evaluation = json.loads(out.read_text(encoding="utf-8"))
    assert evaluation["items"]["n_clusters"] == [3] * 6
    assert evaluation["meta"]["answer_clusters"] == {
        "method": "lexical",
        "max_containment_tokens": 30,
        "mean_n_clusters": 3.0,
        "n_one_cluster": 0,
        "n_no_answer": 0,
        "n_modal_right": 1,
    }
