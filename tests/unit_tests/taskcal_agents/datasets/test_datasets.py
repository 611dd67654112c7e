from __future__ import annotations

import collections
import json
import os
import random
import re
from pathlib import Path

import pytest

import taskcal_agents.datasets as ds
from taskcal_agents.datasets import DatasetItem, convert, read_dataset, write_dataset
from taskcal_agents.datasets._shared_data import (
    MMLU_LABELS,
    STSB_LABELS,
    WHEN2CALL_LABELS,
    round_half_up,
    select_items,
    shared_data_dir,
)
from taskcal_agents.datasets._tasks import WHEN2CALL_COST
from taskcal_agents.errors import ConfigurationError, DataFileError
from taskcal_agents.parsing._grading import grade_answer, normalize_answer, token_f1

REPO_ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module")
def shared_data() -> Path:
    """The shared data folder; missing data fails under CI=true, else skips."""
    env = os.environ.get("TASKCAL_SHARED_DATA")
    path = Path(env) if env else REPO_ROOT.parent / "shared" / "data"
    if not path.is_dir():
        msg = f"shared data folder {path} not found (set TASKCAL_SHARED_DATA)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return path


def _item(i: int, label: str | None = "a", **kw: object) -> DatasetItem:
    return DatasetItem(
        id=f"x{i}", messages=[{"role": "user", "content": f"q{i}"}], label=label, **kw
    )


KEPT = {
    "CONVERTERS",
    "SHARED_DATA_ENV",
    "call_matches_answer",
    "default_task",
    "shared_data_dir",
    "write_dataset",
}
"""Importable from the package outside ``__all__`` (0.1 names; the demo's data folder; the
BFCL answer check that evaluation uses)."""


def test_exports_match_public_names() -> None:
    public = {n for n in vars(ds) if not n.startswith("_")} - {"annotations", "grading"}
    assert set(ds.__all__) | KEPT == public
    assert not set(ds.__all__) & KEPT
    assert len(ds.__all__) == len(set(ds.__all__))
    for name in ds.__all__:
        assert hasattr(ds, name)


# --------------------------------------------------------------------------------------
# format


def test_write_read_round_trip(tmp_path: Path) -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    items = [_item(0), _item(1, "b", tools=[tool], meta={"k": [1, 2]})]
    path = tmp_path / "sub" / "d.jsonl"
    assert write_dataset(items, path) == 2
    assert read_dataset(path, labels=["a", "b"]) == items
    assert [p.name for p in path.parent.iterdir()] == ["d.jsonl"]  # no temp file left


def test_read_skips_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    line = json.dumps(_item(0).model_dump())
    path.write_text(f"\n{line}\n\n")
    assert [i.id for i in read_dataset(path)] == ["x0"]


def test_truncated_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    good = json.dumps(_item(0).model_dump())
    bad = json.dumps(_item(1).model_dump())[:25]
    path.write_text(f"{good}\n{bad}\n")
    with pytest.raises(DataFileError) as info:
        read_dataset(path)
    assert info.value.line == 2
    assert info.value.path == str(path)
    assert str(info.value).startswith(f"{path}:2: line is not valid JSON (truncated or corrupt?): ")
    assert str(info.value).endswith(
        "Repair or delete the line, or regenerate the file with `taskcal data convert`."
    )


def test_unknown_label_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    write_dataset([_item(0), _item(1, "zzz")], path)
    msg = (
        f"{path}:2: item 'x1' has label 'zzz', which is not one of the task's labels "
        "['a', 'b']; use the task the file was written for, or fix the label."
    )
    with pytest.raises(DataFileError, match=re.escape(msg)):
        read_dataset(path, labels=["a", "b"])


