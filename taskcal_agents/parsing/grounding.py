"""Argument grounding: is each sampled tool call supported by the conversation?

Small models call a tool on nearly every request and fill in the arguments they were not
given ("Find a good movie" → ``genre="Mystery"``). A call whose arguments the user never
stated is evidence that the right move is to ask, not to call. This module checks each
sampled call against the offered tool's JSON schema and the conversation, with no model
call:

- an argument the schema requires and the call leaves out (or leaves empty) is
  **missing**;
- a given argument is **stated** when the conversation (user and system messages, earlier
  tool results) contains its value: the normalised text, its content tokens (plural and
  prefix forms, "euros" for ``EUR``), a number or a date by value (the normalisation of
  :func:`~taskcal_agents.parsing.answer_clusters.answer_tokens`: "twenty five" is 25, "March 5th"
  is ``2024-03-05``'s day and month), an acronym of the words ("US dollars" for ``USD``)
  or a common alias ("NYC" for "New York");
- it is **inferable** when no statement is needed: a boolean, the schema's default, an
  optional argument's enum value, a date when the conversation names a relative day
  ("tomorrow", "next Friday");
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
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, ToolCall

from taskcal_agents.parsing.answer_clusters import answer_tokens
from taskcal_agents.parsing.grading import normalize_answer
from taskcal_agents.parsing.tool_calls import extract_tool_calls

__all__ = [
    "ArgumentCheck",
    "CallGrounding",
    "GroundingContext",
    "SampleGrounding",
    "call_agreement",
    "grounded_message",
    "mentions",
    "missing_arguments",
    "question_for",
    "sent_args",
    "tool_schemas",
]

ArgumentStatus = Literal["stated", "inferable", "unsupported"]
"""How the conversation supports one argument value."""

_CONTEXT_ROLES = frozenset({"user", "human", "system", "developer", "tool", "function"})
"""Message roles whose text is evidence: what the user and the deployment said, and what
tools returned (the model's own words are not)."""

# fmt: off
_STOPWORDS = frozenset((
    "a", "an", "the", "of", "in", "on", "at", "for", "to", "and", "or", "is", "are", "be",
    "me", "my", "i", "you", "your", "please", "with", "by", "from", "it", "this", "that",
    "some", "any", "all", "can", "could", "would", "will", "do", "does", "what", "which",
    "us", "our", "we",
))
_RELATIVE_DAYS = frozenset((
    "today", "tonight", "tomorrow", "yesterday", "now", "weekend", "week",
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "morning",
    "evening", "afternoon", "night", "noon", "midnight",
))
_MONTH_NAMES = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
)
# fmt: on

_ALIASES: dict[str, tuple[str, ...]] = {
    # places
    "nyc": ("new york",),
    "ny": ("new york",),
    "la": ("los angeles",),
    "sf": ("san francisco",),
    "dc": ("washington",),
    "uk": ("united kingdom", "britain", "england"),
    "usa": ("united states", "america"),
    "us": ("united states", "america"),
    "uae": ("emirates",),
    # currencies (ISO 4217 codes and the words and signs for them)
    "usd": ("dollar", "$"),
    "eur": ("euro", "€"),
    "gbp": ("pound", "sterling", "£"),
    "jpy": ("yen", "¥"),
    "cny": ("yuan", "renminbi"),
    "inr": ("rupee", "₹"),
    "chf": ("swiss franc",),
    "cad": ("canadian dollar",),
    "aud": ("australian dollar",),
}
"""Common abbreviations and codes, each with words that state it (either direction)."""

_LANGUAGE_CODES: dict[str, tuple[str, ...]] = {
    "en": ("english",),
    "it": ("italian",),
    "de": ("german", "deutsch"),
    "fr": ("french", "français"),
    "es": ("spanish", "español"),
    "pt": ("portuguese",),
    "nl": ("dutch",),
    "ru": ("russian",),
    "zh": ("chinese", "mandarin"),
    "ja": ("japanese",),
    "ko": ("korean",),
    "ar": ("arabic",),
    "hi": ("hindi",),
    "sv": ("swedish",),
    "pl": ("polish",),
    "tr": ("turkish",),
}
"""ISO 639-1 codes, each stated by the language's name; one direction only: a code in the
text ("de", "it", "hi") is too often a word to state a language named in a call."""

