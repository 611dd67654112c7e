"""Converters from the public data sets in ``../shared/data`` to the generic dataset format.

=========== ================================================ ==================================
name        source (relative to the shared data folder)      labels
=========== ================================================ ==================================
when2call   ``when2call/when2call_test_llm_judge.jsonl``     tool_call, request_for_info,
                                                             cannot_answer
simpleqa    ``simpleqa/simple_qa_test_set.csv``              graded after sampling (answer,
                                                             abstain)
nq-open     ``nq_open/NQ-open.dev.jsonl``                    graded after sampling (answer,
                                                             abstain)
mmlu        ``mmlu/`` (headerless CSVs in ``dev/``, ``val/``) A, B, C, D
stsb        ``stsb/sts-dev.csv`` (tab-separated)             0 ... 5 (the score, rounded)
bfcl        the ``bfcl-eval`` wheel or its data folder        tool_call, request_for_info,
            (``--source``; see :mod:`._bfcl`)                 cannot_answer
=========== ================================================ ==================================

The shared data folder is ``$TASKCAL_SHARED_DATA`` when set, else ``shared/data`` beside
the repository (the repository root's parent).
"""

from __future__ import annotations

import ast
import csv
import math
import os
import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from taskcal_agents._files import read_jsonl
from taskcal_agents.datasets._format import DatasetItem
from taskcal_agents.datasets._tools import bfcl_tool
from taskcal_agents.errors import ConfigurationError, DataFileError

SHARED_DATA_ENV = "TASKCAL_SHARED_DATA"

WHEN2CALL_LABELS = ("tool_call", "request_for_info", "cannot_answer")
MMLU_LABELS = ("A", "B", "C", "D")
STSB_LABELS = ("0", "1", "2", "3", "4", "5")

QA_INSTRUCTION = (
    "Answer the question with a short answer (a few words). "
    'If you do not know the answer, say "I don\'t know".\n\nQuestion: {question}'
)
MMLU_INSTRUCTION = (
    "The following is a multiple choice question about {subject}.\n\n{question}\n"
    "A. {A}\nB. {B}\nC. {C}\nD. {D}\n\nAnswer with the letter of the correct option."
)
STSB_INSTRUCTION = (
    "How similar in meaning are these two sentences, on a scale from {low} (completely "
    "different) to {high} (equivalent)? Answer with a single digit.\n\n"
    "Sentence 1: {sentence1}\nSentence 2: {sentence2}"
)


def shared_data_dir() -> Path:
    """The shared data folder: ``$TASKCAL_SHARED_DATA``, else ``<repo>/../shared/data``."""
    env = os.environ.get(SHARED_DATA_ENV)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "shared" / "data"


# --------------------------------------------------------------------------------------
# When2Call


def convert_when2call(source: Path) -> list[DatasetItem]:
    """Convert When2Call's LLM-judge test file (300 items).

    The tools, stored as JSON strings in BFCL's dialect, become OpenAI tool schemas with
    JSON-Schema type names; the label is ``correct_answer``.

    Args:
        source: ``when2call_test_llm_judge.jsonl``.

    Returns:
        The items, in file order.

    Raises:
        DataFileError: A line is not valid JSON, lacks a field, or has an unknown label.
    """
    items = []
    for lineno, row in read_jsonl(source):
        try:
            uid, question, label = row["uuid"], row["question"], row["correct_answer"]
            tools = row.get("tools") or []
        except (KeyError, TypeError) as exc:
            msg = f"a When2Call row needs 'uuid', 'question' and 'correct_answer'; missing {exc}."
            raise DataFileError(msg, path=str(source), line=lineno) from exc
        if label not in WHEN2CALL_LABELS:
            msg = f"correct_answer must be one of {list(WHEN2CALL_LABELS)}, got {label!r}."
            raise DataFileError(msg, path=str(source), line=lineno)
        items.append(
            DatasetItem(
                id=str(uid),
                messages=[{"role": "user", "content": question}],
                tools=[bfcl_tool(t, path=source, line=lineno) for t in tools],
                label=label,
                meta={
                    "source": row.get("source"),
                    "source_id": row.get("source_id"),
                    "target_tool": row.get("target_tool"),
                    # request_for_info items: the required argument deleted from the
                    # question, which the decision's question should ask for
                    "held_out_param": row.get("held_out_param"),
                },
            )
        )
    return items


