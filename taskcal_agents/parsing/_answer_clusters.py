"""Open-answer latents: cluster N free-form answers by meaning (g_T for open-set tasks).

For answer-or-abstain on free-form questions (NQ-open, SimpleQA) the N sampled answers do
not fall into a fixed label set. As in semantic entropy (Kuhn et al., 2023; Farquhar et al.,
2024), :func:`cluster_answers` groups them into meaning classes; the belief is the share of
the modal class (with the number of classes and the entropy over them), and the modal class's
representative is the answer the system would give.

Two answers are equivalent (:func:`answers_equivalent`) when, after :func:`answer_tokens`
(the SQuAD normalisation of :func:`~taskcal_agents.parsing._grading.normalize_answer` plus
canonical numbers and dates),

1. their tokens are equal, or
2. the shorter is a contiguous run of whole tokens of the longer, the longer has at most
   ``max_containment_tokens`` tokens (the grader's rule and limit, so a short sentence that
   contains the answer matches it), and, when the question is given, the run holds a token
   that is not in the question (an answer that only repeats the question's words does not
   match every sentence that repeats them too).

Numbers and dates are compared by value: "1,000", "one thousand" and "1000" are one
token, "December 14, 1983" and "14th of Dec 1983" the same tokens (see :func:`answer_tokens`
for what the canonical form covers). Not handled: paraphrases ("Lou" for "Louis"),
reordered lists, and negation ("did not host it in 2014" contains "2014").

With an ``entails`` judge (:func:`entailment_judge`: the served model answers yes or no under
a choice constraint), answers that are not lexically equivalent are still clustered when
each entails the other.

A task with ``answer_clusters`` set (:class:`~taskcal_agents.decision.AnswerClusterSpec`) uses
this as its g_T over the N samples, by one path at sampling, evaluation and run time
(:func:`cluster_samples`): the answering samples are clustered, each sample in the modal
cluster counts as the task's answer label and every other parsed sample (another answer,
an abstention) as its abstain label, so the belief is the smoothed share of the modal
cluster. The answer action replies with the modal cluster's representative
(:attr:`AnswerClusters.representative`), and a graded item's label says whether that
answer is right. The question the answers are compared against is the text of the last
user message of the request (:func:`question_of`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage

from taskcal_agents._validation import check_int
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.parsing._answer_tokens import answer_tokens
from taskcal_agents.parsing._entailment import (
    ENTAILMENT_CHOICES,
    ENTAILMENT_PROMPT,
    ChoiceSampler,
    EntailmentJudgeFactory,
    entailment_judge,
)
from taskcal_agents.parsing._grading import DEFAULT_MAX_CONTAINMENT_TOKENS, contains_tokens
from taskcal_agents.parsing._text import message_text

if TYPE_CHECKING:
    from taskcal_agents.decision import Task

# ----------------------------------------------------------------------------- equivalence


def _check_max_containment(owner: str, max_containment_tokens: object) -> None:
    check_int(
        max_containment_tokens,
        f"{owner}: max_containment_tokens",
        minimum=0,
        note="0 turns containment off",
    )


def _tokens_equivalent(
    a: Sequence[str],
    b: Sequence[str],
    question: frozenset[str] | None,
    max_containment_tokens: int,
) -> bool:
    if not a or not b:
        return False
    if list(a) == list(b):
        return True
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    if len(long) > max_containment_tokens or not contains_tokens(long, short):
        return False
    return question is None or not set(short) <= question


def answers_equivalent(
    a: str,
    b: str,
    *,
    question: str | None = None,
    max_containment_tokens: int = DEFAULT_MAX_CONTAINMENT_TOKENS,
) -> bool:
    """Whether two answers are lexically the same answer (see the module docstring).

    Args:
        a: One answer.
        b: The other answer.
        question: The question; when given, containment needs a token outside it.
        max_containment_tokens: Longest answer (in tokens) that may contain the other;
            0 turns containment off.

    Returns:
        ``True`` when the canonical tokens are equal or one answer contains the other
        within a short answer. Answers without words are never equivalent.

    Raises:
        ConfigurationError: An answer or the question is not a string, or
            ``max_containment_tokens`` is not an int >= 0.
    """
    for name, value in (("a", a), ("b", b)):
        if not isinstance(value, str):
            msg = f"answers_equivalent: {name} must be a string, got {value!r}."
            raise ConfigurationError(msg)
    _check_max_containment("answers_equivalent", max_containment_tokens)
    return _tokens_equivalent(
        answer_tokens(a), answer_tokens(b), _question_tokens(question), max_containment_tokens
    )


def _question_tokens(question: str | None) -> frozenset[str] | None:
    if question is None:
        return None
    if not isinstance(question, str):
        msg = f"answer clustering: question must be a string or None, got {question!r}."
        raise ConfigurationError(msg)
    return frozenset(answer_tokens(question))


# ------------------------------------------------------------------------------ clustering


@dataclass(frozen=True)
class AnswerClusters:
    """N answers grouped by meaning (built by :func:`cluster_answers`).

    Shares are over all N answers, abstentions included, so an abstention counts against
    the modal answer as a different answer does; the semantic entropy is over the clusters
    of the answers that were given.

    Attributes:
        answers: The N answers as given (``None`` or blank for an abstention).
        clusters: Indices into ``answers`` per cluster, in order of first appearance; the
            first index is the cluster's representative.
        abstentions: Indices of the answers that were not clustered (``None``, blank, or no
            word left after normalisation).
    """

    answers: tuple[str | None, ...]
    clusters: tuple[tuple[int, ...], ...]
    abstentions: tuple[int, ...]

    @property
    def n_answers(self) -> int:
        """N, abstentions included."""
        return len(self.answers)

    @property
    def n_clusters(self) -> int:
        """The number of meaning classes among the given answers."""
        return len(self.clusters)

    @property
    def sizes(self) -> tuple[int, ...]:
        """Answers per cluster."""
        return tuple(len(members) for members in self.clusters)

    @property
    def modal(self) -> int | None:
        """Index of the largest cluster (the earliest on ties); ``None`` if all abstained."""
        sizes = self.sizes
        return max(range(len(sizes)), key=sizes.__getitem__) if sizes else None

    @property
    def modal_share(self) -> float:
        """Size of the modal cluster over N (0.0 if all abstained)."""
        modal = self.modal
        return 0.0 if modal is None else self.sizes[modal] / self.n_answers

    @property
    def abstain_share(self) -> float:
        """Abstentions over N."""
        return len(self.abstentions) / self.n_answers

    @property
    def representative(self) -> int | None:
        """Index of the modal cluster's first answer, its representative (``None``: none)."""
        modal = self.modal
        return None if modal is None else self.clusters[modal][0]

    @property
    def modal_answer(self) -> str | None:
        """The modal cluster's representative (its first answer); ``None`` if all abstained."""
        index = self.representative
        return None if index is None else self.answers[index]

    @property
    def semantic_entropy(self) -> float:
        """Entropy (nats) of the cluster frequencies among the given answers (0.0: one or none)."""
        total = sum(self.sizes)
        return -sum(size / total * math.log(size / total) for size in self.sizes) + 0.0

    @property
    def assignments(self) -> tuple[int | None, ...]:
        """Cluster index per answer (``None`` for an abstention)."""
        index: list[int | None] = [None] * self.n_answers
        for k, members in enumerate(self.clusters):
            for i in members:
                index[i] = k
        return tuple(index)

    @classmethod
    def from_assignments(
        cls, answers: Sequence[str | None], assignments: Sequence[int | None]
    ) -> AnswerClusters:
        """Rebuild clusters from :attr:`assignments` (as stored in a samples file).

        Args:
            answers: The N answers.
            assignments: Cluster index per answer, ``None`` for an abstention; clusters
                numbered in order of first appearance, as :func:`cluster_answers` numbers
                them.

        Raises:
            ConfigurationError: The lengths differ, an abstention (``None`` or blank) has a
                cluster, or the numbering is not 0, 1, … in order of first appearance.
        """
        if len(assignments) != len(answers):
            msg = (
                f"AnswerClusters.from_assignments: {len(assignments)} assignments for "
                f"{len(answers)} answers; pass one per answer."
            )
            raise ConfigurationError(msg)
        clusters: list[list[int]] = []
        abstentions: list[int] = []
        for i, (answer, k) in enumerate(zip(answers, assignments, strict=True)):
            if k is None:
                abstentions.append(i)
            elif not answer or isinstance(k, bool) or not isinstance(k, int) or k > len(clusters):
                msg = (
                    f"AnswerClusters.from_assignments: answer {i} ({answer!r}) has cluster "
                    f"{k!r}; an answer needs the index of an earlier cluster or the next one "
                    f"({len(clusters)}), an abstention None."
                )
                raise ConfigurationError(msg)
            elif k == len(clusters):
                clusters.append([i])
            else:
                clusters[k].append(i)
        return cls(
            answers=tuple(answers),
            clusters=tuple(tuple(members) for members in clusters),
            abstentions=tuple(abstentions),
        )


