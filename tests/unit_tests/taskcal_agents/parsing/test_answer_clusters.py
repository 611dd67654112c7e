"""Answer clustering (open-answer g_T): canonical tokens, equivalence, clusters, the judge."""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from taskcal_agents.errors import ConfigurationError, DataFileError, SamplingError
from taskcal_agents.parsing._answer_clusters import (
    ENTAILMENT_PROMPT,
    answer_tokens,
    answers_equivalent,
    cluster_answers,
    entailment_judge,
)
from taskcal_agents.sampling import OpenAISampler
from tests.conftest import load_benchmark, require_shared_file

ROOT = Path(__file__).resolve().parents[4]


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("1,000", ["1000"]),
        ("1,000.00 dollars", ["1000", "dollars"]),
        ("3.0", ["3"]),
        ("3.50", ["3", "point", "5"]),
        ("three point five", ["3", "point", "5"]),
        ("Eight", ["8"]),
        ("twenty-one", ["21"]),
        ("a hundred", ["100"]),
        ("two thousand and eight", ["2008"]),
        ("five thousand seven hundred seventy-eight", ["5778"]),
        ("1.5 million", ["1", "point", "5000000"]),
        ("one point five million", ["1", "point", "5000000"]),
        ("one two", ["1", "2"]),
        ("28th February", ["28", "february"]),
        ("Feb 28", ["28", "february"]),
        ("14 December 1983", ["14", "december", "1983"]),
        ("December 14, 1983", ["14", "december", "1983"]),
        ("14th of Dec 1983", ["14", "december", "1983"]),
        ("December 1983", ["december", "1983"]),
        ("the 1950s", ["1950s"]),
        ("Jan went home", ["jan", "went", "home"]),
        ("...", []),
    ],
)
def test_answer_tokens_are_canonical(text: str, tokens: list[str]) -> None:
    assert answer_tokens(text) == tokens


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("1,000", "1000"),
        ("3.0", "3"),
        ("eight", "8"),
        ("There are eight seasons.", "8"),
        ("14 December 1983", "December 14, 1983"),
        ("Nov. 23rd, 1987", "23 November 1987"),
        ("The Zephyrs", "zephyrs."),
        ("1994", "The final was played in 1994."),
        ("Marta Kowalski", "Kowalski"),
    ],
)
def test_equivalent_answers(a: str, b: str) -> None:
    assert answers_equivalent(a, b)
    assert answers_equivalent(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("8", "18"),
        ("eighteen", "8"),
        ("December 2001", "December 1983"),
        ("Marta Kowalczyk", "Marta Kowalski"),
        ("Anna Berg and Tom Lind", "Tom Lind and Anna Berg"),
        ("", ""),
        ("...", "?!"),
        ("Paris", ""),
    ],
)
def test_different_answers(a: str, b: str) -> None:
    assert not answers_equivalent(a, b)
    assert not answers_equivalent(b, a)


def test_containment_needs_a_short_answer() -> None:
    sentence = "In my opinion, after long thought, it is Paris " + "indeed " * 20
    assert len(answer_tokens(sentence)) == 29
    assert answers_equivalent("Paris", sentence)
    assert answers_equivalent("Paris", sentence + "again")  # 30 tokens is the limit
    assert not answers_equivalent("Paris", sentence + "again and again")
    assert answers_equivalent("Paris", sentence + "again and again", max_containment_tokens=32)
    assert not answers_equivalent("Paris", "It is Paris", max_containment_tokens=0)
    assert answers_equivalent("Paris.", "paris", max_containment_tokens=0)