# --------------------------------------------------------------------------------------
# SimpleQA and NQ-open: answer or abstain (graded after sampling)


def _qa_item(item_id: str, question: str, references: list[str], **meta: Any) -> DatasetItem:
    return DatasetItem(
        id=item_id,
        messages=[{"role": "user", "content": QA_INSTRUCTION.format(question=question)}],
        label=None,
        meta={"question": question, "references": references, **meta},
    )


def convert_simpleqa(source: Path) -> list[DatasetItem]:
    """Convert SimpleQA (``metadata,problem,answer`` CSV with a header).

    Items are unlabelled: ``taskcal sample`` grades the model's answer against
    ``meta["references"]`` (see :mod:`taskcal_agents.parsing._grading`).

    Args:
        source: ``simple_qa_test_set.csv``.

    Returns:
        The items, in file order (ids ``simpleqa-00000`` ...).

    Raises:
        DataFileError: The header or a row is malformed.
    """
    items = []
    with source.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames is None or not {"problem", "answer"} <= set(reader.fieldnames):
            msg = f"expected a header with 'problem' and 'answer', got {reader.fieldnames!r}."
            raise DataFileError(msg, path=str(source), line=1)
        for index, row in enumerate(reader):
            if not row.get("problem") or row.get("answer") is None:
                msg = f"row has no problem or answer: {row!r}."
                raise DataFileError(msg, path=str(source), line=reader.line_num)
            meta: dict[str, Any] = {}
            try:
                info = ast.literal_eval(row.get("metadata") or "{}")
                if isinstance(info, dict):
                    meta = {k: info[k] for k in ("topic", "answer_type") if k in info}
            except (ValueError, SyntaxError):
                meta = {}
            items.append(_qa_item(f"simpleqa-{index:05d}", row["problem"], [row["answer"]], **meta))
    return items


def convert_nq_open(source: Path) -> list[DatasetItem]:
    """Convert NQ-open (JSONL with ``question`` and a list of ``answer`` strings).

    Items are unlabelled and graded after sampling, as for SimpleQA.

    Args:
        source: ``NQ-open.dev.jsonl``.

    Returns:
        The items, in file order (ids ``nq-open-0000`` ...).

    Raises:
        DataFileError: A line is not valid JSON or lacks a field.
    """
    items: list[DatasetItem] = []
    for lineno, row in read_jsonl(source):
        try:
            question, answers = row["question"], row["answer"]
        except (KeyError, TypeError) as exc:
            msg = f"an NQ-open row needs 'question' and 'answer'; missing {exc}."
            raise DataFileError(msg, path=str(source), line=lineno) from exc
        refs = [str(a) for a in answers] if isinstance(answers, list) else [str(answers)]
        items.append(_qa_item(f"nq-open-{len(items):04d}", question, refs))
    return items


# --------------------------------------------------------------------------------------
# MMLU (choice)


def convert_mmlu(source: Path, *, split: str = "dev") -> list[DatasetItem]:
    """Convert MMLU's headerless CSVs (question, four options, answer letter).

    Args:
        source: The ``mmlu`` folder (holding ``dev/`` and ``val/``) or one CSV file.
        split: ``"dev"``, ``"val"`` or ``"dev+val"`` when *source* is a folder.

    Returns:
        The items, subjects in alphabetical order (ids ``mmlu/<split>/<subject>/<row>``).

    Raises:
        ConfigurationError: *split* is unknown.
        DataFileError: A row does not have six fields or its answer is not A-D.
    """
    if source.is_file():
        files = [(source.parent.name, source)]
    else:
        splits = split.split("+")
        if not splits or any(s not in ("dev", "val", "test") for s in splits):
            msg = f"split must be 'dev', 'val', 'test' or joined with '+', got {split!r}."
            raise ConfigurationError(msg)
        files = [(s, f) for s in splits for f in sorted((source / s).glob("*.csv"))]
        if not files:
            msg = f"no CSV files for split {split!r} under {source}."
            raise DataFileError(msg, path=str(source))
    items = []
    for split_name, path in files:
        subject = path.stem.rsplit("_", 1)[0] if path.stem.endswith(f"_{split_name}") else path.stem
        with path.open(encoding="utf-8", newline="") as fh:
            reader = csv.reader(fh)
            for index, row in enumerate(reader):
                if len(row) != 6 or row[5].strip() not in MMLU_LABELS:
                    msg = (
                        "an MMLU row must be: question, four options, answer letter A-D; "
                        f"got {row!r}."
                    )
                    raise DataFileError(msg, path=str(path), line=reader.line_num)
                question, a, b, c, d, answer = row
                content = MMLU_INSTRUCTION.format(
                    subject=subject.replace("_", " "), question=question, A=a, B=b, C=c, D=d
                )
                items.append(
                    DatasetItem(
                        id=f"mmlu/{split_name}/{subject}/{index}",
                        messages=[{"role": "user", "content": content}],
                        label=answer.strip(),
                        meta={"subject": subject, "split": split_name},
                    )
                )
    return items