_ISO_DATE = re.compile(r"^\s*(\d{4})-(\d{1,2})-(\d{1,2})(?:[T ][\d:.]+Z?)?\s*$")
_NUMERIC_DATE = re.compile(r"^\s*(\d{1,2})[/.](\d{1,2})(?:[/.](\d{2,4}))?\s*$")
_CLOCK = re.compile(r"^\s*(\d{1,2}):(\d{2})(?::\d{2})?\s*(am|pm)?\s*$", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z][A-Za-z'’.-]*|\d+")


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
            ``"relative_date"``, ``"empty"`` or ``"absent"``.
        required: Whether the schema requires the argument.
    """

    name: str
    value: Any
    status: ArgumentStatus
    how: str
    required: bool = False


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
    """

    name: str
    args: Mapping[str, Any]
    offered: bool
    missing: tuple[str, ...]
    arguments: tuple[ArgumentCheck, ...]
    description: str | None = None
    numeric: tuple[str, ...] = ()

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
            (:func:`~taskcal_agents.parsing.tool_calls.extract_tool_calls`; empty for a sample that
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
            :func:`~taskcal_agents.parsing.tool_calls.with_tool_calls`), in the order
            :func:`~taskcal_agents.parsing.tool_calls.extract_tool_calls` found them.
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


def _phrase_of(name: str) -> str:
    words = re.sub(r"([a-z])([A-Z])", r"\1 \2", name).replace("_", " ").replace("-", " ")
    return " ".join(words.lower().split()) or name


_VERB_ENDINGS = (("ies", "y"), ("ches", "ch"), ("shes", "sh"), ("sses", "ss"), ("s", ""))


_ASIDE = re.compile(
    r"\s*\((?:[^()]|\([^()]*\))*\)"  # a parenthesis, one level nested
    r"|,?\s+(?:e\.g|i\.e)\.?,?\s(?:(?!\.(?:\s|$))[^,;])*",  # ", e.g. 1.5 for EUR", up to , ; or .
    re.IGNORECASE,
)
"""A parenthesis or an aside ("e.g. Paris", "i.e. the expected weather") in a tool's
description, which the built question leaves out."""


def _purpose(description: str | None) -> str | None:
    """The tool's description as a purpose clause: "Gets the weather." → "get the weather"."""
    if not description:
        return None
    text = _ASIDE.sub("", description).strip()  # "(ISO codes, e.g. EUR)", ", e.g. Paris"
    first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0].rstrip(" .!?,;:")
    words = first.split()
    if not words or len(words) > 14 or not words[0].isalpha():
        return None
    verb = words[0].lower()
    for ending, base in _VERB_ENDINGS:
        if verb.endswith(ending) and len(verb) > len(ending) + 2 and not verb.endswith("ss"):
            verb = verb[: -len(ending)] + base
            break
    return " ".join([verb, *words[1:]])


def question_for(
    arguments: Sequence[str], description: str | None = None, numeric: Collection[str] = ()
) -> str | None:
    """A question that asks the user for exactly ``arguments``.

    Built from the tool's schema, with no model call: its description gives the purpose,
    the parameter names the words ("To get the current weather for a city, I need the
    city. Which city should I use?"); a number is asked for with "how many" when its name
    is plural ("How many minutes?"), else with "what".

    Args:
        arguments: The arguments to ask for (:func:`missing_arguments`).
        description: The tool's description (:attr:`CallGrounding.description`).
        numeric: The tool's numeric parameters (:attr:`CallGrounding.numeric`).

    Returns:
        The question, or ``None`` without arguments.
    """
    if not arguments:
        return None
    names = [_phrase_of(a) for a in arguments]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    purpose = _purpose(description)
    lead = f"To {purpose}, I need the {listed}." if purpose else f"I need the {listed}."
    if len(names) > 1:
        return f"{lead} Could you tell me the {listed}?"
    if arguments[0] in numeric:
        name = names[0]
        counted = name.split()[0] in ("number", "num", "count", "amount")
        plural = name.endswith("s") and not name.endswith(("ss", "us", "is")) and not counted
        ask = f"How many {name}?" if plural else f"What {name} should I use?"
        return f"{lead} {ask}"
    return f"{lead} Which {names[0]} should I use?"