def test_duplicate_id(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    write_dataset([_item(0), _item(1), _item(0)], path)
    msg = f"{path}:3: duplicate id 'x0' (first seen on line 1); ids must be unique."
    with pytest.raises(DataFileError, match=re.escape(msg)):
        read_dataset(path)


def test_unlabelled_needs_references(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    write_dataset([_item(0, None, meta={"references": ["r"]})], path)
    assert read_dataset(path, allow_unlabelled=True)[0].references == ["r"]
    msg = (
        f"{path}:1: item 'x0' has no label; only answer-or-abstain items with "
        'meta["references"] may be unlabelled (their label is assigned by grading).'
    )
    with pytest.raises(DataFileError, match=re.escape(msg)):
        read_dataset(path)
    write_dataset([_item(0, None)], path)
    with pytest.raises(DataFileError, match=re.escape(msg)):
        read_dataset(path, allow_unlabelled=True)


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ([1, 2], "each line must be a JSON object, got list: '[1, 2]'."),
        ({"id": "a", "messages": []}, "not a valid dataset item: messages: List should have"),
        (
            {"id": "a", "messages": [{"role": "bot", "content": "x"}], "label": "a"},
            "messages[0].role must be one of",
        ),
        (
            {"id": "a", "messages": [{"role": "user"}], "label": "a", "extra": 1},
            "not a valid dataset item: extra: Extra inputs are not permitted.",
        ),
        (
            {"id": "a", "messages": [{"role": "user"}], "label": "a", "tools": [{"name": "f"}]},
            "tools[0] must be an OpenAI tool schema",
        ),
    ],
)
def test_bad_records(tmp_path: Path, record: object, expected: str) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(DataFileError, match=re.escape(f"{path}:1: ")) as info:
        read_dataset(path)
    assert expected in str(info.value)


def test_missing_and_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.jsonl"
    msg = (
        f"{path}: dataset file not found; write one with `taskcal data convert` or check the path."
    )
    with pytest.raises(DataFileError, match=re.escape(msg)):
        read_dataset(path)
    path.write_text("\n")
    with pytest.raises(DataFileError, match=re.escape(f"{path}: dataset file holds no items.")):
        read_dataset(path)


# --------------------------------------------------------------------------------------
# selection


def test_select_items_limit_seed_balanced() -> None:
    items = [_item(i, "ab"[i % 2] if i < 8 else "c") for i in range(12)]
    assert select_items(items) == items
    assert [i.id for i in select_items(items, limit=3)] == ["x0", "x1", "x2"]
    picked = select_items(items, limit=5, seed=1)
    assert picked == select_items(items, limit=5, seed=1)
    assert [i.id for i in picked] == sorted((i.id for i in picked), key=lambda s: int(s[1:]))
    balanced = select_items(items, limit=6, seed=0, balanced=True)
    assert collections.Counter(i.label for i in balanced) == {"a": 2, "b": 2, "c": 2}
    with pytest.raises(
        ConfigurationError, match=r"limit must be a positive integer or None, got 0\."
    ):
        select_items(items, limit=0)
    with pytest.raises(
        ConfigurationError,
        match=re.escape(
            "balanced selection needs labelled items; graded (unlabelled) data has none."
        ),
    ):
        select_items([_item(0, None)], balanced=True)


def _old_balanced_ids(items: list[DatasetItem], limit: int, seed: int | None) -> set[str]:
    """The ids the balanced selection picked before it interleaved (which, not in what order)."""
    order = list(range(len(items)))
    if seed is not None:
        random.Random(seed).shuffle(order)
    queues = collections.defaultdict(list)
    for i in order:
        queues[items[i].label].append(i)
    turns = [queues[k][j] for j in range(len(items)) for k in sorted(queues) if j < len(queues[k])]
    return {items[i].id for i in turns[:limit]}


@pytest.mark.parametrize("seed", [None, 0, 7])
def test_balanced_selection_interleaves_the_labels(seed: int | None) -> None:
    # grouped by label, as When2Call's file is: 12 tool_call, then 9 ask, then 6 refuse
    labels = ["tool_call"] * 12 + ["request_for_info"] * 9 + ["cannot_answer"] * 6
    items = [_item(i, label) for i, label in enumerate(labels)]
    for limit in (3, 10, 20, 27):
        picked = select_items(items, limit=limit, seed=seed, balanced=True)
        assert {i.id for i in picked} == _old_balanced_ids(items, limit, seed)  # same selection
        assert picked == select_items(items, limit=limit, seed=seed, balanced=True)
        got = [i.label for i in picked]
        assert set(got[:3]) == {"tool_call", "request_for_info", "cannot_answer"}
        # round robin in sorted label order; a label that runs out drops out
        counts = collections.Counter(got)
        rounds = [[k for k in sorted(counts) if counts[k] > j] for j in range(max(counts.values()))]
        assert got == [k for turn in rounds for k in turn]
        for label in counts:  # each label's items in file order
            ids = [int(i.id[1:]) for i in picked if i.label == label]
            assert ids == sorted(ids)
    # before, the items came back in file order: every tool_call first
    picked = select_items(items, limit=10, seed=seed, balanced=True)
    assert [i.label for i in picked] == [
        *["cannot_answer", "request_for_info", "tool_call"] * 3,
        "cannot_answer",
    ]