def cluster_answers(
    answers: Sequence[str | None],
    *,
    entails: Callable[[str, str], bool] | None = None,
    question: str | None = None,
    max_containment_tokens: int = DEFAULT_MAX_CONTAINMENT_TOKENS,
) -> AnswerClusters:
    """Group answers greedily by meaning.

    Each answer joins the first cluster whose representative (first answer) it is
    equivalent to (:func:`answers_equivalent`), or, with *entails*, that it entails both
    ways (``entails(rep, answer) and entails(answer, rep)``, asked only when the lexical
    test fails); else it starts a new cluster. Abstentions are not clustered.

    Args:
        answers: The N answers; ``None`` or blank text for an abstention (map the answers
            that the task's parser reads as abstentions, "I don't know", to ``None``).
        entails: Optional judge, e.g. :func:`entailment_judge`.
        question: The question (see :func:`answers_equivalent`).
        max_containment_tokens: See :func:`answers_equivalent`.

    Returns:
        The clusters.

    Raises:
        ConfigurationError: *answers* is a string, empty, or holds something other than a
            string or ``None``; or another argument is invalid.
    """
    if isinstance(answers, str) or not isinstance(answers, Sequence) or not answers:
        msg = (
            "cluster_answers: answers must be a non-empty sequence of strings (None for an "
            f"abstention), got {answers!r}."
        )
        raise ConfigurationError(msg)
    for i, answer in enumerate(answers):
        if answer is not None and not isinstance(answer, str):
            msg = f"cluster_answers: answers[{i}] must be a string or None, got {answer!r}."
            raise ConfigurationError(msg)
    _check_max_containment("cluster_answers", max_containment_tokens)
    question_tokens = _question_tokens(question)
    tokens = [answer_tokens(answer) if answer else [] for answer in answers]
    clusters: list[list[int]] = []
    abstentions: list[int] = []
    for i, answer in enumerate(answers):
        if answer is None or not tokens[i]:
            abstentions.append(i)
            continue
        for members in clusters:
            rep = members[0]
            if _tokens_equivalent(tokens[rep], tokens[i], question_tokens, max_containment_tokens):
                members.append(i)
                break
            rep_answer = str(answers[rep])
            if entails is not None and entails(rep_answer, answer) and entails(answer, rep_answer):
                members.append(i)
                break
        else:
            clusters.append([i])
    return AnswerClusters(
        answers=tuple(answers),
        clusters=tuple(tuple(members) for members in clusters),
        abstentions=tuple(abstentions),
    )