def mentions(text: str, argument: str) -> bool:
    """Whether ``text`` names ``argument``: a word of its name, plural forms included.

    ``visit_date`` is named by "visit", "date" or "dates".
    """
    words = {_stem(w) for w in _phrase_of(argument).split() if w not in _STOPWORDS}
    found = {_stem(t) for t in answer_tokens(text)}
    return bool(words & found)


# ------------------------------------------------------------------------ tool schemas


def _openai_function(tool: Any) -> dict[str, Any] | None:
    """The ``function`` block of an offered tool, or ``None`` for a tool without one."""
    if isinstance(tool, str):  # a name only: no schema, no argument known to be required
        return {"name": tool}
    if isinstance(tool, Mapping):
        if isinstance(tool.get("function"), Mapping):
            return dict(tool["function"])
        if isinstance(tool.get("name"), str) and "input_schema" not in tool:
            return dict(tool)  # a bare function block (BFCL style)
        if isinstance(tool.get("name"), str):  # Anthropic style: {"name", "input_schema"}
            from langchain_core.utils.function_calling import convert_to_openai_tool

            return dict(convert_to_openai_tool(dict(tool))["function"])
        return None  # a provider's built-in tool ({"type": "web_search"})
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return dict(convert_to_openai_tool(tool)["function"])


