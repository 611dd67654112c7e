"""Reply composition: the message that carries out the chosen action.

The representative sample of a sampled action (its most frequent canonical tool call, sent
as grounded, or its most typical text; under answer clustering the modal cluster's
representative), the task's texts for the abstain and ask actions, and under grounding the
ask action's question naming the arguments the sampled calls lacked. The rules are those of
:meth:`Decider.representative <taskcal_agents.decision.Decider.representative>` and
:meth:`Decider.ask_message <taskcal_agents.decision.Decider.ask_message>`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from langchain_core.messages import AIMessage

from taskcal_agents.decision._executability import (
    carries_out,
    grounded_flags,
    sendable_flags,
    trusted_flags,
)
from taskcal_agents.decision._task import Task
from taskcal_agents.parsing import (
    AnswerClusters,
    CallGrounding,
    SampleGrounding,
    approval_message,
    canonical_tool_calls,
    confirmation_message,
    extract_tool_calls,
    grounded_message,
    has_written_call,
    mentions,
    message_text,
    missing_arguments,
    modal_grounding,
    normalize_text,
    question_for,
    with_tool_calls,
)

__all__ = ["ask_message", "modal_sendable", "reply_message", "representative"]


def reply_message(
    task: Task,
    action: str,
    messages: Sequence[AIMessage],
    labels: Sequence[str | None],
    tool_names: Sequence[str] | None,
    clusters: AnswerClusters | None,
    groundings: Sequence[SampleGrounding] | None,
) -> tuple[AIMessage | None, tuple[str, ...]]:
    """The representative message and, for the ask action, the arguments it asks for.

    The confirm action's message asks the user to approve the call the call action would
    send (:func:`~taskcal_agents.parsing.approval_message`).
    """
    if action == task.confirm_action and groundings is not None:
        modal = modal_sendable(task, messages, labels, groundings, tool_names)
        if modal is None:  # not executable: a decision never takes it
            return None, ()
        return approval_message(modal[1].calls), ()
    if groundings is None or action != task.ask_action:
        message = representative(
            task,
            action,
            messages,
            labels,
            tool_names=tool_names,
            clusters=clusters,
            groundings=groundings,
        )
        return message, ()
    return ask_message(task, messages, labels, groundings)


def ask_message(
    task: Task,
    messages: Sequence[AIMessage],
    labels: Sequence[str | None],
    groundings: Sequence[SampleGrounding],
) -> tuple[AIMessage, tuple[str, ...]]:
    """The ask action's message under grounding, and the arguments it asks for.

    When the only calls that could be sent break the task's trust policy, a question that
    asks the user to confirm the modal one, naming each untrusted value and its source
    (:func:`untrusted_call`); otherwise a sampled clarifying question (one that names an
    argument the calls lack, when they lack any), else a question built from the tool's
    schema, else the task's ``ask_text``
    (see :meth:`Decider.ask_message <taskcal_agents.decision.Decider.ask_message>`).
    """
    ask = task.ask_action
    untrusted = untrusted_call(groundings)
    if untrusted is not None:
        arguments = tuple(dict.fromkeys(v.argument for v in untrusted.violations))
        return confirmation_message(untrusted), arguments
    call, needed = missing_arguments(groundings)
    questions = [
        m
        for m, label, g in zip(messages, labels, groundings, strict=True)
        if label == ask
        and not g.calls
        and message_text(m).strip()
        and not has_written_call(message_text(m))
    ]
    if needed:
        questions = [q for q in questions if any(mentions(message_text(q), a) for a in needed)]
    if questions:
        texts = [normalize_text(message_text(m)) for m in questions]
        best = Counter(texts).most_common(1)[0][0]
        return AIMessage(content=message_text(questions[texts.index(best)])), needed
    text = None if call is None else question_for(needed, call.description, call.numeric)
    return AIMessage(content=text or task.ask_text), needed if text else ()


def untrusted_call(groundings: Sequence[SampleGrounding]) -> CallGrounding | None:
    """The call to confirm: when no sample may be sent and some grounded one breaks the policy.

    Among the grounded samples whose calls break the trust policy, the modal one's first
    call with a violation; ``None`` when a sample may be sent or none breaks the policy.
    """
    if any(g.sendable for g in groundings):
        return None
    modal = modal_grounding([g for g in groundings if g.grounded and not g.trusted])
    return None if modal is None else next(c for c in modal.calls if c.violations)


def modal_sendable(
    task: Task,
    messages: Sequence[AIMessage],
    labels: Sequence[str | None],
    groundings: Sequence[SampleGrounding],
    tool_names: Sequence[str] | None = None,
) -> tuple[AIMessage, SampleGrounding] | None:
    """The sample whose call the call action would send, with its grounding, else ``None``.

    Among the samples labelled with the call action whose calls the task lets be sent
    (grounded, under ``execute: grounded``; trusted, under a trust policy), the first one
    making the most frequent call (compared as sent).
    """
    action = task.call_action
    sendable = sendable_flags(
        task, grounded_flags(groundings), len(messages), trusted_flags(groundings)
    )
    pairs = [
        (m, g)
        for m, label, g, ok in zip(messages, labels, groundings, sendable, strict=True)
        if label == action and ok and g.calls
        and carries_out(str(action), m, tool_names=tool_names, call_action=action)
    ]  # fmt: skip
    if not pairs:
        return None
    keys = [g.key for _, g in pairs]
    return pairs[keys.index(Counter(keys).most_common(1)[0][0])]


def representative(
    task: Task,
    action: str,
    messages: Sequence[AIMessage],
    labels: Sequence[str | None],
    *,
    tool_names: Sequence[str] | None = None,
    clusters: AnswerClusters | None = None,
    groundings: Sequence[SampleGrounding] | None = None,
) -> AIMessage | None:
    """The message that carries out ``action``, ``None`` when there is none.

    See :meth:`Decider.representative
    <taskcal_agents.decision.Decider.representative>` for the rules.
    """
    if action == task.abstain_action:
        return AIMessage(content=task.abstain_text)
    if clusters is not None and clusters.representative is not None:
        answer, _ = task.answer_abstain_labels()
        if action == answer:
            return messages[clusters.representative].model_copy()
    group = [m for m, label in zip(messages, labels, strict=True) if label == action]
    if action in task.sampled_actions:
        group = [
            m
            for m in group
            if carries_out(action, m, tool_names=tool_names, call_action=task.call_action)
        ]
    if action == task.call_action and action in task.sampled_actions and task.grounding is not None:
        if groundings is None or len(groundings) != len(messages):
            sendable_flags(task, None, len(messages))  # raises under execute: grounded
            groundings = None
        else:
            modal = modal_sendable(task, messages, labels, groundings, tool_names)
            return None if modal is None else grounded_message(with_tool_calls(modal[0]), modal[1])
    if group:
        calls = [extract_tool_calls(m) for m in group]
        with_calls = [(m, c) for m, c in zip(group, calls, strict=True) if c]
        if with_calls:
            keys = [canonical_tool_calls(c) for _, c in with_calls]
            best = Counter(keys).most_common(1)[0][0]
            return with_tool_calls(with_calls[keys.index(best)][0])
        texts = [normalize_text(message_text(m)) for m in group]
        best_text = Counter(texts).most_common(1)[0][0]
        return group[texts.index(best_text)].model_copy()
    if action == task.ask_action:
        return AIMessage(content=task.ask_text)
    return None
