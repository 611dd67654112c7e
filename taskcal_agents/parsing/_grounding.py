"""Argument grounding: is each sampled tool call supported by the conversation?

Small models call a tool on nearly every request and fill in the arguments they were not
given ("Find a good movie" → ``genre="Mystery"``). A call whose arguments the user never
stated is evidence that the right move is to ask, not to call. This module checks each
sampled call against the offered tool's JSON schema and the conversation, with no model
call:

- an argument the schema requires and the call leaves out (or leaves empty) is
  **missing**;
- a given argument is **stated** when the conversation (user and system messages, earlier
  tool results) contains its value: the normalised text, its content tokens as whole
  words (a plural form; "Eve" is not stated by "everyone"), a number or a date by value
  (the normalisation of :func:`~taskcal_agents.parsing._answer_clusters.answer_tokens`:
  "twenty five" is 25, "March 5th" is ``2024-03-05``'s day and month; a date-time needs
  its date and its time of day, an end time may be its stated start plus a stated length
  of time, "1 hour long"), an acronym of the words ("US dollars" for ``USD``) or a common
  alias ("NYC" for "New York", "euros" for ``EUR``);
- it is **inferable** when no statement is needed: a boolean, the schema's default, an
  optional argument's enum value, a date when the user's own turns name a relative day
  ("tomorrow", "next Friday"; a date-time's time of day must still be stated);
- otherwise it is **unsupported**: the model invented it.

A call is *grounded* when its tool was offered and no required argument is missing or
unsupported; an unsupported optional argument is dropped from the call before it is sent
(:func:`grounded_message`: the tool's own default applies, no invented value is sent). A
sample is grounded when every call it makes is (parallel calls are checked each on its
own). :func:`call_agreement` counts how many samples make
the same call (same tools, same normalised arguments).

:class:`GroundingContext` holds what one decision grounds in: the offered tools' schemas
(OpenAI tool schemas, BFCL's ``"type": "dict"`` dialect, LangChain tools) and the
conversation's text. Build it once per request; grounding a sample is a few token-set
look-ups.

The parts live in private modules of this package: the tools' schema dialects in
``_tool_schemas`` (:func:`tool_schemas`), the conversation's text and its look-ups (the
evidence matcher) in ``_evidence``, the ordered rules that decide an argument's status in
``_grounding_rules`` and the wording of the question that asks for what a call lacks in
``_questions`` (:func:`question_for`, :func:`mentions`). This module holds the results and
the context that applies the rules.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolCall

from taskcal_agents.parsing._answer_tokens import answer_tokens
from taskcal_agents.parsing._argument_kinds import (
    argument_kind,
    embedded_identifiers,
    is_identifier,
)
from taskcal_agents.parsing._effects import ToolEffect, declared_effect, tool_name
from taskcal_agents.parsing._evidence import STOPWORDS, Evidence
from taskcal_agents.parsing._grounding_rules import (
    IDENTIFIER_MARK,
    NAME_MARK,
    WORDS_MARK,
    ArgumentStatus,
    check_value,
    clock_time,
    is_empty,
    span_minutes,
    span_start,
)
from taskcal_agents.parsing._provenance import Source, call_names, made_calls, message_source
from taskcal_agents.parsing._questions import (
    CONFIRM_METADATA_KEY,
    is_affirmative,
    mentions,
    question_for,
)
from taskcal_agents.parsing._tool_calls import extract_tool_calls
from taskcal_agents.parsing._tool_schemas import tool_schemas
from taskcal_agents.parsing._trust import TrustPolicy, TrustViolation
from taskcal_agents.parsing._warrant import (
    Warrant,
    capability,
    names_an_action,
    prompted_by,
    user_words,
)

__all__ = [
    "ArgumentCheck",
    "CallGrounding",
    "GroundingContext",
    "SampleGrounding",
    "call_agreement",
    "grounded_message",
    "mentions",
    "missing_arguments",
    "modal_grounding",
    "question_for",
    "sent_args",
    "tool_schemas",
]

_CONTEXT_ROLES = frozenset({"user", "human", "system", "developer", "tool", "function"})
"""Message roles whose text is evidence: what the user and the deployment said, and what
tools returned (the model's own words are not)."""


@dataclass(frozen=True)
class ArgumentCheck:
    """How the conversation supports one argument of a call.

    Attributes:
        name: The argument's name.
        value: The value the call gives it.
        status: ``"stated"``, ``"inferable"`` or ``"unsupported"`` (see the module
            docstring).
        how: The rule that decided it: ``"text"``, ``"tokens"``, ``"number"``, ``"date"``,
            ``"acronym"``, ``"alias"``, ``"boolean"``, ``"default"`` (the schema's default
            or a "no preference" value it names, such as ``'dontcare'``), ``"enum"``,
            ``"relative_date"``, ``"whole"`` (an identifier's whole value), ``"duration"``
            (an end time its stated start and a stated length of time give), ``"empty"``
            or ``"absent"``.
        required: Whether the schema requires the argument.
        kind: The argument's kind
            (:func:`~taskcal_agents.parsing._argument_kinds.argument_kind`: ``"recipient"``,
            ``"amount"``, ``"url"``…, ``"other"``).
        sources: Its provenance: the source of each message that supports the value on
            its own (or, for a value that only several messages state together, of each
            that holds part of it); an inference's rule; empty when unsupported.
    """

    name: str
    value: Any
    status: ArgumentStatus
    how: str
    required: bool = False
    kind: str = "other"
    sources: tuple[Source, ...] = ()


@dataclass(frozen=True)
class CallGrounding:
    """One tool call checked against its schema and the conversation.

    Attributes:
        name: The tool called.
        args: The call's arguments.
        offered: Whether the tool was offered (its schema is known).
        missing: Required arguments the call leaves out or leaves empty, in schema order.
        arguments: The check of each given argument.
        description: The offered tool's description (for a question that asks for what the
            call lacks, :func:`question_for`).
        numeric: The offered tool's parameters of type ``number`` or ``integer`` (asked for
            with "how many" or "what", not "which").
        violations: Under a trust policy, the values that no trusted source supplies (and,
            for a call that needs a warrant and has none, the call itself: argument ``""``,
            kind ``"tool"``, the rule ``"warrant.EFFECT"``).
        warrant: Under a trust policy, what asked for the call
            (:class:`~taskcal_agents.parsing.Warrant`); ``None`` without one.
    """

    name: str
    args: Mapping[str, Any]
    offered: bool
    missing: tuple[str, ...]
    arguments: tuple[ArgumentCheck, ...]
    description: str | None = None
    numeric: tuple[str, ...] = ()
    violations: tuple[TrustViolation, ...] = ()
    warrant: Warrant | None = None

    @property
    def trusted(self) -> bool:
        """Whether every value it sends comes from a source the trust policy trusts."""
        return not self.violations

    @property
    def unsupported(self) -> tuple[str, ...]:
        """The given arguments whose values the conversation does not support."""
        return tuple(a.name for a in self.arguments if a.status == "unsupported")

    @property
    def invented(self) -> tuple[str, ...]:
        """The required arguments whose values the conversation does not support."""
        return tuple(a.name for a in self.arguments if a.status == "unsupported" and a.required)

    @property
    def dropped(self) -> tuple[str, ...]:
        """The optional arguments whose values the conversation does not support.

        A grounded call is sent without them (the tool's own default applies).
        """
        return tuple(a.name for a in self.arguments if a.status == "unsupported" and not a.required)

    @property
    def grounded(self) -> bool:
        """Whether the call can be made: offered, no required argument missing or invented.

        Invented optional arguments are :attr:`dropped` before it is sent.
        """
        return self.offered and not self.missing and not self.invented

    @property
    def needed(self) -> tuple[str, ...]:
        """What the user would have to say: the missing, then the invented arguments."""
        return self.missing + tuple(a for a in self.invented if a not in self.missing)


@dataclass(frozen=True)
class SampleGrounding:
    """The grounding of every complete call one sample makes.

    Attributes:
        calls: One :class:`CallGrounding` per call
            (:func:`~taskcal_agents.parsing.extract_tool_calls`; empty for a sample that
            makes no complete call, such as a question or a call cut off by
            ``max_tokens``).
        key: The sample's call key: its calls' names and normalised arguments, ``""``
            without calls (:func:`call_agreement` compares these).
    """

    calls: tuple[CallGrounding, ...]
    key: str = ""

    @property
    def makes_call(self) -> bool:
        """Whether the sample makes at least one complete call."""
        return bool(self.calls)

    @property
    def grounded(self) -> bool:
        """Whether it makes calls and every one of them is grounded."""
        return bool(self.calls) and all(c.grounded for c in self.calls)

    @property
    def trusted(self) -> bool:
        """Whether no call it makes breaks the trust policy (:attr:`CallGrounding.trusted`)."""
        return all(c.trusted for c in self.calls)

    @property
    def sendable(self) -> bool:
        """Whether it makes calls, each grounded and trusted: what may be sent."""
        return self.grounded and self.trusted

    @property
    def violations(self) -> tuple[TrustViolation, ...]:
        """The trust policy's violations of all its calls."""
        return tuple(v for c in self.calls for v in c.violations)

    @property
    def needed(self) -> tuple[str, ...]:
        """The arguments its ungrounded calls need (missing first), without repeats."""
        out: list[str] = []
        for call in self.calls:
            out += [a for a in call.needed if a not in out]
        return tuple(out)


def sent_args(call: CallGrounding) -> dict[str, Any]:
    """The arguments a grounded call is sent with: its own, less the :attr:`dropped` ones."""
    dropped = set(call.dropped)
    return {k: v for k, v in call.args.items() if k not in dropped}


def grounded_message(message: AIMessage, grounding: SampleGrounding) -> AIMessage:
    """``message`` with its tool calls as they are sent: invented optional arguments dropped.

    Args:
        message: A sample whose calls are real ``tool_calls`` (e.g. from
            :func:`~taskcal_agents.parsing._tool_calls.with_tool_calls`), in the order
            :func:`~taskcal_agents.parsing.extract_tool_calls` found them.
        grounding: Its grounding (:meth:`GroundingContext.ground`).

    Returns:
        A copy; unchanged when nothing is dropped or the calls do not line up.
    """
    calls = list(message.tool_calls)
    if len(calls) != len(grounding.calls) or not any(c.dropped for c in grounding.calls):
        return message
    fixed = [
        {**call, "args": sent_args(g)} if call["name"] == g.name else call
        for call, g in zip(calls, grounding.calls, strict=True)
    ]
    return message.model_copy(update={"tool_calls": fixed})


def call_agreement(groundings: Sequence[SampleGrounding]) -> int:
    """How many samples make the modal call (same tools, same normalised arguments).

    Args:
        groundings: One per sample.

    Returns:
        The count of the most frequent non-empty call key; 0 when no sample makes a call.
    """
    keys = Counter(g.key for g in groundings if g.key)
    return max(keys.values(), default=0)


def modal_grounding(groundings: Sequence[SampleGrounding]) -> SampleGrounding | None:
    """The first of the samples that make the most frequent call (``None``: none makes one)."""
    with_calls = [g for g in groundings if g.key]
    if not with_calls:
        return None
    key = Counter(g.key for g in with_calls).most_common(1)[0][0]
    return next(g for g in with_calls if g.key == key)


def missing_arguments(
    groundings: Sequence[SampleGrounding],
) -> tuple[CallGrounding | None, tuple[str, ...]]:
    """What the ungrounded calls lack: the tool most often called ungrounded, its arguments.

    Among the samples' ungrounded calls to offered tools, the tool called most often
    (ties: the first seen) and the arguments that at least half of its ungrounded calls
    need (:attr:`CallGrounding.needed`), most needed first; at least the most needed one.

    Returns:
        ``(call, arguments)``: the first ungrounded call to that tool and the arguments;
        ``(None, ())`` when no sample makes an ungrounded call.
    """
    calls = [c for g in groundings for c in g.calls if c.offered and not c.grounded]
    if not calls:
        return None, ()
    tool = Counter(c.name for c in calls).most_common(1)[0][0]
    mine = [c for c in calls if c.name == tool]
    need = Counter(a for c in mine for a in c.needed)
    ranked = [a for a, _ in need.most_common()]
    kept = [a for a in ranked if need[a] * 2 >= len(mine)] or ranked[:1]
    return mine[0], tuple(kept)


# --------------------------------------------------------------------------- the context


def _message_role_text(message: Any) -> tuple[str, str]:
    if isinstance(message, BaseMessage):
        role = str(getattr(message, "role", "")) if message.type == "chat" else message.type
        content: Any = message.content
    elif isinstance(message, Mapping):
        role = str(message.get("role", ""))
        content = message.get("content")
    else:
        return "", ""
    if isinstance(content, str):
        return role, content
    if isinstance(content, list):  # content blocks
        parts = [
            b if isinstance(b, str) else str(b.get("text", ""))
            for b in content
            if isinstance(b, str) or (isinstance(b, Mapping) and b.get("type") == "text")
        ]
        return role, " ".join(parts)
    if content is None:
        return role, ""
    return role, json.dumps(content, default=str)


class GroundingContext:
    """The offered tools' schemas and the conversation that one decision grounds in.

    Args:
        tools: The tools offered to the request (see :func:`tool_schemas`).
        messages: The request's conversation, as LangChain messages or OpenAI-style
            dicts, *without* the task's own prompt: the text of user, system and tool
            messages is evidence; the model's own messages are not. Each supporting
            message is recorded as a :class:`~taskcal_agents.parsing._provenance.Source`
            of the values it supports (a tool result with its call id and the tool of the
            latest call before it with that id, so an id reused in a later turn does not
            rename an earlier result). A user's
            plain yes right after a confirmation question the library asked (an AI message
            whose ``response_metadata`` names the call,
            :func:`~taskcal_agents.parsing._questions.confirmation_message`) confirms
            exactly that call: the trust policy lets it through.
    """

    __slots__ = (
        "_calls", "_declared", "_evidence", "_made", "_messages", "_parts", "_subsets",
        "_tools", "_user_words", "approved", "confirmed", "request", "schemas",
    )  # fmt: skip

    def __init__(self, tools: Iterable[Any] = (), messages: Iterable[Any] = ()) -> None:
        tools = list(tools)
        self.schemas: dict[str, dict[str, Any]] = tool_schemas(tools)
        self._tools = tools
        self._declared: dict[str, ToolEffect | None] = {}
        messages = list(messages)
        self._messages = messages
        self._made: dict[tuple[int, str], tuple[str, frozenset[str]]] = {}
        self._user_words: frozenset[str] | None = None
        names: dict[str, str] = {}  # call id → tool name, of the calls made so far
        pairs = [_message_role_text(m) for m in messages]
        self.request: str = "\n".join(t for role, t in pairs if role in ("user", "human") and t)
        """The user's words: the text of the conversation's user turns."""
        parts: list[tuple[Source, str]] = []
        confirmed: list[str] = []
        asked: list[dict[str, Any]] | None = None  # the calls a confirmation put to the user
        self.approved: tuple[dict[str, Any], ...] | None = None
        """The calls the conversation's last message approves: a user's plain yes right
        after a confirmation question the library asked; ``None`` otherwise."""
        for i, (message, (role, text)) in enumerate(zip(messages, pairs, strict=True)):
            if role in ("ai", "assistant"):
                asked = confirmation_calls(message)
                names.update(call_names([message]))  # a reused id answers the latest call
                continue
            source = message_source(role, i, message, names) if text else None
            if source is None or role not in _CONTEXT_ROLES:
                continue
            if asked is not None and source.kind == "user" and is_affirmative(text):
                confirmed += [call_key(c["name"], c["args"]) for c in asked]  # exactly those
                if i == len(messages) - 1:
                    self.approved = tuple(asked)
            asked = None
            parts.append((source, text))
        self._parts: tuple[tuple[Source, str], ...] = tuple(parts)
        self.confirmed: frozenset[str] = frozenset(confirmed)
        """The keys (:func:`call_key`) of the calls the user confirmed with a plain yes."""
        self._evidence = _evidence(parts)
        self._subsets: dict[tuple[int, ...], Evidence] = {}
        self._calls: dict[tuple[str, int, str], tuple[TrustPolicy | None, CallGrounding]] = {}

    def declared_effect(self, name: str) -> ToolEffect | None:
        """The effect the offered tool ``name`` declares itself, else ``None``.

        MCP annotations, its ``metadata`` or ``tags``
        (:func:`~taskcal_agents.parsing._effects.declared_effect`); read only when asked, so a
        tool's declaration is checked only where a decision needs it.

        Raises:
            ConfigurationError: The tool declares a value that is not an effect.
        """
        if name not in self._declared:
            found = [t for t in self._tools if tool_name(t) == name]
            self._declared[name] = next(
                (e for e in (declared_effect(t) for t in found) if e is not None), None
            )
        return self._declared[name]

    @property
    def effects(self) -> dict[str, ToolEffect]:
        """The effect each offered tool declares itself, by name (see :meth:`declared_effect`)."""
        return {n: e for n in self.schemas if (e := self.declared_effect(n)) is not None}

    @property
    def sources(self) -> tuple[Source, ...]:
        """The source of each message that is evidence, in conversation order."""
        return tuple(source for source, _ in self._parts)

    # -------------------------------------------------------------- calls and samples

    def ground(
        self,
        message: AIMessage,
        trust: TrustPolicy | None = None,
        *,
        effect_of: Callable[[str], str] | None = None,
    ) -> SampleGrounding:
        """Ground every complete call ``message`` makes (none: an empty grounding).

        Args:
            message: A sampled completion.
            trust: A trust policy; each call then records its
                :attr:`~CallGrounding.violations` and its :attr:`~CallGrounding.warrant`.
            effect_of: A tool's effect by name, for the policy's warrant rule (``None``:
                what the tool declares, else ``"write"``).
        """
        calls = extract_tool_calls(message)
        if not calls:
            return SampleGrounding(())
        checked = tuple(self.ground_call(c, trust, effect_of=effect_of) for c in calls)
        parts = sorted(
            json.dumps([c.name, _normal_args(sent_args(c))], sort_keys=True, default=str)
            for c in checked
        )
        key = "[" + ",".join(parts) + "]"
        return SampleGrounding(checked, key)

    def ground_samples(
        self,
        messages: Sequence[AIMessage],
        trust: TrustPolicy | None = None,
        *,
        effect_of: Callable[[str], str] | None = None,
    ) -> list[SampleGrounding]:
        """:meth:`ground` for each sample."""
        return [self.ground(m, trust, effect_of=effect_of) for m in messages]

    def ground_call(
        self,
        call: ToolCall | Mapping[str, Any],
        trust: TrustPolicy | None = None,
        *,
        effect_of: Callable[[str], str] | None = None,
    ) -> CallGrounding:
        """Check one call: missing required arguments, each given one's support and sources.

        An identifier (:func:`~taskcal_agents.parsing._argument_kinds.is_identifier`) is
        supported only by a message that holds its whole value. Under ``trust``, every value
        the call sends must come from a source the policy trusts for it (a free-text value
        also for each URL, e-mail address or IBAN it carries); the others are its
        :attr:`~CallGrounding.violations`; a call of an effect the policy's
        :class:`~taskcal_agents.parsing.WarrantRule` names needs a ``user`` or ``chain``
        :attr:`~CallGrounding.warrant` (``effect_of``: the tool's effect; ``None``: what it
        declares, else ``"write"``). A call checked before in this context (N samples often
        make the same one) is not checked again.
        """
        name = str(call.get("name") or "")
        args = call.get("args") or {}
        if not isinstance(args, Mapping):
            args = {}
        effect = ""
        if trust is not None and trust.warrant.effects:
            declared = self.declared_effect(name) if name in self.schemas else None
            effect = (
                effect_of(name)
                if effect_of is not None
                else (declared.effect if declared is not None else "write")
            ) or "write"  # a tool whose effect nothing gives is a write
        memo = (json.dumps([name, args], sort_keys=True, default=str), id(trust), effect)
        seen = self._calls.get(memo)  # the entry holds ``trust``, so its id is not reused
        if seen is not None:
            return seen[1]
        checked = self._check_call(name, args, trust, effect)
        self._calls[memo] = (trust, checked)
        return checked

    def _check_call(
        self, name: str, args: Mapping[str, Any], trust: TrustPolicy | None, effect: str = ""
    ) -> CallGrounding:
        schema = self.schemas.get(name)
        props: Mapping[str, Any] = (schema or {}).get("properties") or {}
        required: list[str] = list((schema or {}).get("required") or [])
        checks = []
        marked: dict[str, Mapping[str, Any]] = {}
        missing = [r for r in required if r not in args]
        for arg, value in args.items():
            prop = props.get(arg)
            prop = prop if isinstance(prop, Mapping) else {}
            kind = argument_kind(str(arg), prop, value)
            prop = _marked(prop, kind, value)
            marked[arg] = prop
            prop = {**prop, NAME_MARK: str(arg)}  # what the rules read of the argument's name
            is_required = arg in required or bool((schema or {}).get("x-unknown-schema"))
            if is_empty(value):
                if is_required:
                    missing.append(arg)
                checks.append(ArgumentCheck(arg, value, "inferable", "empty", is_required, kind))
                continue
            status, how = check_value(self._evidence, value, prop, required=is_required)
            sources = self._sources_of(value, prop, is_required, status, how)
            checks.append(ArgumentCheck(arg, value, status, how, is_required, kind, sources))
        self._ends_from_durations(checks)
        order = {r: i for i, r in enumerate(required)}
        missing.sort(key=lambda r: order.get(r, len(order)))
        unsent = {c.name for c in checks if c.status == "unsupported" and not c.required}
        sent = {k: v for k, v in args.items() if k not in unsent}
        confirmed = call_key(name, sent) in self.confirmed
        violations = (
            ()
            if trust is None or not trust.restricts or confirmed
            else self._violations(name, checks, marked, trust)
        )
        warrant = None
        if trust is not None:
            warrant = (
                Warrant("user", "the user confirmed this call")
                if confirmed
                else self.warrant(name, checks)
            )
            if warrant.kind == "none" and trust.warrant.needs(name, effect):
                rule = f"warrant.{effect}"
                unwarranted = TrustViolation(
                    "", name, "tool", warrant.sources, ("user", "chain"), rule
                )
                violations = (*violations, unwarranted)
        return CallGrounding(
            name=name,
            args=dict(args),
            offered=schema is not None,
            missing=tuple(missing),
            arguments=tuple(checks),
            description=(schema or {}).get("x-tool-description"),
            numeric=tuple(
                a
                for a, p in props.items()
                if isinstance(p, Mapping) and p.get("type") in ("number", "integer")
            ),
            violations=violations,
            warrant=warrant,
        )

    def _ends_from_durations(self, checks: list[ArgumentCheck]) -> None:
        """Mark stated each unsupported end of a span its stated start and a duration give.

        An argument named as an end (``end_time``; :func:`span_start`) whose value is its
        start's (itself ``stated``) plus a length of time one message states on its own
        ("1 hour long", "for 90 minutes": :attr:`Evidence.durations`) is ``stated`` by
        ``"duration"``; its sources are the start's and the messages that state the length.
        """
        by_name = {c.name: c for c in checks}
        for i, check in enumerate(checks):
            if check.status != "unsupported":
                continue
            start = by_name.get(span_start(check.name, by_name) or "")
            if start is None or start.status != "stated":
                continue
            minutes = span_minutes(start.value, check.value)
            stating = tuple(
                s
                for j, (s, _) in enumerate(self._parts)
                if minutes is not None and minutes in self._evidence_of((j,)).durations
            )
            if stating:
                sources = tuple(dict.fromkeys(start.sources + stating))
                checks[i] = replace(check, status="stated", how="duration", sources=sources)

    def _duration_trusted(
        self,
        check: ArgumentCheck,
        checks: Sequence[ArgumentCheck],
        props: Mapping[str, Mapping[str, Any]],
        allowed: tuple[str, ...],
    ) -> bool:
        """Whether the sources ``allowed`` trusts alone state an end's start and duration."""
        by_name = {c.name: c for c in checks}
        start = by_name.get(span_start(check.name, by_name) or "")
        minutes = span_minutes(start.value, check.value) if start is not None else None
        if start is None or minutes is None:
            return False
        kept = tuple(i for i, (s, _) in enumerate(self._parts) if TrustPolicy.trusts(allowed, s))
        evidence = self._evidence_of(kept)
        stated = check_value(evidence, start.value, props[start.name], required=start.required)
        return stated[0] == "stated" and any(
            minutes in self._evidence_of((i,)).durations for i in kept
        )

    # -------------------------------------------------------------- warrants

    def warrant(self, name: str, arguments: Sequence[ArgumentCheck]) -> Warrant:
        """What asked for a call to ``name`` with these checked arguments.

        See :mod:`~taskcal_agents.parsing._warrant`: the current request's words, or a chain
        of warranted calls on the same object whose results it sends values from, or nothing
        (the tool results it follows are recorded).
        """
        schema = self.schemas.get(name) or {}
        cap = capability(name, str(schema.get("x-tool-description") or ""))
        results = {s: t for s, t in self._parts if s.kind == "tool"}
        users = [s.message for s, _ in self._parts if s.kind == "user" and s.message is not None]
        since = max(users) if users else None
        words = self._request_words()
        sent = [a for a in arguments if _is_sent(a)]
        from_tools = [a for a in sent if a.sources and all(s.kind == "tool" for s in a.sources)]
        stated = any(s.kind in ("user", "system") for a in sent for s in a.sources)
        if cap.reads and not from_tools and stated:
            # a read of the values the user gave: the step their request needs first
            return Warrant("user", "a read of the request's own values")
        if not cap.action_named(words):
            what = f"its action ({cap.action})" if cap.action else "its object"
            reason = f"the request does not name {what}"
            return Warrant("none", reason, prompted_by(cap, results, since))
        if cap.object_named(words) or not from_tools:
            named = "its action and object" if cap.object_named(words) else "its action"
            return Warrant("user", f"the request names {named}")
        feeding: list[Source] = []
        for argument in from_tools:
            # a value that picks what the call acts on (an ID, an address, an amount) must
            # come from a call on the same object; its text (a message body) from any
            targets = argument.kind != "other" or is_identifier(argument.kind, argument.value)
            objects = cap.objects if targets else frozenset()
            source = next((s for s in argument.sources if self._feeds(s, objects)), None)
            if source is None:
                reason = (
                    f"the request names its action, not its object, and no warranted call"
                    f"{' on the same object' if targets else ''} returned its {argument.name!r}"
                )
                return Warrant("none", reason, prompted_by(cap, results, since))
            if source not in feeding:
                feeding.append(source)
        reason = "its values come from warranted calls on the same object"
        return Warrant("chain", reason, tuple(feeding))

    def _request_words(self) -> frozenset[str]:
        """The current request's words: the user's turns since the previous exchange ended.

        An AI message with no tool call ends an exchange, except a question the user's next
        turn answers: the library's confirmation answered with a plain yes, or a reply that
        ends with "?" answered with words that name no action ("100 dollars", "the 13th").
        """
        if self._user_words is None:
            start, answer = -1, None  # answer: the user's next turn after message i
            for i in range(len(self._messages) - 1, -1, -1):  # the last exchange's end
                message = self._messages[i]
                role, text = _message_role_text(message)
                if role in ("user", "human"):
                    answer = text
                    continue
                if role not in ("ai", "assistant") or made_calls(message):
                    continue
                if confirmation_calls(message) is not None:
                    answered = answer is not None and is_affirmative(answer)
                else:
                    asked = text.rstrip().endswith("?")
                    answered = asked and answer is not None and not names_an_action(answer)
                if not answered:
                    start = i
                    break
            self._user_words = user_words(
                t for s, t in self._parts if s.kind == "user" and (s.message or 0) > start
            )
        return self._user_words

    def _feeds(self, source: Source, objects: frozenset[str]) -> bool:
        """Whether ``source`` is the result of a warranted call on one of ``objects``.

        The call is the one with the result's call id in the nearest AI message before it,
        judged on the conversation before that message; the calls made are judged once, in
        conversation order, and kept (``_made``, shared with the contexts of the earlier
        conversation). An unknown call (no id, none before it) feeds nothing.
        """
        if source.kind != "tool" or source.message is None or not source.call_id:
            return False
        for index in range(source.message - 1, -1, -1):
            ids = [c["id"] for c in made_calls(self._messages[index])]
            if source.call_id in ids:
                self._judge_calls(index)
                kind, made_on = self._made.get((index, source.call_id), ("none", frozenset()))
                return kind != "none" and (not objects or bool(objects & made_on))
        return False

    def _judge_calls(self, upto: int) -> None:
        """Judge the warrant of each call the conversation makes up to message ``upto``."""
        for index in range(upto + 1):
            calls = [c for c in made_calls(self._messages[index]) if c["id"]]
            if not calls or all((index, c["id"]) in self._made for c in calls):
                continue
            prefix = GroundingContext(self._tools, self._messages[:index])
            prefix._made = self._made  # earlier calls are judged already: no recursion
            for call in calls:
                checked = prefix.ground_call(call)
                schema = self.schemas.get(checked.name) or {}
                made_on = capability(checked.name, str(schema.get("x-tool-description") or ""))
                warrant = prefix.warrant(checked.name, checked.arguments)
                self._made[(index, call["id"])] = (warrant.kind, made_on.objects)

    # -------------------------------------------------------------- provenance and trust

    def _evidence_of(self, indices: tuple[int, ...]) -> Evidence:
        """The evidence of the messages ``indices`` (positions in :attr:`sources`) alone."""
        if len(indices) == len(self._parts):
            return self._evidence
        found = self._subsets.get(indices)
        if found is None:
            found = _evidence([self._parts[i] for i in indices])
            self._subsets[indices] = found
        return found

    def _sources_of(
        self, value: Any, prop: Mapping[str, Any], required: bool, status: str, how: str
    ) -> tuple[Source, ...]:
        if status == "unsupported":
            return ()
        if status == "inferable" and how != "relative_date":
            return (Source("inferred", rule=how),)
        each = range(len(self._parts))
        if status == "inferable":  # a relative day: the user's turns that name one
            time = clock_time(value)  # and the messages that state a date-time's time
            return tuple(
                replace(self._parts[i][0], rule=how)
                for i in each
                if self._evidence_of((i,)).relative
                or (time is not None and time in self._evidence_of((i,)).clock)
            )
        if len(self._parts) == 1:
            return (self._parts[0][0],)
        alone = tuple(
            self._parts[i][0]
            for i in each
            if check_value(self._evidence_of((i,)), value, prop, required=required)[0] == "stated"
        )
        if alone:
            return alone
        words = {t for t in answer_tokens(json.dumps(value, default=str)) if t not in STOPWORDS}
        return tuple(self._parts[i][0] for i in each if self._evidence_of((i,)).tokens & words)

    def _trusted(
        self, value: Any, prop: Mapping[str, Any], required: bool, allowed: tuple[str, ...]
    ) -> bool:
        """Whether the value is supported by the sources ``allowed`` trusts, on their own.

        A date inferable from a relative day is the user's, who names the day ("tomorrow"),
        even where ``allowed`` leaves out ``inferred``; only the user's turns name one (a tool
        result's "tomorrow" makes no date inferable), and a date-time's time of day must be
        stated by a source ``allowed`` trusts.
        """
        if check_value(self._evidence, value, prop, required=required)[0] == "unsupported":
            return "model" in allowed  # no message supports it: the model's own value
        kept = tuple(i for i, (s, _) in enumerate(self._parts) if TrustPolicy.trusts(allowed, s))
        status, how = check_value(self._evidence_of(kept), value, prop, required=required)
        if status == "stated":
            return True
        if status == "inferable" and how == "relative_date":
            return True  # a trusted message names the relative day
        return status == "inferable" and "inferred" in allowed

    def _violations(
        self,
        tool: str,
        checks: Sequence[ArgumentCheck],
        props: Mapping[str, Mapping[str, Any]],
        trust: TrustPolicy,
    ) -> tuple[TrustViolation, ...]:
        out: list[TrustViolation] = []
        for check in checks:
            if not _is_sent(check):
                continue  # nothing sent, or dropped before sending (grounded_message)
            explicit = f"{tool}.{check.name}" in trust.arguments
            if check.how == "duration":  # an end its start and a duration give
                allowed, rule = trust.allowed(tool, check.name, check.kind)
                if not self._duration_trusted(check, checks, props, allowed):
                    out.append(
                        TrustViolation(
                            check.name, check.value, check.kind, check.sources, allowed, rule
                        )
                    )
                continue
            for name, value, prop in _leaves(check.name, check.value, props[check.name]):
                kind = argument_kind(name, prop, value)
                if kind == "other":
                    kind = check.kind  # a field with no kind of its own takes its argument's
                allowed, rule = trust.allowed(tool, check.name if explicit else name, kind)
                prop = _marked(prop, kind, value)
                if not self._trusted(value, prop, check.required, allowed):
                    sources = self._sources_of(value, prop, check.required, *check_value(
                        self._evidence, value, prop, required=check.required))  # fmt: skip
                    out.append(TrustViolation(check.name, value, kind, sources, allowed, rule))
                    continue
                if not isinstance(value, str):
                    continue
                for inner_kind, ident in embedded_identifiers(value):
                    if ident.strip().lower() == value.strip().lower():
                        continue  # the value itself, checked above
                    inner, inner_rule = trust.allowed(tool, check.name, inner_kind)
                    holders = tuple(
                        s
                        for i, (s, _) in enumerate(self._parts)
                        if self._evidence_of((i,)).has_whole(ident)
                    )
                    if not any(TrustPolicy.trusts(inner, s) for s in holders):
                        out.append(
                            TrustViolation(
                                check.name, ident, inner_kind, holders, inner, inner_rule
                            )
                        )
        return tuple(out)


_WORD_KINDS = frozenset(("recipient", "address"))
"""The kinds whose words are checked word for word (:data:`WORDS_MARK`)."""


def _evidence(parts: Sequence[tuple[Source, str]]) -> Evidence:
    """The evidence of ``parts``: all their text; the user's turns' for a relative day."""
    return Evidence(
        "\n".join(t for _, t in parts), user="\n".join(t for s, t in parts if s.kind == "user")
    )


def _marked(prop: Mapping[str, Any], kind: str, value: Any) -> Mapping[str, Any]:
    """``prop`` marked for the rules by the value's kind.

    An identifier (:func:`is_identifier`) is checked by its whole value
    (:data:`IDENTIFIER_MARK`), a recipient's or an address's words word for word
    (:data:`WORDS_MARK`).
    """
    if is_identifier(kind, value):
        return {**prop, IDENTIFIER_MARK: True}
    if kind in _WORD_KINDS:
        return {**prop, WORDS_MARK: True}
    return prop


def _leaves(
    name: str, value: Any, prop: Mapping[str, Any]
) -> list[tuple[str, Any, Mapping[str, Any]]]:
    """The scalar values inside an argument's value, each with the name it goes by.

    An object's fields go by their own names (``payment.recipient`` by ``recipient``), a
    list's items by the list's name; empty members are left out.
    """
    if is_empty(value):
        return []
    if isinstance(value, Mapping):
        fields = prop.get("properties")
        fields = fields if isinstance(fields, Mapping) else {}
        out: list[tuple[str, Any, Mapping[str, Any]]] = []
        for key, item in value.items():
            sub = fields.get(key)
            out += _leaves(str(key), item, sub if isinstance(sub, Mapping) else {})
        return out
    if isinstance(value, list):
        items = prop.get("items")
        items = items if isinstance(items, Mapping) else {}
        return [leaf for item in value for leaf in _leaves(name, item, items)]
    marks = (IDENTIFIER_MARK, WORDS_MARK)
    return [(name, value, {k: v for k, v in prop.items() if k not in marks})]


def _is_sent(check: ArgumentCheck) -> bool:
    """Whether the call sends the argument: given, and not an unsupported optional one."""
    return check.how != "empty" and (check.status != "unsupported" or check.required)


def call_key(name: str, args: Mapping[str, Any]) -> str:
    """A call's identity for a confirmation: its tool and normalised arguments."""
    return json.dumps([name, _normal_args(args)], sort_keys=True, default=str)


def confirmation_calls(message: Any) -> list[dict[str, Any]] | None:
    """The calls a library-made confirmation question asks about, else ``None``.

    Each is ``{"name", "args"}``. Only the metadata the library sets marks one
    (:data:`CONFIRM_METADATA_KEY`); a model's or a tool's text that merely reads like the
    question does not.
    """
    metadata = (
        message.get("response_metadata")
        if isinstance(message, Mapping)
        else getattr(message, "response_metadata", None)
    )
    asked = metadata.get(CONFIRM_METADATA_KEY) if isinstance(metadata, Mapping) else None
    if not isinstance(asked, Mapping) or not isinstance(asked.get("args"), Mapping):
        return None
    calls = asked.get("calls")
    if not isinstance(calls, list) or not calls:
        calls = [asked]
    out = []
    for call in calls:
        if not isinstance(call, Mapping) or not isinstance(call.get("args"), Mapping):
            return None
        out.append({"name": str(call.get("name") or ""), "args": dict(call["args"])})
    return out


def _normal_args(args: Mapping[str, Any]) -> Any:
    def norm(v: Any) -> Any:
        if isinstance(v, str):
            return " ".join(v.lower().split())
        if isinstance(v, Mapping):
            return {str(k): norm(x) for k, x in v.items()}
        if isinstance(v, list):
            return [norm(x) for x in v]
        if isinstance(v, float) and v.is_integer():
            return int(v)
        return v

    return norm({k: v for k, v in args.items() if not is_empty(v)})