def tool_schemas(tools: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Map each offered tool's name to its parameters schema (JSON Schema, an object).

    Args:
        tools: OpenAI tool schemas, bare function blocks (BFCL's ``"type": "dict"`` is read
            as ``"object"``), LangChain tools or functions, or tool names (no schema: no
            argument is known to be required, each given one is checked against the
            conversation).

    Returns:
        ``{name: {"properties": {...}, "required": [...], ...}}``; a tool without
        parameters has empty ``properties``.
    """
    out: dict[str, dict[str, Any]] = {}
    for tool in tools:
        function = _openai_function(tool)
        if function is None or not isinstance(function.get("name"), str):
            continue
        params = function.get("parameters")
        unknown = not isinstance(params, Mapping)
        params = dict(params) if isinstance(params, Mapping) else {}
        if unknown:  # a name only: every given argument counts as required
            params["x-unknown-schema"] = True
        props = params.get("properties")
        params["properties"] = dict(props) if isinstance(props, Mapping) else {}
        required = params.get("required")
        params["required"] = (
            [r for r in required if isinstance(r, str)] if isinstance(required, list) else []
        )
        if isinstance(function.get("description"), str):
            params.setdefault("x-tool-description", function["description"])
        out[function["name"]] = params
    return out


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


def _stem(token: str) -> str:
    """A plural's singular, roughly: "cities" → "city", "boxes" → "box", "dates" → "date"."""
    if len(token) > 4 and token.endswith("ies"):
        return token[:-3] + "y"
    if len(token) > 4 and token.endswith(("ses", "xes", "zes", "ches", "shes")):
        return token[:-2]
    if len(token) > 3 and token.endswith("s") and not token.endswith(("ss", "us", "is")):
        return token[:-1]
    return token


class GroundingContext:
    """The offered tools' schemas and the conversation that one decision grounds in.

    Args:
        tools: The tools offered to the request (see :func:`tool_schemas`).
        messages: The request's conversation, as LangChain messages or OpenAI-style
            dicts, *without* the task's own prompt: the text of user, system and tool
            messages is evidence; the model's own messages are not.
    """

    __slots__ = (
        "_clock",
        "_initials",
        "_lower",
        "_norm",
        "_relative",
        "_stems",
        "_tokens",
        "request",
        "schemas",
    )

    def __init__(self, tools: Iterable[Any] = (), messages: Iterable[Any] = ()) -> None:
        self.schemas: dict[str, dict[str, Any]] = tool_schemas(tools)
        pairs = [_message_role_text(m) for m in messages]
        self.request: str = "\n".join(t for role, t in pairs if role in ("user", "human") and t)
        """The user's words: the text of the conversation's user turns."""
        texts = [text for role, text in pairs if role in _CONTEXT_ROLES]
        text = "\n".join(t for t in texts if t)
        self._lower = text.lower()
        tokens = answer_tokens(text)
        self._norm = " " + " ".join(tokens) + " "
        self._tokens = frozenset(tokens)
        self._stems = frozenset(_stem(t) for t in tokens)
        self._relative = bool(self._tokens & _RELATIVE_DAYS)
        self._initials = _WORD.findall(text)
        self._clock = _clock_times(self._lower)

    @property
    def text_tokens(self) -> frozenset[str]:
        """The conversation's canonical tokens (:func:`answer_tokens`)."""
        return self._tokens

    # -------------------------------------------------------------- calls and samples

    def ground(self, message: AIMessage) -> SampleGrounding:
        """Ground every complete call ``message`` makes (none: an empty grounding)."""
        calls = extract_tool_calls(message)
        if not calls:
            return SampleGrounding(())
        checked = tuple(self.ground_call(c) for c in calls)
        parts = sorted(
            json.dumps([c.name, _normal_args(sent_args(c))], sort_keys=True, default=str)
            for c in checked
        )
        key = "[" + ",".join(parts) + "]"
        return SampleGrounding(checked, key)

    def ground_samples(self, messages: Sequence[AIMessage]) -> list[SampleGrounding]:
        """:meth:`ground` for each sample."""
        return [self.ground(m) for m in messages]

    def ground_call(self, call: ToolCall | Mapping[str, Any]) -> CallGrounding:
        """Check one call: missing required arguments and the support of each given one."""
        name = str(call.get("name") or "")
        args = call.get("args") or {}
        if not isinstance(args, Mapping):
            args = {}
        schema = self.schemas.get(name)
        props: Mapping[str, Any] = (schema or {}).get("properties") or {}
        required: list[str] = list((schema or {}).get("required") or [])
        checks = []
        missing = [r for r in required if r not in args]
        for arg, value in args.items():
            prop = props.get(arg)
            prop = prop if isinstance(prop, Mapping) else {}
            is_required = arg in required or bool((schema or {}).get("x-unknown-schema"))
            if _empty(value):
                if is_required:
                    missing.append(arg)
                checks.append(ArgumentCheck(arg, value, "inferable", "empty", is_required))
                continue
            status, how = self._check(value, prop, required=is_required)
            checks.append(ArgumentCheck(arg, value, status, how, is_required))
        order = {r: i for i, r in enumerate(required)}
        missing.sort(key=lambda r: order.get(r, len(order)))
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
        )

    # ------------------------------------------------------------------------ values

    def _check(
        self, value: Any, prop: Mapping[str, Any], *, required: bool
    ) -> tuple[ArgumentStatus, str]:
        if isinstance(value, bool) or (
            prop.get("type") == "boolean" and str(value).strip().lower() in ("true", "false")
        ):
            return "inferable", "boolean"
        if "default" in prop and _same(value, prop["default"]):
            return "inferable", "default"
        if isinstance(value, str) and _sentinel(value, prop):
            return "inferable", "default"
        enum = prop.get("enum")
        if isinstance(enum, list) and not required and any(_same(value, e) for e in enum):
            return "inferable", "enum"
        if isinstance(value, list):
            items = prop.get("items")
            items = items if isinstance(items, Mapping) else {}
            results = [self._check(v, items, required=required) for v in value if not _empty(v)]
            return _worst(results) if results else ("inferable", "empty")
        if isinstance(value, Mapping):
            sub = prop.get("properties")
            sub = sub if isinstance(sub, Mapping) else {}
            inner = prop.get("required")
            inner = set(inner) if isinstance(inner, list) else set()
            if required and any(_empty(value.get(k)) for k in inner):
                return "unsupported", "empty"  # a required field of a required object
            results = [
                self._check(v, _mapping(sub.get(k)), required=required and k in inner)
                for k, v in value.items()
                if not _empty(v)
            ]
            return _worst(results) if results else ("inferable", "empty")
        if isinstance(value, int | float):
            return self._number(value)
        return self._string(str(value))

    def _number(self, value: float) -> tuple[ArgumentStatus, str]:
        text = str(int(value)) if float(value).is_integer() else repr(float(value))
        tokens = answer_tokens(text)
        if tokens and self._has_run(tokens):
            return "stated", "number"
        return "unsupported", "absent"

    def _has_run(self, tokens: Sequence[str]) -> bool:
        return f" {' '.join(tokens)} " in self._norm

    def _token_ok(self, token: str) -> bool:
        if token in self._tokens or _stem(token) in self._stems:
            return True
        if len(token) >= 3 and any(t.startswith(token) for t in self._tokens if len(t) > 3):
            return True  # "eur" of "euros", "cal" of "california"
        if token in _ALIASES:
            return any(self._phrase(p) for p in _ALIASES[token])
        return False

    def _phrase(self, phrase: str) -> bool:
        if not phrase.isalnum() and len(phrase) == 1:
            return phrase in self._lower
        tokens = answer_tokens(phrase)
        return bool(tokens) and all(t in self._tokens or _stem(t) in self._stems for t in tokens)

    def _string(self, value: str) -> tuple[ArgumentStatus, str]:
        date = self._date(value)
        if date is not None:
            return date
        tokens = answer_tokens(value)
        if not tokens:
            if value.strip() and value.strip().lower() in self._lower:
                return "stated", "text"
            return "unsupported", "absent"
        if self._has_run(tokens):
            return "stated", "text"
        alias = self._alias(value)
        if alias:
            return "stated", "alias"
        if self._acronym(value):
            return "stated", "acronym"
        parts = [p for p in re.split(r"\s*[,;]\s*", value) if p.strip()]
        if len(parts) > 1:
            # "Paris, France", "Orlando, FL": the head must be stated; a short qualifier
            # that follows may be the model's knowledge of where the head is.
            head = self._string(parts[0])
            if head[0] == "stated" and all(
                self._string(p)[0] == "stated" or _qualifier(p) for p in parts[1:]
            ):
                return "stated", head[1]
        content = [t for t in tokens if t not in _STOPWORDS] or tokens
        hits = sum(self._token_ok(t) for t in content)
        if hits == len(content):
            return "stated", "tokens"
        if len(content) >= 4 and hits >= 0.75 * len(content):
            return "stated", "tokens"  # a long query the model rephrased
        return "unsupported", "absent"

    def _alias(self, value: str) -> bool:
        key = normalize_answer(value).replace(" ", "")
        words = _ALIASES.get(key, ()) + _LANGUAGE_CODES.get(key, ())
        if any(self._phrase(p) for p in words):
            return True
        norm = normalize_answer(value)
        return any(norm in phrases and short in self._tokens for short, phrases in _ALIASES.items())

    def _acronym(self, value: str) -> bool:
        """``value`` (2-5 capitals) spells the initials of consecutive words of the text.

        A word of at most three letters may give all its letters ("US dollars" for USD).
        """
        letters = value.strip()
        if not (2 <= len(letters) <= 5 and letters.isalpha() and letters.isupper()):
            return False
        target = letters.lower()
        words = [w.lower().strip(".'’-") for w in self._initials]
        return any(_spells(target, words, start) for start in range(len(words)))

    def _date(self, value: str) -> tuple[ArgumentStatus, str] | None:
        """A date or clock value: stated by value, or inferable from a relative day."""
        iso = _ISO_DATE.match(value)
        numeric = _NUMERIC_DATE.match(value) if iso is None else None
        clock = _CLOCK.match(value) if iso is None and numeric is None else None
        if iso is None and numeric is None and clock is None:
            return None
        if iso is not None:
            if self._has_run([str(int(g)) for g in iso.groups()]) or self._has_run(
                answer_tokens(value)
            ):
                return "stated", "date"  # "2025-06-14" written as it stands
            _, month, day = (int(g) for g in iso.groups())
            if not (1 <= month <= 12 and 1 <= day <= 31):
                return None
            wanted = [[str(day), _MONTH_NAMES[month - 1]], [str(day), str(month)]]
            if any(self._has_run(w) for w in wanted) or self._has_run([str(month), str(day)]):
                return "stated", "date"
        elif numeric is not None:
            first, second = int(numeric.group(1)), int(numeric.group(2))
            pairs = ((first, second), (second, first))
            if not any(1 <= m <= 12 and 1 <= d <= 31 for d, m in pairs):
                return None  # "12.50" is no date
            if self._has_run(answer_tokens(value)):
                return "stated", "date"  # "5/3/2024" written as it stands
            # 04/23/2023 (month first) or 23/04/2023 (day first), against "April 23"
            for day, month in ((second, first), (first, second)):
                valid = 1 <= month <= 12 and 1 <= day <= 31
                if valid and self._has_run([str(day), _MONTH_NAMES[month - 1]]):
                    return "stated", "date"
        elif clock is not None:
            # A time of day is stated or invented: "tonight" names no hour.
            hour, minute, half = clock.groups()
            hours = {_hour24(int(hour), half)}
            if half is None and 1 <= int(hour) <= 11:
                hours.add(int(hour) + 12)  # "19:30" may be written "7:30"
            if any((h, int(minute)) in self._clock for h in hours):
                return "stated", "date"
            return "unsupported", "absent"
        if self._relative:
            return "inferable", "relative_date"
        return "unsupported", "absent"