def test_question_words_alone_do_not_make_containment() -> None:
    question = "what day do people born on feb 29 have a birthday"
    echo = "What day do people born on February 29 have a birthday?"
    assert answers_equivalent("February 29", echo)
    assert not answers_equivalent("February 29", echo, question=question)
    assert answers_equivalent("March 1", "You celebrate on March 1.", question=question)
    assert answers_equivalent("February 29", "feb 29th", question=question)  # equality stays


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"a": 5, "b": "5"}, r"^answers_equivalent: a must be a string, got 5\.$"),
        ({"a": "5", "b": None}, r"^answers_equivalent: b must be a string, got None\.$"),
        (
            {"a": "5", "b": "5", "max_containment_tokens": -1},
            r"^answers_equivalent: max_containment_tokens must be an int >= 0 \(0 turns "
            r"containment off\), got -1\.$",
        ),
        (
            {"a": "5", "b": "5", "max_containment_tokens": True},
            r"^answers_equivalent: max_containment_tokens must be an int >= 0 \(0 turns "
            r"containment off\), got True\.$",
        ),
        (
            {"a": "5", "b": "5", "question": ["q"]},
            r"^answer clustering: question must be a string or None, got \['q'\]\.$",
        ),
    ],
)
def test_answers_equivalent_rejects_bad_input(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        answers_equivalent(**kwargs)


# ------------------------------------------------------------------------------ clustering


def test_cluster_answers_groups_and_counts_abstentions() -> None:
    answers = ["Paris", "paris.", None, "", "London", "The capital is Paris", "  "]
    result = cluster_answers(answers)
    assert result.clusters == ((0, 1, 5), (4,))
    assert result.abstentions == (2, 3, 6)
    assert result.sizes == (3, 1)
    assert result.n_answers == 7
    assert result.n_clusters == 2
    assert result.modal == 0
    assert result.modal_answer == "Paris"
    assert result.modal_share == pytest.approx(3 / 7)
    assert result.abstain_share == pytest.approx(3 / 7)
    assert result.semantic_entropy == pytest.approx(
        -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    )
    assert result.assignments == (0, 0, None, None, 1, 0, None)
    assert result.answers == tuple(answers)


def test_cluster_answers_ties_go_to_the_earliest_cluster() -> None:
    result = cluster_answers(["London", "Paris", "paris", "london"])
    assert result.clusters == ((0, 3), (1, 2))
    assert result.modal == 0
    assert result.modal_answer == "London"
    assert result.modal_share == 0.5
    assert result.semantic_entropy == pytest.approx(math.log(2))


def test_cluster_answers_one_cluster_and_all_abstained() -> None:
    one = cluster_answers(["8", "eight", "There are 8."])
    assert one.n_clusters == 1
    assert one.modal_share == 1.0
    assert one.semantic_entropy == 0.0
    none = cluster_answers([None, " ", "!"])
    assert none.clusters == ()
    assert none.abstentions == (0, 1, 2)
    assert none.modal is None
    assert none.modal_answer is None
    assert none.modal_share == 0.0
    assert none.abstain_share == 1.0
    assert none.semantic_entropy == 0.0
    assert none.n_clusters == 0


def test_cluster_answers_compares_with_the_representative_only() -> None:
    # "Diaz" joins "Maria Diaz"; "Pablo Diaz" is not equivalent to the representative.
    result = cluster_answers(["Maria Diaz", "Diaz", "Pablo Diaz"])
    assert result.clusters == ((0, 1), (2,))
    assert result.semantic_entropy == pytest.approx(
        -(2 / 3) * math.log(2 / 3) - math.log(1 / 3) / 3
    )


def test_cluster_answers_passes_question_on() -> None:
    answers = ["Mira Fox", "The first book about Mira Fox is The Glass Door."]
    assert cluster_answers(answers).n_clusters == 1
    question = "what is the first book about mira fox"
    assert cluster_answers(answers, question=question).n_clusters == 2


def test_cluster_answers_asks_the_judge_both_ways_only_when_lexically_different() -> None:
    same = {("Tom Baxter Jr.", "Thomas Baxter Jr."), ("Thomas Baxter Jr.", "Tom Baxter Jr.")}
    one_way = {("Tom Baxter Jr.", "Ida Winter")}
    asked: list[tuple[str, str]] = []

    def entails(a: str, b: str) -> bool:
        asked.append((a, b))
        return (a, b) in same or (a, b) in one_way

    answers = ["Tom Baxter Jr.", "tom baxter jr", "Thomas Baxter Jr.", "Ida Winter"]
    result = cluster_answers(answers, entails=entails)
    assert result.clusters == ((0, 1, 2), (3,))
    assert asked == [
        ("Tom Baxter Jr.", "Thomas Baxter Jr."),
        ("Thomas Baxter Jr.", "Tom Baxter Jr."),
        ("Tom Baxter Jr.", "Ida Winter"),
        ("Ida Winter", "Tom Baxter Jr."),
    ]


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        (
            "Paris",
            r"^cluster_answers: answers must be a non-empty sequence of strings \(None for an "
            r"abstention\), got 'Paris'\.$",
        ),
        (
            [],
            r"^cluster_answers: answers must be a non-empty sequence of strings \(None for an "
            r"abstention\), got \[\]\.$",
        ),
        (["Paris", 3], r"^cluster_answers: answers\[1\] must be a string or None, got 3\.$"),
    ],
)
def test_cluster_answers_rejects_bad_answers(answers: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        cluster_answers(answers)


def test_cluster_answers_rejects_bad_max_containment() -> None:
    with pytest.raises(
        ConfigurationError,
        match=r"^cluster_answers: max_containment_tokens must be an int >= 0 \(0 turns "
        r"containment off\), got 2\.5\.$",
    ):
        cluster_answers(["a"], max_containment_tokens=2.5)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------- judge

BASE_URL = "http://fake-vllm.test/v1"


class Judge:
    """A fake server that answers ``yes`` when both answers are in one synonym group."""

    def __init__(self, groups: list[set[str]], reply: str | None = None) -> None:
        self.groups = groups
        self.reply = reply
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        payload = json.loads(request.content)
        self.requests.append(payload)
        lines = payload["messages"][0]["content"].splitlines()
        a = lines[1].removeprefix("Answer A: ")
        b = lines[2].removeprefix("Answer B: ")
        verdict = "yes" if any(a in g and b in g for g in self.groups) else "no"
        message = {"role": "assistant", "content": self.reply or verdict}
        return httpx.Response(
            200,
            json={
                "id": "cmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            },
        )


def _sampler(handler: Judge) -> OpenAISampler:
    return OpenAISampler(
        BASE_URL, "m", http_client=httpx.Client(transport=httpx.MockTransport(handler))
    )


def test_entailment_judge_sends_one_constrained_greedy_request_per_ordered_pair() -> None:
    server = Judge([{"Tom Baxter Jr.", "Thomas Baxter Jr."}])
    entails = entailment_judge(_sampler(server), question="who starred in the made-up film")
    assert entails("Tom Baxter Jr.", "Thomas Baxter Jr.") is True
    assert entails("Tom Baxter Jr.", "Carl Mend") is False
    assert entails("Tom Baxter Jr.", "Thomas Baxter Jr.") is True  # cached
    assert len(server.requests) == 2
    assert entails("Thomas Baxter Jr.", "Tom Baxter Jr.") is True  # the other order is asked
    assert len(server.requests) == 3
    sent = server.requests[0]
    assert sent["n"] == 1
    assert sent["temperature"] == 0.0
    assert sent["max_tokens"] == 4
    assert sent["structured_outputs"] == {"choice": ["yes", "no"]}
    assert sent["messages"] == [
        {
            "role": "user",
            "content": ENTAILMENT_PROMPT.format(
                question="who starred in the made-up film",
                a="Tom Baxter Jr.",
                b="Thomas Baxter Jr.",
            ),
        }
    ]


def test_cluster_answers_with_the_served_judge() -> None:
    server = Judge([{"the fifties", "the 1950s"}])
    question = "in which decade is the made-up film set"
    entails = entailment_judge(_sampler(server), question=question)
    answers = ["the 1950s", "In the 1950s.", "the fifties", "1946", None]
    result = cluster_answers(answers, entails=entails, question=question)
    assert result.clusters == ((0, 1, 2), (3,))
    assert result.modal_share == 0.6
    # "the fifties": 2 requests (both ways, yes); "1946": 1 request (no, not asked back).
    assert len(server.requests) == 3


def test_entailment_judge_rejects_a_reply_outside_the_choice() -> None:
    entails = entailment_judge(_sampler(Judge([], reply="Maybe")), question="q")
    with pytest.raises(
        SamplingError,
        match=r"^entailment_judge: expected one reply in \['yes', 'no'\] under the choice "
        r"constraint, got \['Maybe'\]; does the server apply structured_outputs\?$",
    ):
        entails("a", "b")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"question": "  "},
            r"^entailment_judge: question must be a non-empty string, got '  '\.$",
        ),
        (
            {"question": "q", "prompt": "Is {a} like {c}?"},
            r"^entailment_judge: prompt must be a format string with the placeholders "
            r"\{question\}, \{a\} and \{b\}, got 'Is \{a\} like \{c\}\?' \(KeyError: 'c'\)\.$",
        ),
    ],
)
def test_entailment_judge_rejects_bad_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        entailment_judge(_sampler(Judge([])), **kwargs)