def test_convert_unknown_name_and_option(tmp_path: Path) -> None:
    msg = (
        "converter name must be one of ['bfcl', 'mmlu', 'nq-open', 'simpleqa', 'stsb', "
        "'when2call'], got 'squad'."
    )
    with pytest.raises(ConfigurationError, match=re.escape(msg)):
        convert("squad")
    msg = "converter 'stsb' accepts options ['scale_min'], got ['split']; drop them."
    with pytest.raises(ConfigurationError, match=re.escape(msg)):
        convert("stsb", tmp_path, split="dev")
    missing = tmp_path / "none.csv"
    msg = (
        f"{missing}: source for 'stsb' not found; pass --source or set $TASKCAL_SHARED_DATA "
        "to the shared data folder."
    )
    with pytest.raises(DataFileError, match=re.escape(msg)):
        convert("stsb", missing)


def test_shared_data_dir_env_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TASKCAL_SHARED_DATA", str(tmp_path))
    assert shared_data_dir() == tmp_path
    monkeypatch.delenv("TASKCAL_SHARED_DATA")
    assert shared_data_dir() == REPO_ROOT.parent / "shared" / "data"


# --------------------------------------------------------------------------------------
# converters on tiny files


def test_when2call_tiny(tmp_path: Path) -> None:
    tool = {
        "name": "pkg.get",
        "description": "d",
        "parameters": {
            "type": "dict",
            "required": ["x"],
            "properties": {
                "x": {"type": "float"},
                "y": {"type": "any", "description": "whatever"},
                "type": {"type": "string"},
            },
        },
    }
    rows = [
        {
            "uuid": "u1",
            "question": "q?",
            "correct_answer": "tool_call",
            "tools": [json.dumps(tool)],
        },
        {"uuid": "u2", "question": "r?", "correct_answer": "cannot_answer", "tools": []},
    ]
    src = tmp_path / "w.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    items = convert("when2call", src)
    assert [i.label for i in items] == ["tool_call", "cannot_answer"]
    assert items[0].tools == [
        {
            "type": "function",
            "function": {
                "name": "pkg.get",
                "description": "d",
                "parameters": {
                    "type": "object",
                    "required": ["x"],
                    "properties": {
                        "x": {"type": "number"},
                        "y": {"description": "whatever"},
                        "type": {"type": "string"},
                    },
                },
            },
        }
    ]
    assert items[1].tools == []
    src.write_text(
        json.dumps(rows[0]) + "\n" + json.dumps({**rows[1], "correct_answer": "x"}) + "\n"
    )
    msg = (
        f"{src}:2: correct_answer must be one of ['tool_call', 'request_for_info', "
        "'cannot_answer'], got 'x'."
    )
    with pytest.raises(DataFileError, match=re.escape(msg)):
        convert("when2call", src)
    src.write_text(json.dumps(rows[0])[:30] + "\n")
    with pytest.raises(DataFileError, match=re.escape(f"{src}:1: line is not valid JSON")):
        convert("when2call", src)


def test_qa_tiny(tmp_path: Path) -> None:
    src = tmp_path / "s.csv"
    src.write_text(
        "metadata,problem,answer\n\"{'topic': 'Art', 'urls': []}\",Who painted it?,\"Jan, Smith\"\n"
    )
    (item,) = convert("simpleqa", src)
    assert item.label is None
    assert item.references == ["Jan, Smith"]
    assert item.meta["topic"] == "Art"
    assert "Question: Who painted it?" in item.messages[0]["content"]
    src = tmp_path / "n.jsonl"
    src.write_text('{"question": "q", "answer": ["a", "b"]}\n{"question": "r"}\n')
    msg = f"{src}:2: an NQ-open row needs 'question' and 'answer'; missing 'answer'."
    with pytest.raises(DataFileError, match=re.escape(msg)):
        convert("nq-open", src)