_TIME_OF_DAY = re.compile(
    r"\b(\d{1,2})(?:[:.](\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)|\b(\d{1,2}):(\d{2})\b"
)


def _hour24(hour: int, half: str | None) -> int:
    if half is None:
        return hour
    pm = half.startswith("p")
    return (hour % 12) + (12 if pm else 0)


def _clock_times(lower: str) -> frozenset[tuple[int, int]]:
    """The times of day the text states, as (hour 0-23, minute): "7pm", "19:30", "7.30 am"."""
    out = set()
    for m in _TIME_OF_DAY.finditer(lower):
        if m.group(3):
            out.add((_hour24(int(m.group(1)), m.group(3)), int(m.group(2) or 0)))
        else:
            hour, minute = int(m.group(4)), int(m.group(5))
            out.add((hour, minute))
            if 1 <= hour <= 11:
                out.add((hour + 12, minute))
    return frozenset(out)


def _spells(target: str, words: Sequence[str], start: int) -> bool:
    pos, i = 0, start
    while pos < len(target):
        if i >= len(words) or not words[i]:
            return False
        word = words[i]
        if len(word) <= 3 and target.startswith(word, pos) and pos + len(word) <= len(target):
            pos += len(word)
        elif word[0] == target[pos]:
            pos += 1
        else:
            return False
        i += 1
    return i - start >= 2 or (len(words[start]) <= 3 and words[start] == target)