# ----------------------------------------------------------------- agreement with hand labels


@pytest.fixture(scope="module")
def nq_open() -> Path:
    """NQ-open dev (``NQ-open.dev.jsonl``), which the hand-labelled pairs point into."""
    return require_shared_file("nq-open")


def test_missing_shared_data_fails_under_ci_and_skips_otherwise(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TASKCAL_SHARED_DATA", str(tmp_path))
    message = (
        rf"^{re.escape(str(tmp_path / 'nq_open' / 'NQ-open.dev.jsonl'))} not found "
        r"\(set TASKCAL_SHARED_DATA to the shared data folder\)$"
    )
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=message):
        require_shared_file("nq-open")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match=message):
        require_shared_file("nq-open")
    (tmp_path / "nq_open").mkdir()
    (tmp_path / "nq_open" / "NQ-open.dev.jsonl").write_text("", encoding="utf-8")
    assert require_shared_file("nq-open") == tmp_path / "nq_open" / "NQ-open.dev.jsonl"


def test_agreement_with_hand_labelled_pairs(nq_open: Path) -> None:
    bench = load_benchmark("answer_clusters")
    pairs = bench.load_pairs(source=nq_open)
    assert len(pairs) == 179
    real = [p for p in pairs if "constructed" not in p["tags"]]
    assert len(real) >= 100
    labels = [p["same"] for p in pairs]
    scores = bench.agreement(bench.predict(pairs, with_question=True), labels)
    # Measured 0.855 / 0.804 / 0.750 on 179 pairs (benchmarks/answer_clusters.py).
    assert scores["accuracy"] >= 0.83
    assert scores["precision"] >= 0.77
    assert scores["recall"] >= 0.72