def test_mmlu_tiny(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    f = tmp_path / "dev" / "high_school_physics_dev.csv"
    f.write_text('"What, then?",1,2,3,4,C\nQ2,a,b,c,d,A\n')
    items = convert("mmlu", tmp_path, split="dev")
    assert [i.id for i in items] == [
        "mmlu/dev/high_school_physics/0",
        "mmlu/dev/high_school_physics/1",
    ]
    assert [i.label for i in items] == ["C", "A"]
    assert "about high school physics" in items[0].messages[0]["content"]
    assert "\nC. 3\n" in items[0].messages[0]["content"]
    f.write_text("Q,a,b,c,d,E\n")
    with pytest.raises(DataFileError, match=re.escape(f"{f}:1: an MMLU row must be")):
        convert("mmlu", tmp_path)
    msg = "split must be 'dev', 'val', 'test' or joined with '+', got 'train'."
    with pytest.raises(ConfigurationError, match=re.escape(msg)):
        convert("mmlu", tmp_path, split="train")


def test_stsb_tiny(tmp_path: Path) -> None:
    src = tmp_path / "sts.csv"
    src.write_text(
        'main-news\theadlines\t2016\t0001\t2.5\tA "quoted\tB\tlic1\tlic2\n'
        "main-forums\tf\t2015\t0002\t0.4\tC\tD\n"
    )
    items = convert("stsb", src)
    assert [i.label for i in items] == ["3", "0"]
    assert items[0].meta["sentence1"] == 'A "quoted'
    assert items[0].id == "stsb/main-news/headlines/2016/0001"
    assert (
        "scale from 0 (completely different) to 5 (equivalent)" in items[0].messages[0]["content"]
    )
    shifted = convert("stsb", src, scale_min=1)
    assert [i.label for i in shifted] == ["4", "1"]
    assert "from 1 (completely different) to 6 (equivalent)" in shifted[0].messages[0]["content"]
    src.write_text("g\tf\t2015\t1\t7\tC\tD\n")
    msg = f"{src}:1: score must be a number in [0, 5], got '7'."
    with pytest.raises(DataFileError, match=re.escape(msg)):
        convert("stsb", src)


@pytest.mark.parametrize(("x", "expected"), [(0.0, 0), (0.49, 0), (0.5, 1), (2.5, 3), (4.6, 5)])
def test_round_half_up(x: float, expected: int) -> None:
    assert round_half_up(x) == expected


# --------------------------------------------------------------------------------------
# converters on the real shared data


def test_when2call_real(shared_data: Path) -> None:
    items = convert("when2call", shared_data / "when2call/when2call_test_llm_judge.jsonl")
    assert len(items) == 300
    assert collections.Counter(i.label for i in items) == {
        "tool_call": 100,
        "request_for_info": 100,
        "cannot_answer": 100,
    }
    assert len({i.id for i in items}) == 300
    text = json.dumps([i.tools for i in items])
    assert '"type": "dict"' not in text
    assert '"type": "float"' not in text
    assert sum(bool(i.tools) for i in items) == 283


def test_qa_real(shared_data: Path) -> None:
    simpleqa = convert("simpleqa", shared_data / "simpleqa/simple_qa_test_set.csv")
    assert len(simpleqa) == 4326
    assert all(i.label is None and len(i.references) == 1 for i in simpleqa)
    nq = convert("nq-open", shared_data / "nq_open/NQ-open.dev.jsonl")
    assert len(nq) == 3610
    assert nq[0].references == ["14 December 1972 UTC", "December 1972"]


def test_mmlu_and_stsb_real(shared_data: Path) -> None:
    assert len(convert("mmlu", shared_data / "mmlu", split="dev")) == 285
    val = convert("mmlu", shared_data / "mmlu", split="val")
    assert len(val) == 1531
    assert {i.label for i in val} == set(MMLU_LABELS)
    stsb = convert("stsb", shared_data / "stsb/sts-dev.csv")
    assert len(stsb) == 1000
    assert {i.label for i in stsb} == set(STSB_LABELS)
    assert len({i.id for i in stsb}) == 1000


# --------------------------------------------------------------------------------------
# grading


def test_normalize_and_f1() -> None:
    assert normalize_answer("  The Beatles!  ") == "beatles"
    assert normalize_answer("A “quoted”—answer") == "quoted answer"
    assert token_f1("December 14, 1972", "14 December 1972 UTC") == pytest.approx(6 / 7)
    assert token_f1("", "") == 1.0
    assert token_f1("x", "") == 0.0
    assert token_f1("cat", "dog") == 0.0


def test_contains_tokens() -> None:
    from taskcal_agents.parsing._grading import contains_tokens

    assert contains_tokens(["it", "is", "anna", "berg"], ["anna", "berg"])
    assert not contains_tokens(["it", "is", "anna", "berg"], ["berg", "anna"])
    assert not contains_tokens(["lind"], ["tom", "lind"])
    assert not contains_tokens(["bergman"], ["berg"])


@pytest.mark.parametrize(
    ("prediction", "references", "expected"),
    [
        ("The Beatles.", ["Beatles"], True),
        ("It was written by Bobby Scott.", ["Bobby Scott", "Bob Russell"], True),
        ("December 14, 1972", ["14 December 1972 UTC"], True),
        ("December 2001", ["December 1972"], False),
        ("John Adams", ["John Smith"], False),
        ("Sugeno", ["Michio Sugeno"], True),
        ("I don't know.", ["Paris"], False),
        ("", ["Paris"], False),
        ("Paris", [""], False),
        (" ".join(["word"] * 40) + " Paris", ["Paris"], False),
    ],
)
def test_grade_answer(prediction: str, references: list[str], expected: bool) -> None:
    assert grade_answer(prediction, references) is expected


# --------------------------------------------------------------------------------------
# default tasks


def test_default_tasks(tmp_path: Path) -> None:
    when2call = ds.default_task("when2call")
    assert when2call.labels == list(WHEN2CALL_LABELS)
    assert when2call.cost_matrix().tolist() == [list(r) for r in WHEN2CALL_COST]
    assert when2call.default_action == "request_for_info"
    assert when2call.unparsed == "other"
    qa = ds.default_task("nq-open")
    assert (qa.name, qa.labels) == ("nq-open", ["answer", "abstain"])
    assert qa.cost_matrix()[1, 0] > qa.cost_matrix()[0, 1]  # wrong answer > abstaining
    mmlu = ds.default_task("mmlu")
    assert mmlu.labels == list(MMLU_LABELS)
    from langchain_core.messages import AIMessage

    assert mmlu.parse_completion(AIMessage(content="The answer is C.")) == "C"
    stsb = ds.default_task("stsb", scale_min=1)
    assert stsb.labels == ["1", "2", "3", "4", "5", "6"]
    assert stsb.cost_matrix()[0, 5] == 5.0
    stsb0 = ds.default_task("stsb")
    assert stsb0.labels == ["0", "1", "2", "3", "4", "5"]
    assert stsb0.parse_completion(AIMessage(content="Similarity: 0")) == "0"
    with pytest.raises(ConfigurationError, match=r"^default task name must be one of"):
        ds.default_task("squad")
    path = when2call.to_file(tmp_path / "t.yaml")
    assert "unparsed: other\n" in path.read_text()
    assert type(when2call).from_file(path) == when2call


def test_mmlu_task_with_an_abstain_action() -> None:
    task = ds.default_task("mmlu", abstain_cost=0.3)
    assert task.labels == list(MMLU_LABELS)
    assert task.action_list == [*MMLU_LABELS, "abstain"]
    assert task.cost_matrix()[:, 4].tolist() == [0.3] * 4
    assert task.cost_matrix()[0, :4].tolist() == [0.0, 1.0, 1.0, 1.0]
    assert task.abstain_action == task.fallback_action == "abstain"
    # MBR abstains unless one letter is likelier than 0.7
    import numpy as np

    from taskcal_agents.decision._decider import mbr_action

    assert task.action_list[mbr_action(np.array([0.6, 0.2, 0.1, 0.1]), task.cost_matrix())] == (
        "abstain"
    )
    assert task.action_list[mbr_action(np.array([0.8, 0.1, 0.05, 0.05]), task.cost_matrix())] == (
        "A"
    )
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ConfigurationError, match="abstain_cost must lie strictly between"):
            ds.default_task("mmlu", abstain_cost=bad)