# ------------------------------------------------------------------ the task's g_T over N


def question_of(messages: Sequence[BaseMessage | Mapping[str, Any]]) -> str | None:
    """The question a request asks: the text of its last user message (``None``: none).

    Args:
        messages: LangChain messages or OpenAI-style message dicts.

    Returns:
        The stripped text (text blocks joined by spaces), or ``None`` when there is no
        user message with text.
    """
    for message in reversed(messages):
        if isinstance(message, BaseMessage):
            if message.type != "human":
                continue
            content: Any = message.content
        elif message.get("role") == "user":
            content = message.get("content")
        else:
            continue
        if isinstance(content, str):
            text = content
        else:
            blocks = content or []
            text = " ".join(
                b if isinstance(b, str) else str(b.get("text") or "")
                for b in blocks
                if isinstance(b, str) or (isinstance(b, Mapping) and b.get("type") == "text")
            )
        return text.strip() or None
    return None


def sample_answers(
    task: Task, messages: Sequence[AIMessage], labels: Sequence[str | None]
) -> list[str | None]:
    """The answer text of each sample the parser labelled an answer, else ``None``.

    Raises:
        ConfigurationError: *task* is not an answer-or-abstain task, or the lengths differ.
    """
    answer, _ = task.answer_abstain_labels()
    if len(messages) != len(labels):
        msg = (
            f"sample_answers: {len(labels)} labels for {len(messages)} samples of task "
            f"{task.name!r}; pass one label per sample."
        )
        raise ConfigurationError(msg)
    return [
        message_text(m) if label == answer else None
        for m, label in zip(messages, labels, strict=True)
    ]


