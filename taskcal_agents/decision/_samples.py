"""Reading the samples of one decision: their labels, repeats, groundings and clusters.

Each sample's label as the task's parser g_T reads it with the offered tools; a ``tool_call``
sample that repeats a call already made and answered in the current user turn counts as
unparsed (a *repeat*); under the task's ``grounding`` each sample's calls are checked against
the request; under ``answer_clusters`` open answers are clustered by meaning. The rules are
those of :meth:`Decider.decide <taskcal_agents.decision.Decider.decide>`, which reads
its samples through here, as the adaptive-N stopping rule does.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from langchain_core.messages import AIMessage

from taskcal_agents.decision._effects import effect_resolver
from taskcal_agents.decision._task import Task
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.parsing import (
    AnswerClusters,
    EntailmentJudgeFactory,
    GroundingContext,
    SampleGrounding,
    canonical_tool_calls,
    cluster_samples,
    is_repeat_call,
    sent_args,
)

__all__ = ["cluster_with_judge", "ground_samples", "parse_samples", "read_samples"]


def parse_samples(
    task: Task,
    messages: Sequence[AIMessage],
    *,
    tool_names: Sequence[str] | None = None,
    answered_calls: Collection[str] = (),
) -> tuple[list[str | None], int]:
    """The label of each sample (``None``: unparsed or a repeat) and the number of repeats."""
    labels = [task.parse_completion(m, tool_names=tool_names) for m in messages]
    if not answered_calls:
        return labels, 0
    repeats = [
        label == task.call_action and is_repeat_call(m, answered_calls)
        for m, label in zip(messages, labels, strict=True)
    ]
    return [None if r else label for label, r in zip(labels, repeats, strict=True)], sum(repeats)


def ground_samples(
    task: Task, messages: Sequence[AIMessage], context: GroundingContext | None
) -> list[SampleGrounding] | None:
    """Each sample's grounding under the task's ``grounding`` (``None`` without it).

    Under the task's ``trust`` policy each call also records its violations.

    Raises:
        ConfigurationError: The task grounds its calls and ``context`` is ``None``.
    """
    if task.grounding is None:
        return None
    if context is None:
        msg = (
            f"Decider for task {task.name!r}: the task grounds its tool calls "
            "(grounding), so decide() needs context=GroundingContext(tools, messages): the "
            "request's tools and conversation, which each call's arguments are checked "
            "against; or build the task with grounding=None."
        )
        raise ConfigurationError(msg)
    effect_of = None if task.trust is None else effect_resolver(task.effects, context)
    return context.ground_samples(messages, trust=task.trust, effect_of=effect_of)


def read_samples(
    task: Task,
    messages: Sequence[AIMessage],
    *,
    tool_names: Sequence[str] | None = None,
    answered_calls: Collection[str] = (),
    context: GroundingContext | None = None,
) -> tuple[list[str | None], int, list[SampleGrounding] | None]:
    """The labels and repeats of :func:`parse_samples` and the groundings.

    Under grounding a call is also a repeat when the call that would be *sent* (invented
    optional arguments dropped) was already made and answered.
    """
    labels, n_repeats = parse_samples(
        task, messages, tool_names=tool_names, answered_calls=answered_calls
    )
    groundings = ground_samples(task, messages, context)
    if groundings is None or not answered_calls:
        return labels, n_repeats, groundings
    for i, (label, g) in enumerate(zip(labels, groundings, strict=True)):
        sent = [canonical_tool_calls([{"name": c.name, "args": sent_args(c), "id": None}])
                for c in g.calls]  # fmt: skip
        if label == task.call_action and any(key in answered_calls for key in sent):
            labels[i] = None
            n_repeats += 1
    return labels, n_repeats, groundings


def cluster_with_judge(
    task: Task,
    messages: Sequence[AIMessage],
    labels: list[str | None],
    question: str | None,
    judge: EntailmentJudgeFactory | None,
) -> tuple[AnswerClusters | None, list[str | None]]:
    """Under the task's ``answer_clusters``, the clusters and the labels after clustering.

    Without ``answer_clusters``: ``None`` and ``labels`` unchanged.

    Raises:
        ConfigurationError: The clusters are by entailment, there is a judge and no
            question.
    """
    if task.answer_clusters is None:
        return None, labels
    entails = None
    if task.answer_clusters.method == "entailment" and judge is not None:
        if not question:
            msg = (
                f"Decider for task {task.name!r}: answer_clusters method "
                "'entailment' asks the judge about the question the samples answer, "
                f"got question={question!r}; pass decide(..., question=...) (the text of "
                "the request's last user message, answer_clusters.question_of)."
            )
            raise ConfigurationError(msg)
        entails = judge(question=question)
    return cluster_samples(task, messages, labels, question=question, entails=entails)
