"""Grading an unlabelled item (answer-or-abstain data with reference answers).

The answer the system would give — the greedy completion if it answers, else the most
frequent answering sample, or with answer clustering the modal cluster's representative —
is compared with the references by :func:`~taskcal_agents.parsing._grading.grade_answer`,
and the item's true label is the action that is optimal given the truth: the task's
*answer* label when that answer is correct, its *abstain* label otherwise.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage

from taskcal_agents.parsing import grade_answer, normalize_answer

__all__ = ["grade_item", "grading"]

if TYPE_CHECKING:
    from taskcal_agents.datasets import DatasetItem
    from taskcal_agents.decision import Task
    from taskcal_agents.parsing import AnswerClusters


def _text(message: AIMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content.strip()
    return " ".join(
        b if isinstance(b, str) else str(b.get("text", "")) for b in content if b
    ).strip()


def grading(
    task: Task, answer: str | None, source: str | None, references: Sequence[str]
) -> dict[str, Any]:
    """The grading of *answer* (``None``: none given) against *references*.

    Returns:
        ``{"label", "answer", "from", "correct", "references"}``: the task's answer label
        when :func:`~taskcal_agents.parsing._grading.grade_answer` finds the answer right,
        else its abstain label.

    Raises:
        ConfigurationError: The task is not an answer-or-abstain task.
    """
    answer_label, abstain_label = task.answer_abstain_labels()
    correct = answer is not None and grade_answer(answer, references)
    return {
        "label": answer_label if correct else abstain_label,
        "answer": answer,
        "from": source,
        "correct": bool(correct),
        "references": list(references),
    }


def grade_item(
    task: Task,
    item: DatasetItem,
    greedy: AIMessage | None,
    samples: Sequence[AIMessage],
    labels: Sequence[str | None],
    *,
    clusters: AnswerClusters | None = None,
) -> dict[str, Any]:
    """Grade the answer the system would give for an unlabelled item.

    With *clusters* (answer clustering) that is the modal cluster's representative
    (``"from": "modal_cluster"``); else the greedy completion if it answers, else the
    first answering sample with the most frequent normalised text.

    Returns:
        ``{"label", "answer", "from", "correct", "references"}`` (see :func:`grading`).
    """
    if clusters is not None:
        modal = clusters.modal_answer
        return grading(task, modal, "modal_cluster" if modal else None, item.references)
    answer_label, _ = task.answer_abstain_labels()
    answer: str | None = None
    source: str | None = None
    if greedy is not None and task.parse_completion(greedy) == answer_label:
        answer, source = _text(greedy), "greedy"
    else:
        answers = [_text(m) for m, lab in zip(samples, labels, strict=True) if lab == answer_label]
        if answers:
            by_norm = Counter(normalize_answer(a) for a in answers)
            best = by_norm.most_common(1)[0][0]
            answer = next(a for a in answers if normalize_answer(a) == best)
            source = "samples"
    return grading(task, answer, source, item.references)