# Two made-up items (not NQ-open text) in the NQ-open JSONL layout, and pairs pointing into them.
_FAKE_NQ = [
    {"question": "what colour is the made-up test sky", "answer": ["green", "pale green"]},
    {"question": "how many legs has the made-up test bird", "answer": ["three"]},
]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _fake_pair(**changes: Any) -> dict[str, Any]:
    pair = {
        "id": "pair-001",
        "item": "nq-open-0000",
        "question_sha256": _sha("what colour is the made-up test sky"),
        "a": "Green.",
        "a_source": "sample:0",
        "b": {"reference": 1, "sha256": _sha("pale green")},
        "b_source": "reference:1",
        "same": False,
        "tags": ["refines"],
        "note": "",
    }
    return {**pair, **changes}


def _write_fakes(tmp_path: Path, *pairs: dict[str, Any], **header: Any) -> tuple[Path, Path]:
    source = tmp_path / "NQ-open.dev.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in _FAKE_NQ), encoding="utf-8")
    head = {"format": "taskcal.answer_pairs", "format_version": 2, "count": len(pairs)}
    head |= {"dataset": "nq-open", "source": "the made-up test data"} | header
    path = tmp_path / "pairs.jsonl"
    lines = [json.dumps(head)] + [json.dumps(p) for p in pairs]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, source


def test_load_pairs_resolves_questions_and_references(tmp_path: Path) -> None:
    second = _fake_pair(
        id="pair-002",
        item="nq-open-0001",
        question_sha256=_sha("how many legs has the made-up test bird"),
        a={"reference": 0, "sha256": _sha("three")},
        b="3",
        same=True,
    )
    path, source = _write_fakes(tmp_path, _fake_pair(), second)
    pairs = load_benchmark("answer_clusters").load_pairs(path, source=source)
    assert [(p["id"], p["question"], p["a"], p["b"], p["same"]) for p in pairs] == [
        ("pair-001", "what colour is the made-up test sky", "Green.", "pale green", False),
        ("pair-002", "how many legs has the made-up test bird", "three", "3", True),
    ]
    assert pairs[0]["tags"] == ["refines"]
    assert pairs[0]["b_source"] == "reference:1"