# --------------------------------------------------------------------------------------
# STS-B (rating)


def round_half_up(x: float) -> int:
    """Round to the nearest integer, halves upwards (2.5 → 3, unlike :func:`round`)."""
    return math.floor(x + 0.5)


def convert_stsb(source: Path, *, scale_min: int = 0) -> list[DatasetItem]:
    """Convert STS-B (tab-separated, no header; split on tabs, not with a CSV reader).

    Fields: genre, file, year, id, score (0-5), sentence 1, sentence 2 [, licence fields].
    The label is the score rounded half-up to an integer 0-5, as a string; with
    ``scale_min=1`` the scale is shifted to 1-6 (labels and prompt). The matching task is
    ``tasks.rating(k=6, low=scale_min)``.

    Args:
        source: ``sts-dev.csv``.
        scale_min: The lowest rating of the scale (0: the original 0-5 scale).

    Returns:
        The items, in file order (ids ``stsb/<genre>/<file>/<year>/<id>``).

    Raises:
        DataFileError: A row has fewer than seven fields or a score outside [0, 5].
    """
    items = []
    with source.open(encoding="utf-8") as fh:
        for lineno, raw in enumerate(fh, start=1):
            line = raw.rstrip("\n").rstrip("\r")
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) < 7:
                msg = (
                    "an STS-B row needs seven tab-separated fields (genre, file, year, id, "
                    f"score, sentence1, sentence2), got {len(fields)}."
                )
                raise DataFileError(msg, path=str(source), line=lineno)
            genre, file_, year, sid, score_text, s1, s2 = fields[:7]
            try:
                score = float(score_text)
            except ValueError:
                score = math.nan
            if not 0.0 <= score <= 5.0:
                msg = f"score must be a number in [0, 5], got {score_text!r}."
                raise DataFileError(msg, path=str(source), line=lineno)
            items.append(
                DatasetItem(
                    id=f"stsb/{genre}/{file_}/{year}/{sid}",
                    messages=[
                        {
                            "role": "user",
                            "content": STSB_INSTRUCTION.format(
                                low=scale_min, high=scale_min + 5, sentence1=s1, sentence2=s2
                            ),
                        }
                    ],
                    label=str(round_half_up(score) + scale_min),
                    meta={"score": score, "genre": genre, "sentence1": s1, "sentence2": s2},
                )
            )
    return items


# --------------------------------------------------------------------------------------
# Registry and selection


@dataclass(frozen=True)
class Converter:
    """A named converter and where its source lives in the shared data folder."""

    name: str
    """The name used on the command line."""
    default_source: str
    """The source path relative to the shared data folder."""
    function: Callable[..., list[DatasetItem]]
    """``function(source, **options) -> items``."""
    labels: tuple[str, ...] | None
    """The labels the items carry, or ``None`` for graded (answer-or-abstain) data."""
    options: tuple[str, ...] = ()
    """Keyword options *function* accepts."""


def _convert_bfcl(source: Path, split: str | None = None) -> list[DatasetItem]:
    from taskcal_agents.datasets._bfcl import convert_bfcl

    return convert_bfcl(source, split=split)


CONVERTERS: dict[str, Converter] = {
    c.name: c
    for c in (
        Converter(
            "when2call",
            "when2call/when2call_test_llm_judge.jsonl",
            convert_when2call,
            WHEN2CALL_LABELS,
        ),
        Converter("simpleqa", "simpleqa/simple_qa_test_set.csv", convert_simpleqa, None),
        Converter("nq-open", "nq_open/NQ-open.dev.jsonl", convert_nq_open, None),
        Converter("mmlu", "mmlu", convert_mmlu, MMLU_LABELS, ("split",)),
        Converter("stsb", "stsb/sts-dev.csv", convert_stsb, STSB_LABELS, ("scale_min",)),
        Converter("bfcl", "bfcl", _convert_bfcl, WHEN2CALL_LABELS, ("split",)),
    )
}


