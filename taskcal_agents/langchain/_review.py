"""A confirmation as LangChain's human-in-the-loop interrupt: approve, edit or reject the call.

A decision that confirms (the task's confirm action, or a call the trust policy does not
send) replies with the library's marked confirmation question. In an agent run with a
checkpointer, :class:`~taskcal_agents.langchain.TaskCalibrationMiddleware` turns it into
an interrupt in ``HumanInTheLoopMiddleware``'s request format (:func:`review_request`:
each call's name, args and description; ``approve`` / ``edit`` / ``reject``), which
LangGraph and Agent Chat UI render, and the run resumes with the reviewer's answer
(:func:`reviewed_reply`):

- approve: exactly the confirmed calls are sent;
- edit: the edited call is sent when it is still an offered tool's call whose required
  arguments are given and that keeps the trust policy (the reviewer's values count as the
  user's words), else the reply asks for what it lacks;
- reject: the reply asks what the user wants instead.

Without a checkpointer the question stays the reply, and a plain yes on the next turn sends
exactly the confirmed calls (:meth:`~taskcal_agents.decision.Decider.approved`): one
mechanism either way. Every answer is also an outcome (:func:`outcome_label`).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from taskcal_agents.decision import Task
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.parsing import (
    CONFIRM_METADATA_KEY,
    GroundingContext,
    TrustPolicy,
    WarrantRule,
    question_for,
    sent_args,
)

__all__ = [
    "REJECTED_TEXT",
    "has_checkpointer",
    "outcome_label",
    "review_request",
    "reviewed_reply",
]

REJECTED_TEXT = "All right, I won't do that. What would you like me to do instead?"
"""The reply to a rejected confirmation (the reviewer's message, if any, follows it)."""

ALLOWED_DECISIONS = ["approve", "edit", "reject"]


def has_checkpointer() -> bool:
    """Whether the running LangGraph run has a checkpointer (an interrupt can resume)."""
    try:
        from langgraph.config import get_config
    except ImportError:  # pragma: no cover - langgraph is a dependency of the agents extra
        return False
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # not inside a run
        return False
    return configurable.get("__pregel_checkpointer") is not None


def review_request(calls: Sequence[Mapping[str, Any]], description: str) -> dict[str, Any]:
    """The interrupt's value: ``HumanInTheLoopMiddleware``'s ``HITLRequest`` for ``calls``."""
    names = list(dict.fromkeys(str(c["name"]) for c in calls))
    return {
        "action_requests": [
            {"name": c["name"], "args": dict(c["args"]), "description": description} for c in calls
        ],
        "review_configs": [
            {"action_name": name, "allowed_decisions": list(ALLOWED_DECISIONS)} for name in names
        ],
    }


def _decisions(answer: Any, n: int) -> list[Mapping[str, Any]]:
    decisions = answer.get("decisions") if isinstance(answer, Mapping) else None
    if not isinstance(decisions, list) or len(decisions) != n:
        msg = (
            f"the answer to a confirmation must be {{'decisions': [...]}} with one decision per "
            f"call ({n}), as HumanInTheLoopMiddleware's; got {answer!r}."
        )
        raise ConfigurationError(msg)
    for d in decisions:
        kind = d.get("type") if isinstance(d, Mapping) else None
        if kind not in ALLOWED_DECISIONS:
            msg = f"a confirmation's decision type must be one of {ALLOWED_DECISIONS!r}, got {d!r}."
            raise ConfigurationError(msg)
        if kind == "edit" and not isinstance(d.get("edited_action"), Mapping):
            msg = f"an edit decision needs 'edited_action' {{'name', 'args'}}, got {d!r}."
            raise ConfigurationError(msg)
    return decisions


def reviewed_reply(
    reply: AIMessage,
    calls: Sequence[Mapping[str, Any]],
    answer: Any,
    *,
    tools: Sequence[Any],
    messages: Sequence[BaseMessage],
    trust: TrustPolicy | None,
    task: Task,
) -> tuple[AIMessage, str]:
    """The message that replaces the confirmation after the reviewer's ``answer``.

    Args:
        reply: The confirmation question (the decided reply; its id and metadata are kept).
        calls: The confirmed calls (``{"name", "args"}``).
        answer: The resume value, ``{"decisions": [...]}``, one per call.
        tools: The offered tools (an edited call is checked against their schemas).
        messages: The conversation before the confirmation.
        trust: The task's trust policy.
        task: The task (its ask text when an edit leaves nothing to ask about).

    Returns:
        The reply and how it came: ``"approve"``, ``"edit"`` or ``"reject"`` (a rejection
        of any call rejects the confirmation; an edit that fails its check counts as
        ``"reject"`` too and asks for what it lacks).

    Raises:
        ConfigurationError: The answer is not one decision per call of the allowed types.
    """
    decisions = _decisions(answer, len(calls))
    # The question is answered: the reply keeps the decision's record, never the mark that
    # would let a later "ok" approve the call again (after a rejection, the rejected call).
    metadata = {k: v for k, v in reply.response_metadata.items() if k != CONFIRM_METADATA_KEY}
    if any(d["type"] == "reject" for d in decisions):
        said = next((str(d.get("message") or "") for d in decisions if d["type"] == "reject"), "")
        text = REJECTED_TEXT if not said else f"{REJECTED_TEXT} (You said: {said})"
        return AIMessage(content=text, id=reply.id, response_metadata=metadata), "reject"
    sent: list[dict[str, Any]] = []
    edited = False
    for call, d in zip(calls, decisions, strict=True):
        if d["type"] == "approve":
            sent.append({"name": call["name"], "args": dict(call["args"])})
            continue
        edited = True
        action = d["edited_action"]
        checked = _checked_edit(action, tools, messages, trust)
        if isinstance(checked, str):
            return AIMessage(content=checked or task.ask_text, id=reply.id,
                             response_metadata=metadata), "reject"  # fmt: skip
        sent.append(checked)
    tool_calls = [
        {"name": c["name"], "args": c["args"], "id": f"call_{uuid.uuid4().hex[:24]}",
         "type": "tool_call"}
        for c in sent
    ]  # fmt: skip
    message = AIMessage(content="", tool_calls=tool_calls, id=reply.id, response_metadata=metadata)
    return message, "edit" if edited else "approve"


def _checked_edit(
    action: Mapping[str, Any],
    tools: Sequence[Any],
    messages: Sequence[BaseMessage],
    trust: TrustPolicy | None,
) -> dict[str, Any] | str:
    """The edited call as it is sent, or the question that asks for what it lacks."""
    name = str(action.get("name") or "")
    args = action.get("args")
    if not isinstance(args, Mapping):
        return "What should I use for the call's arguments?"
    # The reviewer's values are the user's words: stated, and from the user.
    said = HumanMessage(content=json.dumps(dict(args), default=str))
    context = GroundingContext(tools, [*messages, said])
    if name not in context.schemas:
        offered = ", ".join(sorted(context.schemas)) or "none"
        return f"I can't call {name!r}: it is not one of the offered tools ({offered})."
    if trust is not None:  # the reviewer chose this call: the user's own warrant
        trust = trust.model_copy(update={"warrant": WarrantRule(effects=())})
    call = context.ground_call({"name": name, "args": dict(args)}, trust)
    if not call.grounded:
        return question_for(call.needed, call.description, call.numeric) or ""
    if not call.trusted:
        return "I can't make that call: a value in it comes from a source I may not trust."
    return {"name": name, "args": sent_args(call)}


_CANNOT = re.compile(
    r"\b(?:can(?:'|no)?t|cannot|not possible|impossible|no tool|wrong tool|not what i|"
    r"nothing|never ?mind|forget it|don'?t want)\b",
    re.IGNORECASE,
)
_INFO = re.compile(
    r"\b(?:wrong|instead|not that|missing|should be|use|change|different|actually|meant)\b",
    re.IGNORECASE,
)


def outcome_label(how: str, message: str, task: Task) -> str | None:
    """The label a confirmation's answer gives its decision, or ``None`` when it says none.

    An approval is the call label; an edit is the ask label (the call needed the user's
    values); a rejection is the abstain label when its message says the request cannot or
    should not be met, the ask label when it corrects a value, and no label otherwise.
    """
    if how == "approve":
        return task.call_action
    if how == "edit":
        return task.ask_action
    if _CANNOT.search(message):
        return task.abstain_action
    if _INFO.search(message):
        return task.ask_action
    return None