def test_load_pairs_reads_the_shared_data_folder_by_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path, source = _write_fakes(tmp_path, _fake_pair())
    bench = load_benchmark("answer_clusters")
    monkeypatch.setenv("TASKCAL_SHARED_DATA", str(tmp_path / "empty"))
    missing = tmp_path / "empty" / "nq_open" / "NQ-open.dev.jsonl"
    with pytest.raises(
        DataFileError,
        match=rf"^{re.escape(str(missing))}: source for 'nq-open' not found; pass --source or "
        r"set \$TASKCAL_SHARED_DATA to the shared data folder\.$",
    ):
        bench.load_pairs(path)
    (tmp_path / "empty" / "nq_open").mkdir(parents=True)
    missing.write_bytes(source.read_bytes())
    assert bench.load_pairs(path)[0]["b"] == "pale green"


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        (
            _fake_pair(item="nq-open-0002"),
            r"pair 'pair-001' \(item 'nq-open-0002'\): {source} has no such item \(2 items\); "
            r"the pairs need the nq-open data \(the made-up test data\)\.$",
        ),
        (
            _fake_pair(question_sha256="000000000000"),
            r"pair 'pair-001' \(item 'nq-open-0000'\): the question in {source} has SHA-256 "
            rf"prefix '{_sha('what colour is the made-up test sky')}', the pair expects "
            r"'000000000000'; the pairs need the nq-open data \(the made-up test data\)\.$",
        ),
        (
            _fake_pair(b={"reference": 2, "sha256": _sha("pale green")}),
            rf"pair 'pair-001' \(item 'nq-open-0000'\): b is reference 2 with SHA-256 prefix "
            rf"'{_sha('pale green')}', but in {{source}} the item has 2 references and "
            r"reference 2 has prefix None; the pairs need the nq-open data \(the made-up test "
            r"data\)\.$",
        ),
        (
            _fake_pair(a={"reference": 0, "sha256": _sha("pale green")}),
            rf"pair 'pair-001' \(item 'nq-open-0000'\): a is reference 0 with SHA-256 prefix "
            rf"'{_sha('pale green')}', but in {{source}} the item has 2 references and "
            rf"reference 0 has prefix '{_sha('green')}'; the pairs need the nq-open data "
            r"\(the made-up test data\)\.$",
        ),
        (
            _fake_pair(a={"reference": "0"}),
            r"pair 'pair-001' \(item 'nq-open-0000'\): a must be an answer \(a string\) or "
            r"\{'reference': K, 'sha256': PREFIX\}, got \{'reference': '0'\}\.$",
        ),
    ],
)
def test_load_pairs_rejects_pairs_that_do_not_match_the_data(
    tmp_path: Path, pair: dict[str, Any], message: str
) -> None:
    path, source = _write_fakes(tmp_path, pair)
    where = rf"^{re.escape(str(path))}:2: "
    with pytest.raises(
        DataFileError, match=where + message.replace("{source}", re.escape(str(source)))
    ):
        load_benchmark("answer_clusters").load_pairs(path, source=source)


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (
            {"format_version": 1},
            r"expected a 'taskcal.answer_pairs' version 2 header naming a dataset of \[",
        ),
        ({"dataset": "squad"}, r"expected a 'taskcal.answer_pairs' version 2 header"),
        ({"count": 2}, r"header says 2 pairs, the file holds 1\.$"),
    ],
)
def test_load_pairs_rejects_a_bad_header(
    tmp_path: Path, header: dict[str, Any], message: str
) -> None:
    path, source = _write_fakes(tmp_path, _fake_pair(), **header)
    with pytest.raises(DataFileError, match=rf"^{re.escape(str(path))}:1: " + message):
        load_benchmark("answer_clusters").load_pairs(path, source=source)


def test_benchmark_predict_with_a_judge() -> None:
    bench = load_benchmark("answer_clusters")
    pairs = [
        {"question": "q", "a": "Tom Baxter Jr.", "b": "Thomas Baxter Jr."},
        {"question": "q", "a": "8", "b": "eight"},
        {"question": "q", "a": "Paris", "b": "London"},
    ]
    asked: list[tuple[str, str, str]] = []

    def judge(question: str) -> Any:
        def entails(a: str, b: str) -> bool:
            asked.append((question, a, b))
            return "Baxter" in a and "Baxter" in b

        return entails

    assert bench.predict(pairs, with_question=True) == [False, True, False]
    assert bench.predict(pairs, with_question=True, judge=judge) == [True, True, False]
    assert asked == [
        ("q", "Tom Baxter Jr.", "Thomas Baxter Jr."),
        ("q", "Thomas Baxter Jr.", "Tom Baxter Jr."),
        ("q", "Paris", "London"),
    ]


def test_agreement_counts() -> None:
    bench = load_benchmark("answer_clusters")
    scores = bench.agreement([True, True, False, False], [True, False, True, False])
    assert scores == {"n": 4, "same": 2, "accuracy": 0.5, "precision": 0.5, "recall": 0.5}
    empty = bench.agreement([False], [False])
    assert math.isnan(empty["precision"])
    assert math.isnan(empty["recall"])