def _qualifier(part: str) -> bool:
    """A short place qualifier: "FL", "France", "United States"."""
    words = part.split()
    return 1 <= len(words) <= 3 and all(w[:1].isupper() for w in words)


_SENTINELS = frozenset(("any", "dontcare", "don't care", "all", "none", "n/a"))


def _sentinel(value: str, prop: Mapping[str, Any]) -> bool:
    """A "no preference" value the schema offers ("Use 'dontcare' if you have none")."""
    text = value.strip().lower()
    if text not in _SENTINELS:
        return False
    description = str(prop.get("description") or "").lower()
    return (
        f"'{text}'" in description
        or f'"{text}"' in description
        or text in [str(e).lower() for e in prop.get("enum") or []]
    )


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _empty(value: Any) -> bool:
    """None, "" or a list or object with nothing but empty members."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return True
    if isinstance(value, list):
        return all(_empty(v) for v in value)
    if isinstance(value, dict):
        return all(_empty(v) for v in value.values())
    return False


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().lower() == b.strip().lower()
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


_RANK: dict[str, int] = {"stated": 0, "inferable": 1, "unsupported": 2}


def _worst(results: Sequence[tuple[ArgumentStatus, str]]) -> tuple[ArgumentStatus, str]:
    return max(results, key=lambda r: _RANK[r[0]])


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

    return norm({k: v for k, v in args.items() if not _empty(v)})