def modal_labels(
    task: Task, clusters: AnswerClusters, labels: Sequence[str | None]
) -> list[str | None]:
    """The samples' labels under clustering: the answer label in the modal cluster.

    A sample in the modal cluster counts as the task's answer label; every other parsed
    sample (another answer, an abstention, an answer without words) as its abstain label;
    an unparsed sample (``None``) stays unparsed, for the task's ``unparsed`` policy.

    Args:
        task: An answer-or-abstain task.
        clusters: The clusters of the samples' answers (one answer per sample).
        labels: The parsed label of each sample (``None``: unparsed).

    Raises:
        ConfigurationError: *task* is not an answer-or-abstain task, or the lengths differ.
    """
    answer, abstain = task.answer_abstain_labels()
    if clusters.n_answers != len(labels):
        msg = (
            f"modal_labels: {len(labels)} labels for {clusters.n_answers} clustered answers "
            f"of task {task.name!r}; pass one label per sample."
        )
        raise ConfigurationError(msg)
    modal = clusters.modal
    members = frozenset(() if modal is None else clusters.clusters[modal])
    return [
        None if label is None else answer if i in members else abstain
        for i, label in enumerate(labels)
    ]


def cluster_samples(
    task: Task,
    messages: Sequence[AIMessage],
    labels: Sequence[str | None],
    *,
    question: str | None = None,
    entails: Callable[[str, str], bool] | None = None,
) -> tuple[AnswerClusters | None, list[str | None]]:
    """Cluster N parsed samples by meaning and relabel them by the modal cluster.

    The one g_T over N samples of a task with ``answer_clusters`` (sampling, evaluation and
    the :class:`~taskcal_agents.decision.Decider` call it): :func:`sample_answers`, then
    :func:`cluster_answers` with the task's ``max_containment_tokens``, then
    :func:`modal_labels`.

    Args:
        task: An answer-or-abstain task.
        messages: The sampled completions.
        labels: Their parsed labels (:meth:`~taskcal_agents.decision.Task.parse_completion`).
        question: The question (:func:`question_of`).
        entails: The judge, for ``method: entailment``.

    Returns:
        The clusters (``None`` without samples) and the labels under clustering.

    Raises:
        ConfigurationError: *task* is not an answer-or-abstain task, or the lengths differ.
    """
    if not messages:
        return None, []
    spec = task.answer_clusters
    limit = DEFAULT_MAX_CONTAINMENT_TOKENS if spec is None else spec.max_containment_tokens
    clusters = cluster_answers(
        sample_answers(task, messages, labels),
        entails=entails,
        question=question,
        max_containment_tokens=limit,
    )
    return clusters, modal_labels(task, clusters, labels)


def clusters_record(
    clusters: AnswerClusters, *, method: str, question: str | None
) -> dict[str, Any]:
    """The ``clusters`` entry of a samples-file record (read back by :func:`clusters_from_record`).

    Returns:
        ``{"method", "question", "assignments", "n_clusters", "sizes", "modal_share",
        "answer"}``: the clustering method, the question, the cluster index per sample
        (``None``: abstained or unparsed), the number of clusters, their sizes, the modal
        cluster's share of N and its representative answer.
    """
    return {
        "method": method,
        "question": question,
        "assignments": list(clusters.assignments),
        "n_clusters": clusters.n_clusters,
        "sizes": list(clusters.sizes),
        "modal_share": clusters.modal_share,
        "answer": clusters.modal_answer,
    }


def clusters_from_record(entry: Mapping[str, Any], answers: Sequence[str | None]) -> AnswerClusters:
    """The clusters a record stored (see :func:`clusters_record`) over *answers*.

    Raises:
        ConfigurationError: The stored assignments do not fit *answers*.
    """
    assignments = entry.get("assignments")
    if not isinstance(assignments, list):
        msg = f"a record's clusters need a list 'assignments', got {assignments!r}."
        raise ConfigurationError(msg)
    return AnswerClusters.from_assignments(answers, assignments)


__all__ = [
    "ENTAILMENT_CHOICES",
    "ENTAILMENT_PROMPT",
    "AnswerClusters",
    "ChoiceSampler",
    "EntailmentJudgeFactory",
    "answer_tokens",
    "answers_equivalent",
    "cluster_answers",
    "cluster_samples",
    "clusters_from_record",
    "clusters_record",
    "entailment_judge",
    "modal_labels",
    "question_of",
    "sample_answers",
]