def _round_robin(groups: Sequence[Sequence[int]]) -> list[int]:
    """The first of each group, then the second of each, ... (a group that runs out drops out)."""
    rounds = max((len(group) for group in groups), default=0)
    return [group[k] for k in range(rounds) for group in groups if k < len(group)]


def select_items(
    items: Sequence[DatasetItem],
    *,
    limit: int | None = None,
    seed: int | None = None,
    balanced: bool = False,
) -> list[DatasetItem]:
    """Pick a subset of *items*.

    Args:
        items: The converted items.
        limit: How many to keep (all when ``None``).
        seed: Shuffle with this seed before taking *limit* items; ``None`` keeps file order.
        balanced: Take labels in turn (round robin), so small slices cover every label, and
            return them interleaved the same way.

    Returns:
        The selected items, in their original order. With *balanced*, labels interleaved
        instead: the first item of each label (labels sorted), then the second of each, ...
        (each label's items in their original order), so that the first lines of a written
        file already hold every label of the selection.

    Raises:
        ConfigurationError: *limit* is below 1, or *balanced* is asked of unlabelled items.
    """
    if limit is not None and limit < 1:
        msg = f"limit must be a positive integer or None, got {limit!r}."
        raise ConfigurationError(msg)
    order = list(range(len(items)))
    if seed is not None:
        random.Random(seed).shuffle(order)
    if not balanced:
        chosen = order if limit is None else order[:limit]
        return [items[i] for i in sorted(chosen)]
    labels: list[str] = []
    for item in items:
        if item.label is None:
            msg = "balanced selection needs labelled items; graded (unlabelled) data has none."
            raise ConfigurationError(msg)
        labels.append(item.label)
    by_label: dict[str, list[int]] = defaultdict(list)
    for i in order:
        by_label[labels[i]].append(i)
    order = _round_robin([by_label[k] for k in sorted(by_label)])
    chosen = order if limit is None else order[:limit]
    selected: dict[str, list[int]] = defaultdict(list)
    for i in sorted(chosen):
        selected[labels[i]].append(i)
    return [items[i] for i in _round_robin([selected[k] for k in sorted(selected)])]


def convert(
    name: str,
    source: str | os.PathLike[str] | None = None,
    *,
    limit: int | None = None,
    seed: int | None = None,
    balanced: bool = False,
    **options: Any,
) -> list[DatasetItem]:
    """Run the converter *name* on *source* (default: its file in the shared data folder).

    Args:
        name: One of :data:`CONVERTERS` (``when2call``, ``simpleqa``, ``nq-open``, ``mmlu``,
            ``stsb``).
        source: The source file or folder; ``None`` uses the shared data folder.
        limit: Keep at most this many items (see :func:`select_items`).
        seed: Shuffle seed for the selection.
        balanced: Select labels in turn, and interleave them in the result.
        **options: Converter options (``split`` for ``mmlu``, ``scale_min`` for ``stsb``).

    Returns:
        The converted items.

    Raises:
        ConfigurationError: Unknown converter or option.
        DataFileError: The source is missing or malformed.
    """
    if name not in CONVERTERS:
        msg = f"converter name must be one of {sorted(CONVERTERS)}, got {name!r}."
        raise ConfigurationError(msg)
    converter = CONVERTERS[name]
    unknown = sorted(set(options) - set(converter.options))
    if unknown:
        msg = (
            f"converter {name!r} accepts options {list(converter.options)!r}, got {unknown!r}; "
            "drop them."
        )
        raise ConfigurationError(msg)
    path = Path(source) if source is not None else shared_data_dir() / converter.default_source
    if not path.exists():
        msg = (
            f"source for {name!r} not found; pass --source or set ${SHARED_DATA_ENV} to the "
            "shared data folder."
        )
        raise DataFileError(msg, path=str(path))
    items = converter.function(path, **options)
    return select_items(items, limit=limit, seed=seed, balanced=balanced)
