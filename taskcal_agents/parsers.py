"""Parsers g_T: map one sampled completion (an ``AIMessage``) to a task label.

A parser returns a label, or ``None`` when the completion does not express any of the
task's labels. ``None`` is never dropped silently: :class:`~taskcal_agents.belief.Belief`
counts it in ``n_unparsed`` and the task's ``unparsed`` policy decides what happens to it.

Built-in parsers (``get_parser(name, **options)``):

``"tool_decision"``
    ``tool_call`` | ``request_for_info`` | ``cannot_answer`` (| ``direct_answer``).
``"answer_or_abstain"``
    ``answer`` | ``abstain``.
``"rating"``
    ``"1"`` … ``"k"``.
``"choice"``
    one of the option labels (``"A"``, ``"B"``, …), by letter or by option text.
``"schema"``
    the value of one field of a JSON object / structured output / tool-call arguments.

A custom parser is named in a task file only after the user's code registered it with
:func:`register_parser`; a task file or artefact never makes this module import anything (a
name such as ``"os:system"`` is refused, not imported). The heuristics are deliberately
simple, ordered and documented below: small models (SmolLM2-135M) produce messy text, and
the calibrator learns how the parser's systematic errors relate to the true label. Every
parser is a frozen dataclass whose ``__call__`` does only string work (no validation) so
that parsing N = 16 samples costs microseconds.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import importlib
import json
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol, runtime_checkable

from langchain_core.messages import AIMessage, InvalidToolCall, ToolCall

from taskcal_agents._validation import check_int
from taskcal_agents.errors import ConfigurationError

__all__ = [
    "UNPARSED_REASONS",
    "AnswerOrAbstainParser",
    "ChoiceParser",
    "ContentToolCalls",
    "Parser",
    "RatingParser",
    "SchemaParser",
    "ToolDecisionParser",
    "builtin_parser_names",
    "canonical_tool_calls",
    "extract_tool_calls",
    "get_parser",
    "has_written_call",
    "message_text",
    "normalize_text",
    "parse_tool_calls",
    "register_parser",
    "registered_parser_names",
    "tool_names_of",
    "unparsed_reason",
    "with_offered_tools",
    "with_tool_calls",
]


@runtime_checkable
class Parser(Protocol):
    """The parser protocol g_T: one completion → one label or ``None``."""

    @property
    def labels(self) -> tuple[str, ...] | None:
        """The labels the parser can return, or ``None`` when it cannot say in advance.

        With ``None`` the task filters out-of-set values as unparsed. Read-only, so a frozen
        dataclass's field or a plain attribute satisfies it.
        """
        ...

    def __call__(self, message: AIMessage) -> str | None:
        """Return the label that ``message`` expresses, or ``None``."""
        ...


# --------------------------------------------------------------------------- text helpers


def message_text(message: AIMessage) -> str:
    """Return the text of ``message`` (string content or its text blocks), stripped."""
    content = message.content
    if isinstance(content, str):
        return content.strip()
    return str(message.text).strip()


_WS = re.compile(r"\s+")
_EDGE_PUNCT = " \t\n\r.,;:!?\"'`*_-"


def normalize_text(text: str) -> str:
    """Lower-case, collapse whitespace and trim edge punctuation (for grouping samples)."""
    return _WS.sub(" ", text.lower()).strip(_EDGE_PUNCT)


# ----------------------------------------------------------------------- tool-call helpers

_TOOL_CALL_TAG = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL | re.IGNORECASE)
_ARG_KEYS = ("arguments", "parameters", "args", "params")
_CALL_EXTRA_KEYS = frozenset({"id", "type"})
_DECODER = json.JSONDecoder()


_BROKEN_CALL = re.compile(r'\{\s*"(?:name|function)"\s*:')
"""The start of a tool-call object: when its JSON does not decode, everything after it
belongs to the broken call (an object nested in its arguments is no call of its own)."""

_CALL_HEAD = re.compile(
    r'\{\s*(?:"function"\s*:\s*\{\s*)?"name"\s*:\s*"([^"\\\n]{1,200})"'
    r'(\s*,\s*"(?:arguments|parameters|args|params)"\s*:'
    r'(?!\s*\{\s*"(?:type|properties|required)"\s*:)|\s*,?\s*"?\s*$)?',
    re.IGNORECASE,
)
"""The start of a call object ``{"name": "x"`` (optionally inside ``{"function": …}``):
group 1 the name, group 2 an argument key after it (not followed by a JSON-schema object:
that is a tool's definition echoed) or the end of the text right after the name."""

_BETWEEN_CALLS = re.compile(r"(?:\s|[,;]|```[A-Za-z_]*|</tool_call>|</tools>)*")
"""What may follow a call written without tags: whitespace, separators, code fences and a
stray closing tag (``</tool_call>``, or ``</tools>`` when a model wraps its call in the
tag its prompt lists the tools in); anything else means the JSON is quoted in prose."""
_FENCE_OPEN = re.compile(r"```[A-Za-z_]*[ \t]*\n\s*\Z")
"""A code fence that opens right before a call."""
_FENCE_CLOSE = re.compile(r"\s*```")
"""The fence that closes right after a fenced call (prose may follow a closed fence)."""
_BEFORE_CALL = re.compile(r"(?:<tools>\s*)?(?:```[A-Za-z_]*\s*)?\[?\s*$")
"""An opening code fence and list bracket right before the first call (not content)."""


def has_written_call(text: str) -> bool:
    """Whether *text* writes a tool call out, whole or cut off, amid other text.

    A call object (``{"name": "x", "arguments": …``, or inside ``{"function": …}``) or a
    ``<tool_call>`` tag: text that is no message for a user even where
    :func:`parse_tool_calls` finds no call in it (a call followed by prose, a special
    token written as text). JSON data that only has a ``"name"`` key (``{"name":
    "Alice", "email": …}``) is no call.
    """
    if "<tool_call>" in text.lower():
        return True
    return any(m.group(2) and m.group(2).strip(' ,"') for m in _CALL_HEAD.finditer(text))


class ContentToolCalls(NamedTuple):
    """The tool calls written in a completion's text (see :func:`parse_tool_calls`)."""

    content: str
    """The text before the first call (the whole text when there is no call)."""
    tool_calls: list[ToolCall]
    """The complete calls, each with a deterministic id."""
    invalid_tool_calls: list[InvalidToolCall]
    """Calls that were started but cannot be executed (JSON cut off by ``max_tokens`` or
    malformed, arguments that are no object), each with the ``error``."""


def _decoded_args(value: Any) -> dict[str, Any] | None:
    """The arguments as an object: a JSON object or a string holding one, else ``None``."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def _is_schema(args: Mapping[str, Any]) -> bool:
    return args.get("type") == "object" and ("properties" in args or "required" in args)


def _call_of(obj: Any, *, tagged: bool) -> ToolCall | InvalidToolCall | None:
    """The call that the decoded JSON ``obj`` writes, or ``None`` when it is no call.

    Inside ``<tool_call>`` tags (``tagged``) any object with a non-empty string ``"name"``
    is a call (as vLLM's hermes parser reads it); arguments that are no object make it
    invalid. Without tags the object must be exactly a call: the name, one argument key
    (``"arguments"``, ``"parameters"``, ``"args"`` or ``"params"``) and at most ``"id"`` /
    ``"type"``, with arguments that are an object (or a string holding one) and no JSON
    schema (an echoed tool definition); anything else is ordinary JSON.
    """
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("function"), dict):  # OpenAI wire format
        if not tagged and not set(obj) <= {"function", *_CALL_EXTRA_KEYS}:
            return None
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return None
    keys = [key for key in _ARG_KEYS if key in obj]
    if not tagged and (len(keys) != 1 or not set(obj) <= {"name", keys[0], *_CALL_EXTRA_KEYS}):
        return None
    raw = obj[keys[0]] if keys else {}
    args = _decoded_args(raw)
    if args is not None and (tagged or not _is_schema(args)):
        return ToolCall(name=name.strip(), args=args, id=None, type="tool_call")
    if not tagged:
        return None
    error = f"Function arguments must be a JSON object, got {raw!r}."
    return InvalidToolCall(
        name=name.strip(), args=json.dumps(raw), id=None, error=error, type="invalid_tool_call"
    )


def _calls_of(value: Any, *, tagged: bool) -> list[ToolCall | InvalidToolCall]:
    """The calls in a decoded JSON value: a call, a list of calls or ``{"tool_calls": [...]}``.

    Empty when any item is no call.
    """
    if isinstance(value, dict) and isinstance(value.get("tool_calls"), list):
        value = value["tool_calls"]
    items = value if isinstance(value, list) else [value]
    calls = [_call_of(item, tagged=tagged) for item in items]
    if not calls or any(call is None for call in calls):
        return []
    return [call for call in calls if call is not None]


def _broken_call(text: str, pos: int, exc: ValueError, *, at_tag: bool) -> InvalidToolCall | None:
    """The call that starts at ``pos`` and does not decode, if it is recognisably one.

    It is when its name is followed by an argument key, or the text ends right after the
    name, or (``at_tag``) it opens a ``<tool_call>`` tag.
    """
    head = _CALL_HEAD.match(text, pos)
    if head is None or (head.group(2) is None and not at_tag):
        return None
    error = f"Tool call is not complete JSON ({exc}): cut off by max_tokens, or malformed."
    return InvalidToolCall(
        name=head.group(1).strip(), args=text[pos:].strip(), id=None, error=error,
        type="invalid_tool_call",
    )  # fmt: skip


def _next_value(text: str, pos: int) -> int:
    """The position of the next ``{`` or ``[`` from ``pos`` (-1: none)."""
    starts = [i for i in (text.find("{", pos), text.find("[", pos)) if i >= 0]
    return min(starts) if starts else -1


def _iter_json_values(text: str) -> Iterator[Any]:
    """Yield every JSON object/array that starts at a ``{`` or ``[`` in ``text``."""
    pos = 0
    while (start := _next_value(text, pos)) >= 0:
        try:
            value, pos = _DECODER.raw_decode(text, start)
        except ValueError:
            pos = start + 1
            continue
        yield value


def _tag_calls(body: str) -> list[ToolCall | InvalidToolCall]:
    """The calls inside one ``<tool_call>`` tag (other JSON in it is ignored)."""
    found: list[ToolCall | InvalidToolCall] = []
    pos = 0
    while (start := _next_value(body, pos)) >= 0:
        try:
            value, pos = _DECODER.raw_decode(body, start)
        except ValueError as exc:
            at_tag = body[:start].strip() in ("", "[")
            broken = _broken_call(body, start, exc, at_tag=at_tag)
            if broken is not None:
                found.append(broken)
                return found
            if _BROKEN_CALL.match(body, start):
                return found
            pos = start + 1
            continue
        found.extend(_calls_of(value, tagged=True))
    return found


def _run_of_calls(text: str, pos: int) -> list[ToolCall | InvalidToolCall] | None:
    """The calls that follow a call ending at ``pos``, or ``None`` if prose follows it."""
    found: list[ToolCall | InvalidToolCall] = []
    while True:
        pos = _BETWEEN_CALLS.match(text, pos).end()  # type: ignore[union-attr]
        if pos >= len(text):
            return found
        try:
            value, pos = _DECODER.raw_decode(text, pos)
        except ValueError as exc:
            broken = _broken_call(text, pos, exc, at_tag=False)
            return None if broken is None else [*found, broken]
        calls = _calls_of(value, tagged=False)
        if not calls:
            return None
        found.extend(calls)


def _untagged_calls(text: str) -> tuple[int, list[ToolCall | InvalidToolCall]] | None:
    """Where the run of calls that ends ``text`` starts, and its calls (no tags)."""
    pos = 0
    while (start := _next_value(text, pos)) >= 0:
        try:
            value, pos = _DECODER.raw_decode(text, start)
        except ValueError as exc:
            broken = _broken_call(text, start, exc, at_tag=False)
            if broken is not None:
                return start, [broken]
            if _BROKEN_CALL.match(text, start):
                return None
            pos = start + 1
            continue
        calls = _calls_of(value, tagged=False)
        rest = _run_of_calls(text, pos) if calls else None
        if rest is None and calls and _fenced(text, start, pos):
            rest = []  # a call alone in a closed code fence is made, whatever prose follows
        if rest is not None:
            return start, calls + rest
    return None


def _fenced(text: str, start: int, end: int) -> bool:
    """Whether the JSON at ``text[start:end]`` is alone in a code fence that closes after it."""
    return (
        _FENCE_OPEN.search(text[:start]) is not None and _FENCE_CLOSE.match(text, end) is not None
    )


def parse_tool_calls(text: str) -> ContentToolCalls:
    """Find the tool calls written in a completion's text.

    The one reader of tool calls in text, shared by g_T (:class:`ToolDecisionParser`), the
    samplers that turn raw text into messages (``OpenAISampler`` where the server's tool
    parser found none, ``OfflineSampler``) and the message a decision returns
    (:func:`with_tool_calls`). The rules:

    1. Hermes tags: every ``<tool_call>…</tool_call>`` (the closing tag may be missing)
       holding a JSON object with a string ``"name"`` is a call, wherever the tag is
       (vLLM's hermes parser reads them so); other text and JSON around them is ignored.
    2. Without a tag holding a call: the calls that *end* the text. A call is JSON of the
       form ``{"name": "<tool>", "arguments": {...}}`` (or ``"parameters"``, ``"args"``,
       ``"params"``; arguments may be a string holding the object; ``"id"``/``"type"``
       may be present), ``{"function": {...}}`` (OpenAI wire format) or
       ``{"tool_calls": [...]}``, or a list of those, bare or in a Markdown code fence
       (```` ```json ````). Text may come before the calls (a lead-in such as "Here is
       the call:"); after them only whitespace, separators (``,``/``;``), fences and a
       stray ``</tool_call>`` or ``</tools>``. A call-shaped object followed by other text
       is quoted in an answer ("I would call {...} to get it."), not made — unless it
       stands alone in a code fence that closes after it (Qwen's "Here is how to call it:
       ```json {...} ``` This will …"). A text that starts with a template's doubled braces
       (``{{"name": …}}``) is read with them halved. An object with other keys
       (``"description"``: an echoed tool definition) or JSON-schema arguments is no call.
    3. A call whose JSON does not decode — cut off by ``max_tokens`` or malformed — is an
       invalid call (with its name and an ``error``), never a call; it is recognised by
       its start: ``{"name": "<tool>"`` behind a ``<tool_call>`` tag, followed by an
       argument key (not a JSON schema), or cut off right after the name. So is a tagged
       call whose arguments are no object.

    Whether the name is one of the offered tools is not checked here: a call to a tool
    that was not offered is still a call (g_T leaves it unparsed, ``"unoffered_tool"``,
    and a decision never sends it).

    Args:
        text: The completion's text.

    Returns:
        The text before the first call (without an opening fence), the calls (each with a
        deterministic id) and the invalid calls; ``(text, [], [])`` when there is none.
    """
    found = _scan(text) if "{" in text else None
    if found is None:
        return ContentToolCalls(text, [], [])
    return ContentToolCalls(
        found.content,
        [copy.deepcopy(call) for call in found.tool_calls],
        [copy.deepcopy(call) for call in found.invalid_tool_calls],
    )


@functools.lru_cache(maxsize=2048)
def _scan(text: str) -> ContentToolCalls | None:
    """:func:`parse_tool_calls` without the copies; ``None`` when the text makes no call.

    Cached: g_T, the decision and the reasons for unparsed samples read the same texts.
    """
    first = None
    found: list[ToolCall | InvalidToolCall] = []
    for match in _TOOL_CALL_TAG.finditer(text):
        calls = _tag_calls(match.group(1))
        if calls and first is None:
            first = match.start()
        found.extend(calls)
    if first is None:
        untagged = _untagged_calls(text)
        if untagged is None and text.lstrip().startswith("{{"):
            # A template's escaped braces written out: {{"name": ..., "arguments": {...}}}}
            text = text.replace("{{", "{").replace("}}", "}")
            untagged = _untagged_calls(text)
        if untagged is None:
            return None
        first, found = untagged
    valid = [c for c in found if c["type"] == "tool_call"]
    invalid = [c for c in found if c["type"] == "invalid_tool_call"]
    for i, call in enumerate(valid):
        call["id"] = _tool_call_id(call["name"], call["args"], i)
    for i, bad in enumerate(invalid):
        bad["id"] = _tool_call_id(bad["name"] or "", {"args": bad["args"]}, len(valid) + i)
    content = _BEFORE_CALL.sub("", text[:first]).strip()
    return ContentToolCalls(content, valid, invalid)


def _tool_call_id(name: str, args: Mapping[str, Any], index: int) -> str:
    digest = hashlib.sha1(
        f"{index}:{name}:{json.dumps(args, sort_keys=True, default=str)}".encode(),
        usedforsecurity=False,
    ).hexdigest()
    return f"call_{digest[:24]}"


def extract_tool_calls(message: AIMessage) -> list[ToolCall]:
    """Return the tool calls that ``message`` makes, natively or written in its content.

    Native ``message.tool_calls`` win; otherwise the calls that :func:`parse_tool_calls`
    finds in the content (each with a deterministic id). ``invalid_tool_calls`` and calls
    whose JSON does not decode are never returned, so a non-empty result is always a
    complete, executable call (whether its tool was offered is the caller's check).

    Args:
        message: The completion.

    Returns:
        The tool calls, possibly empty.
    """
    if message.tool_calls:
        return list(message.tool_calls)
    content = message.content
    if isinstance(content, str) and "{" not in content:
        return []
    return parse_tool_calls(message_text(message)).tool_calls


def with_tool_calls(message: AIMessage) -> AIMessage:
    """Return a copy of ``message`` whose tool calls are real ``tool_calls`` with ids.

    Native ``tool_calls`` are kept (a missing id is filled in deterministically).
    Otherwise the calls written in the content (:func:`parse_tool_calls`) become
    ``tool_calls`` and ``invalid_tool_calls`` and the content keeps only the text before
    them, as vLLM's hermes parser returns a tagged call. A message without calls is
    returned as an unchanged copy.

    Args:
        message: A completion.

    Returns:
        The copy.
    """
    calls = message.tool_calls
    if calls:
        if all(call.get("id") for call in calls):
            return message.model_copy()
        fixed = [
            {**call, "id": call.get("id") or _tool_call_id(call["name"], call["args"], i)}
            for i, call in enumerate(calls)
        ]
        return message.model_copy(update={"tool_calls": fixed})
    content = message.content
    if isinstance(content, str) and "{" not in content:
        return message.model_copy()
    parsed = parse_tool_calls(message_text(message))
    if not parsed.tool_calls and not parsed.invalid_tool_calls:
        return message.model_copy()
    update = {
        "content": parsed.content,
        "tool_calls": parsed.tool_calls,
        "invalid_tool_calls": [*message.invalid_tool_calls, *parsed.invalid_tool_calls],
    }
    return message.model_copy(update=update)


def canonical_tool_calls(calls: Sequence[ToolCall]) -> str:
    """Return a canonical key for a list of tool calls (names + sorted-key JSON args)."""
    return json.dumps(
        [[c["name"], c.get("args") or {}] for c in calls],
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )


# ------------------------------------------------------------------------ tool_decision

_REFUSAL_PATTERNS: tuple[str, ...] = (
    r"\bi\s*(?:'m|am)\s+sorry\b(?!\s+for\s+(?:the|any|my)\s+(?:misunderstanding|confusion|"
    r"error|mix-?up|inconvenience))",
    r"\bi\s*(?:'m|am)\s+afraid\s+(?:i\b|not\b|that(?:'s| is) not\b)",
    r"\bi\s*(?:'m|am)\s+not\s+(?:equipped|designed|programmed)\s+to\b",
    r"\bi\s+apologi[sz]e\b",
    r"\bi\s*(?:can\s*not|can'?t|cannot|could\s*n'?t|could not|won'?t|will not)\b",
    r"\bi\s*(?:'m|am)\s+(?:unable|not able|not capable)\b",
    r"\bi\s+(?:do\s*n'?t|do not)\s+have\s+(?:access|the ability|real-time|the capability)\b",
    r"\b(?:unable|not able) to\s+(?:help|assist|provide|access|answer|do|fulfil|perform|"
    r"complete|comply|retrieve|check|get|find|book|browse)\b",
    r"\bas an ai\b",
    r"\b(?:beyond|outside) (?:my|the scope of my) (?:capabilit|abilit|scope)",
    r"\b(?:that|it)(?:'s| is) not possible\b|\bnot something i can\b",
    r"\bno (?:access|way) to\b",
    r"\bi\s+(?:do\s*n'?t|do not)\s+know\b",
    r"\b(?:you|we)\s*(?:can\s*not|can'?t|cannot)\s+(?:help|assist)\b",
    r"\b(?:can\s*not|can'?t|cannot)\s+(?:help|assist)(?: you)? with (?:that|this)\b",
    r"抱歉|对不起|很遗憾|无法|我不能|不能帮|没有办法|做不到",
)

_PLEASANTRY_PATTERNS: tuple[str, ...] = (
    r"\banything else\b",
    r"\bsomething else\b",
    r"\bwhat else\b",
    r"\bhow (?:can|may|could) i (?:help|assist)\b",
    r"\b(?:can|may|could) i (?:help|assist)\b",
    r"\bwould you like (?:me to|to know|to explore|more|some|any|help|other)\b",
    r"\bother options\b",
    r"\bdo you (?:want|need) (?:me|help|more|any)\b",
    r"\bis there (?:any|some)thing\b",
)

_REQUEST_PATTERNS: tuple[str, ...] = (
    r"\b(?:please|kindly),?\s+(?:provide|specify|clarify|tell|let me know|share|confirm|give|"
    r"send|enter|indicate)\b",
    r"\bi (?:need|require|would need|will need) "
    r"(?:more|additional|some|further|the|your|to know)\b",
    r"\bcould you (?:please )?(?:provide|specify|clarify|tell|share|confirm|let me know|give)\b",
    r"\bcan you (?:please )?(?:provide|specify|clarify|tell|share|confirm|let me know|give)\b",
    r"请(?:提供|告诉|说明|输入|确认)",
)

_QUESTION = re.compile(r"[^.!?。！？\n]*(?:\?(?=[\s\"')\]*_]|$)|？)")
"""A sentence ending in "?" (not a "?" inside a URL query or code, which is followed by
more characters) or in the full-width "？"."""
_NOT_PROSE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`|\bhttps?://\S+", re.DOTALL)
"""Code blocks, inline code and URLs: a "?" in them is no question to the user."""


def _alternation(patterns: Sequence[str]) -> str:
    return "|".join(f"(?:{p})" for p in patterns)


@dataclass(frozen=True)
class _Matcher:
    """Built-in patterns plus optional user patterns.

    Built-in patterns are lower-case and run on lower-cased text (about twice as fast as
    ``re.IGNORECASE``); user patterns run case-insensitively on the original text.
    """

    builtin: re.Pattern[str]
    extra: re.Pattern[str] | None = None

    def search(self, text: str, lower: str) -> bool:
        if self.builtin.search(lower) is not None:
            return True
        return self.extra is not None and self.extra.search(text) is not None


def _matcher(builtin: Sequence[str], extra: Sequence[str] = (), flags: int = 0) -> _Matcher:
    compiled = re.compile(_alternation(builtin), flags)
    if not extra:
        return _Matcher(compiled)
    return _Matcher(compiled, re.compile(_alternation(extra), flags | re.IGNORECASE))


_PLEASANTRY = re.compile(_alternation(_PLEASANTRY_PATTERNS))


def _call_names(message: AIMessage) -> tuple[list[str], list[str]]:
    """Names of the calls ``message`` makes, and of those it starts but does not complete.

    The calls are those of :func:`extract_tool_calls`; the started ones are the named
    ``invalid_tool_calls`` and the invalid calls :func:`parse_tool_calls` finds in the
    content (typically JSON cut off by ``max_tokens``).
    """
    partial = [name for c in message.invalid_tool_calls if (name := c.get("name"))]
    content = message.content
    if isinstance(content, str) and "{" not in content:
        return [c["name"] for c in message.tool_calls], partial
    found = _scan(message_text(message))
    if found is None:
        return [c["name"] for c in message.tool_calls], partial
    partial += [name for c in found.invalid_tool_calls if (name := c["name"])]
    return [c["name"] for c in message.tool_calls or found.tool_calls], partial


_TOOL_DECISION_LABELS = ("tool_call", "request_for_info", "cannot_answer")


@dataclass(frozen=True)
class ToolDecisionParser:
    """g_T for tool use: ``tool_call`` | ``request_for_info`` | ``cannot_answer``.

    Rules, in order:

    1. The message makes a tool call (:func:`extract_tool_calls`: native ``tool_calls`` or
       JSON in the content) to an offered tool → ``tool_call``.
    2. With ``partial_calls`` (the default): the message starts a call to an offered tool
       that it does not complete — JSON cut off by ``max_tokens`` such as
       ``<tool_call>{"name": "get_weather", "argu``, or a named ``invalid_tool_calls``
       entry → ``tool_call``. The completion states the model's decision to call that
       tool, which is what g_T reads; the broken call itself is never executable:
       :func:`extract_tool_calls` returns nothing for it, and a decision sends a tool call
       only when ``extract_tool_calls`` finds one. A JSON object in the content counts as
       a call start when it is ``{"name": "<tool>", …`` behind a ``<tool_call>`` tag,
       followed by an argument key (``"arguments"``, ``"parameters"``, … whose value is
       not a JSON schema: an echoed tool definition is no call), or cut off right after
       the name.
    3. The message calls (or starts calling) only tools that were not offered → ``None``
       (unparsed; :func:`unparsed_reason` says ``"unoffered_tool"``). The text rules
       below are not tried: a ``?`` inside JSON arguments is no question.
    4. The text asks a clarifying question (a sentence ending in ``?`` or ``？`` that is
       not a pleasantry such as "Is there anything else I can help with?") or asks for
       input ("please provide…", "I need more information…", "请提供") →
       ``request_for_info``. Asking wins over a refusal in the same message ("I can't
       check without a city. Which city?"), because the model offers a way forward.
    5. The text refuses or states an inability ("I'm sorry", "I can't", "I am unable
       to", "I'm not equipped to", "You cannot help with that", "as an AI", "I don't
       have access", "I don't know", "抱歉", "我无法", "我不能") → ``cannot_answer``.
       "I'm sorry for the confusion / any misunderstanding" alone is a filler, not a
       refusal; "I'm afraid" counts only as "I'm afraid I…" / "I'm afraid not".
    6. Any other non-empty text → ``direct_answer`` when ``direct_answer=True``, else
       ``None`` (unparsed).

    The offered tools are ``tool_names`` when set; :meth:`with_tool_names` narrows them
    to the tools offered to one call (the runner passes each item's tools). With no
    names known, every tool counts as offered.

    Args:
        direct_answer: Whether plain answers map to a ``direct_answer`` label.
        tool_names: Only calls to these tools count as ``tool_call`` (``None``: any).
        refusal_patterns: Extra regular expressions (case-insensitive) for rule 5.
        question_patterns: Extra regular expressions for rule 4 (no ``?`` needed).
        partial_calls: Whether rule 2 applies (a started, unfinished call to an offered
            tool is read as ``tool_call``); ``False`` leaves such samples unparsed.
    """

    direct_answer: bool = False
    tool_names: tuple[str, ...] | None = None
    refusal_patterns: tuple[str, ...] = ()
    question_patterns: tuple[str, ...] = ()
    partial_calls: bool = True
    labels: tuple[str, ...] = field(init=False)
    _refusal: _Matcher = field(init=False, repr=False, compare=False)
    _request: _Matcher = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        labels = _TOOL_DECISION_LABELS + (("direct_answer",) if self.direct_answer else ())
        tool_names = None if self.tool_names is None else tuple(self.tool_names)
        object.__setattr__(self, "tool_names", tool_names)
        object.__setattr__(self, "refusal_patterns", tuple(self.refusal_patterns))
        object.__setattr__(self, "question_patterns", tuple(self.question_patterns))
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "_refusal", _matcher(_REFUSAL_PATTERNS, self.refusal_patterns))
        object.__setattr__(self, "_request", _matcher(_REQUEST_PATTERNS, self.question_patterns))

    def with_tool_names(self, offered: Sequence[str]) -> ToolDecisionParser:
        """Return this parser restricted to the tools ``offered`` to one call.

        With ``tool_names`` set, the result keeps only the offered names among them.
        Results are cached, so calling this once per sample is cheap.
        """
        return _with_tool_names(self, tuple(offered))

    def asks(self, text: str, lower: str | None = None) -> bool:
        """Return whether ``text`` asks the user for information (rule 4)."""
        lower = text.lower() if lower is None else lower
        if "?" in lower or "？" in lower:
            for match in _QUESTION.finditer(_NOT_PROSE.sub(" ", lower)):
                if not _PLEASANTRY.search(match.group(0)):
                    return True
        return self._request.search(text, lower)

    def _offered(self, names: Sequence[str]) -> bool:
        return self.tool_names is None or any(n in self.tool_names for n in names)

    def __call__(self, message: AIMessage) -> str | None:
        """Return the label of ``message`` (see the class docstring for the rules)."""
        names, partial = _call_names(message)
        if names and self._offered(names):
            return "tool_call"
        if partial and self.partial_calls and self._offered(partial):
            return "tool_call"
        if names or partial:
            return None
        text = message_text(message)
        if not text:
            return None
        lower = text.lower()
        if self.asks(text, lower):
            return "request_for_info"
        if self._refusal.search(text, lower):
            return "cannot_answer"
        return "direct_answer" if self.direct_answer else None


@functools.lru_cache(maxsize=512)
def _with_tool_names(parser: ToolDecisionParser, offered: tuple[str, ...]) -> ToolDecisionParser:
    own = parser.tool_names
    names = offered if own is None else tuple(n for n in offered if n in own)
    return dataclasses.replace(parser, tool_names=names)


def tool_names_of(tools: Sequence[Any]) -> tuple[str, ...]:
    """The names of offered *tools*: names, LangChain tools, OpenAI tool dicts or functions.

    What :func:`with_offered_tools`, :meth:`Task.parse_completion
    <taskcal_agents.task.Task.parse_completion>` and the ``Decider`` take as ``tool_names``. A
    provider's built-in tool without a function name (``{"type": "web_search"}``) has no
    name a completion could call, and is left out.
    """
    from langchain_core.tools import BaseTool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    names = []
    for tool in tools:
        if isinstance(tool, str | BaseTool):  # a name, or a tool that has one (no schema work)
            names.append(tool if isinstance(tool, str) else tool.name)
            continue
        if isinstance(tool, Mapping) and not ("function" in tool or "name" in tool):
            continue
        spec = tool if isinstance(tool, Mapping) and "function" in tool else None
        spec = spec or convert_to_openai_tool(tool)
        names.append(str(spec["function"]["name"]))
    return tuple(names)


def with_offered_tools(parser: Parser, tool_names: Sequence[str] | None) -> Parser:
    """Return ``parser`` restricted to the tools offered to one call.

    A parser that knows about tools (such as :class:`ToolDecisionParser`) has a
    ``with_tool_names(names)`` method returning the restricted parser; any other parser,
    or ``tool_names=None`` (the offered tools are unknown), returns ``parser`` itself.

    Args:
        parser: The task's parser.
        tool_names: The names of the tools offered to the call, or ``None``.

    Returns:
        The parser to use for this call.
    """
    if tool_names is None:
        return parser
    bind = getattr(parser, "with_tool_names", None)
    return parser if bind is None else bind(tuple(tool_names))


UNPARSED_REASONS: tuple[str, ...] = ("unoffered_tool", "length", "empty", "other")
"""The reasons :func:`unparsed_reason` gives, most specific first."""


def unparsed_reason(message: AIMessage, *, tool_names: Sequence[str] | None = None) -> str:
    """Say why the parser found no label in ``message`` (call it for unparsed samples).

    In order: ``"unoffered_tool"`` — it calls, or starts a call to, only tools that are not
    in ``tool_names`` (given); ``"length"`` — it ended on the length limit
    (``finish_reason == "length"``: raise ``max_tokens``); ``"empty"`` — no text and no
    call; ``"other"`` — text the parser does not recognise.

    Args:
        message: An unparsed completion.
        tool_names: The names of the tools offered to the call, or ``None`` (unknown).

    Returns:
        One of :data:`UNPARSED_REASONS`.
    """
    if tool_names is not None:
        offered = tuple(tool_names)
        names = [name for found in _call_names(message) for name in found]
        if names and not any(n in offered for n in names):
            return "unoffered_tool"
    if (message.response_metadata or {}).get("finish_reason") == "length":
        return "length"
    if not message_text(message) and not message.tool_calls:
        return "empty"
    return "other"


# -------------------------------------------------------------------- answer_or_abstain

_ABSTAIN_PATTERNS: tuple[str, ...] = (
    r"\bi\s+(?:do\s*n'?t|do not|really don'?t)\s+know\b",
    r"\bi\s*(?:'m|am)\s+(?:not (?:entirely |completely |quite |really |100% )?(?:sure|certain)|"
    r"unsure|uncertain|unable|not able)\b",
    r"\b(?:the answer|it) is (?:currently |still )?(?:unknown|not (?:known|provided|available))\b",
    r"\bi\s*(?:can\s*not|can'?t|cannot|could\s*n'?t)\s+(?:answer|say|tell|determine|know|"
    r"provide|be sure|help)\b",
    r"\bunable to (?:answer|determine|say|tell|provide)\b",
    r"\bno idea\b",
    r"\b(?:not enough|insufficient|no) (?:information|data|context)\b",
    r"\bi\s+(?:do\s*n'?t|do not)\s+have (?:enough |the |that |any )?(?:information|knowledge|"
    r"data|answer)\b",
    r"\bcannot be (?:determined|answered|known)\b",
    r"^\s*(?:unknown|unsure|not sure|n/?a|i abstain|abstain|pass)\s*[.!]?\s*$",
    r"\bi (?:will|must|have to) abstain\b",
)
_HEDGE = re.compile(r"\bbut\b[^.?!]*\b(?:i think|i believe|i guess|probably|likely|it is|it's)\b")


@dataclass(frozen=True)
class AnswerOrAbstainParser:
    """g_T for answer-or-abstain: ``answer`` | ``abstain``.

    Empty text → ``None``. Text matching an abstention phrase ("I don't know", "I'm not
    (entirely) sure", "I cannot answer", "not enough information", "unknown", "the answer
    is unknown / not provided", …) → ``abstain``,
    unless it goes on to hedge an answer ("I'm not sure, but I think it is Paris") →
    ``answer``. Any other text → ``answer``.

    Args:
        answer_label: The label for an answer.
        abstain_label: The label for an abstention.
        abstain_patterns: Extra regular expressions (case-insensitive) for abstentions.
    """

    answer_label: str = "answer"
    abstain_label: str = "abstain"
    abstain_patterns: tuple[str, ...] = ()
    labels: tuple[str, ...] = field(init=False)
    _abstain: _Matcher = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", (self.answer_label, self.abstain_label))
        object.__setattr__(
            self,
            "_abstain",
            _matcher(_ABSTAIN_PATTERNS, tuple(self.abstain_patterns), flags=re.MULTILINE),
        )

    def __call__(self, message: AIMessage) -> str | None:
        """Return ``abstain_label``, ``answer_label`` or ``None`` for empty text."""
        text = message_text(message)
        if not text:
            return None
        lower = text.lower()
        if self._abstain.search(text, lower) and not _HEDGE.search(lower):
            return self.abstain_label
        return self.answer_label


# ------------------------------------------------------------------------------- rating

_NUMBER_WORDS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
_NUM = r"(\d+|" + "|".join(_NUMBER_WORDS) + r")"
_SCALE = re.compile(
    r"(?:\bscale (?:of|from) \d+\s*(?:to|-|–)\s*\d+|\bfrom \d+ to \d+|\bbetween \d+ and \d+|"
    r"\bout of \d+|/\s*\d+(?!\.\d))",
    re.IGNORECASE,
)
_EXPLICIT = re.compile(
    r"(?:\brating|\bscore|\bgrade|\brate (?:it|this|them|the \w+)(?: as| at)?|"
    r"\bi(?:'d| would) (?:rate|give|score)(?: it| this)?(?: a| an)?|\bgive (?:it|this)(?: a| an)?)"
    r"\s*(?:is|of|:|=|-)?\s*\**\s*" + _NUM + r"\b",
    re.IGNORECASE,
)
_FRACTION = re.compile(r"(?<![\d.])(\d+)\s*(?:/|out of)\s*\d+", re.IGNORECASE)
_STANDALONE = re.compile(r"(?<![\d.,])(\d+)(?![\d]|\.\d)")
_WORD_ALONE = re.compile(
    r"^\W*(" + "|".join(_NUMBER_WORDS) + r")\b\s*(?:[.!,:;(\n]|$)", re.IGNORECASE
)
_NOT_RATING = re.compile(
    r"\b(?:sentences?|statements?|texts?|options?|steps?|points?|items?|examples?)\s+\d+\b"
    r"|^[ \t]*\d+[.)](?=[ \t]+\S)",
    re.IGNORECASE | re.MULTILINE,
)
"""Numbers that are no rating: references ("Sentence 1") and list numbers ("1. Both…")."""


def _to_int(token: str) -> int:
    token = token.lower()
    return _NUMBER_WORDS[token] if token in _NUMBER_WORDS else int(token)


@dataclass(frozen=True)
class RatingParser:
    """g_T for ratings on a low…low+k−1 scale (default 1…k, labels ``"1"`` … ``"k"``).

    In order: an explicit rating ("Rating: 4", "I'd give it a 4", "score of four"); a
    fraction ("4/5", "4 out of 5"); the first standalone number on the scale after scale
    descriptions ("on a scale of 1 to 5", "out of 5"), references ("Sentence 1",
    "option 2") and list numbers at the start of a line ("1. Both sentences…") are
    removed; a number word that is the whole first phrase ("Zero (completely
    different)", "Four."). A number word elsewhere ("four people") is no rating.
    Decimals such as "4.5" and numbers off the scale are ignored; no rating found →
    ``None``.

    Args:
        k: The number of rating levels.
        labels: The label of each level (default the level's number as text).
        low: The lowest level (0 for a 0…k−1 scale such as STS-B's 0–5 with k=6).
    """

    k: int = 5
    labels: tuple[str, ...] = ()
    low: int = 1

    def __post_init__(self) -> None:
        check_int(
            self.k,
            "RatingParser option 'k'",
            minimum=2,
            kind="an integer",
            hint="pass k=5 for a 1-5 scale",
        )
        check_int(
            self.low,
            "RatingParser option 'low'",
            kind="an integer",
            note="the lowest level",
            hint="pass low=0 for a 0…k−1 scale",
        )
        labels = tuple(self.labels) or tuple(str(i) for i in range(self.low, self.low + self.k))
        if len(labels) != self.k:
            msg = (
                f"RatingParser option 'labels' must have k={self.k} entries, got "
                f"{len(labels)}: {list(labels)!r}; pass one label per rating level."
            )
            raise ConfigurationError(msg)
        object.__setattr__(self, "labels", labels)

    def _label(self, token: str) -> str | None:
        value = _to_int(token) - self.low
        return self.labels[value] if 0 <= value < self.k else None

    def __call__(self, message: AIMessage) -> str | None:
        """Return the rating label of ``message`` or ``None``."""
        text = message_text(message)
        if not text:
            return None
        for match in _EXPLICIT.finditer(text):
            label = self._label(match.group(1))
            if label is not None:
                return label
        for match in _FRACTION.finditer(text):
            label = self._label(match.group(1))
            if label is not None:
                return label
        for match in _STANDALONE.finditer(_NOT_RATING.sub(" ", _SCALE.sub(" ", text))):
            label = self._label(match.group(1))
            if label is not None:
                return label
        alone = _WORD_ALONE.match(text)
        return self._label(alone.group(1)) if alone is not None else None


# ------------------------------------------------------------------------------- choice


@dataclass(frozen=True)
class ChoiceParser:
    """g_T for multiple choice: one of ``labels`` (default ``A`` … ``D``).

    In order (the first rule that finds exactly one distinct label wins; two distinct
    labels at the same rule → ``None``): the whole text is a label ("B", "(B)", "**B.**");
    an explicit answer ("answer is B", "Answer: B", "option B", "choice (B)"); a label at
    the start ("B) …", "B. …", "B: …"); a label in brackets or bold anywhere ("(B)",
    "**B**"); an option text (``texts``) that occurs in the text, case-insensitively.
    Labels are matched case-sensitively as whole tokens, so the article "A" in "A good
    choice is…" does not count.

    Args:
        labels: The option labels (letters or short tokens).
        texts: The option texts, one per label, for matching by content.
    """

    labels: tuple[str, ...] = ("A", "B", "C", "D")
    texts: tuple[str, ...] | None = None
    _alt: str = field(init=False, repr=False, compare=False)
    _rules: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        labels = tuple(str(label) for label in self.labels)
        if len(labels) < 2 or len(set(labels)) != len(labels):
            msg = (
                "ChoiceParser option 'labels' must hold at least two distinct labels, got "
                f"{list(labels)!r}."
            )
            raise ConfigurationError(msg)
        texts = None if self.texts is None else tuple(str(t) for t in self.texts)
        if texts is not None and len(texts) != len(labels):
            msg = (
                f"ChoiceParser option 'texts' must have one text per label ({len(labels)}), "
                f"got {len(texts)}: {list(texts)!r}."
            )
            raise ConfigurationError(msg)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "texts", texts)
        alt = "|".join(re.escape(label) for label in sorted(labels, key=len, reverse=True))
        tok = rf"(?<![A-Za-z0-9])({alt})(?![A-Za-z0-9])"
        rules = (
            re.compile(rf"^\W*{tok}\W*$"),
            re.compile(
                rf"(?i:answer(?: is|:)|option|choice|choose|select|pick)\s*[:\-]?\s*[*(\[]*\s*{tok}"
            ),
            re.compile(rf"^\W*{tok}\s*[).:\]]"),
            re.compile(rf"[(\[]\s*{tok}\s*[)\]]|\*\*\s*{tok}\s*[.)]?\s*\*\*"),
        )
        object.__setattr__(self, "_alt", alt)
        object.__setattr__(self, "_rules", rules)

    def __call__(self, message: AIMessage) -> str | None:
        """Return the chosen label of ``message`` or ``None``."""
        text = message_text(message)
        if not text:
            return None
        for rule in self._rules:
            found = {g for m in rule.finditer(text) for g in m.groups() if g}
            if len(found) == 1:
                return found.pop()
            if len(found) > 1:
                return None
        if self.texts is not None:
            lowered = text.lower()
            found = {
                label
                for label, option in zip(self.labels, self.texts, strict=True)
                if option and option.lower() in lowered
            }
            if len(found) == 1:
                return found.pop()
        return None


# ------------------------------------------------------------------------------- schema


_REGISTRY: dict[str, Any] = {}
"""Names registered by the user's code (:func:`register_parser`): factories and models."""
_REGISTRY_LOCK = threading.Lock()
_OWN: Mapping[str, tuple[str, str]] = MappingProxyType(
    {"taskcal_agents.decision_model:LabelParser": ("taskcal_agents.decision_model", "LabelParser")}
)
"""Names of this package's own parsers outside this module (a fixed table, never input)."""


def register_parser(name: str, obj: Any) -> None:
    """Let task files name ``obj``: a parser factory, or a pydantic model for ``schema``.

    A task file (or an artefact's ``task_spec``) refers to a custom parser factory, or to
    the pydantic model of the ``schema`` parser's ``model`` option, by a name; that name
    must have been registered here by the user's code. Nothing is ever imported because a
    file names it. Any string works as the name, e.g. ``"myapp.parsers:make"``.

    Args:
        name: The name a task file uses.
        obj: The factory (called with the parser options) or the pydantic model class.

    Raises:
        ConfigurationError: If ``name`` is empty or a built-in parser's name, or ``obj`` is
            not callable.
    """
    if not isinstance(name, str) or not name or name in _BUILTINS:
        msg = (
            f"register_parser parameter 'name' must be a non-empty string other than the "
            f"built-in parser names {sorted(_BUILTINS)!r}, got {name!r}."
        )
        raise ConfigurationError(msg)
    if not callable(obj):
        msg = f"register_parser parameter 'obj' for {name!r} must be callable, got {obj!r}."
        raise ConfigurationError(msg)
    with _REGISTRY_LOCK:
        _REGISTRY[name] = obj


def registered_parser_names() -> tuple[str, ...]:
    """Return the names registered with :func:`register_parser`, sorted."""
    with _REGISTRY_LOCK:
        return tuple(sorted(_REGISTRY))


def _registered(name: str, what: str) -> Any:
    """The object the user registered as ``name`` (or one of this package's own)."""
    with _REGISTRY_LOCK:
        obj = _REGISTRY.get(name)
    if obj is not None:
        return obj
    own = _OWN.get(name)
    if own is not None:
        return getattr(importlib.import_module(own[0]), own[1])
    msg = (
        f"{what} {name!r} is not a built-in parser and was not registered; a task file "
        f"cannot make taskcal import code. Built-in parsers: {sorted(_BUILTINS)!r}. Register "
        f"yours in your code first: taskcal_agents.parsers.register_parser({name!r}, obj)."
    )
    raise ConfigurationError(msg)


@dataclass(frozen=True)
class SchemaParser:
    """g_T for structured output: the value of ``field`` in a JSON object.

    The object is taken from, in order: the first tool call's arguments (function-calling
    structured output), ``additional_kwargs["parsed"]`` (``ChatOpenAI`` structured output),
    or the first JSON object in the content (fences and surrounding text are fine). When
    ``model`` is given (a pydantic model class, or the name it was registered under with
    :func:`register_parser`), the object must validate against it. The value is turned into
    a string and mapped through ``mapping`` when given; out-of-task values are counted as
    unparsed by the task.

    Args:
        field: The field that holds the label.
        model: Optional pydantic model (class or registered name) to validate the object.
        mapping: Optional map from field values to labels.
    """

    field: str = "label"
    model: Any = None
    mapping: Mapping[str, str] | None = None
    labels: tuple[str, ...] | None = dataclasses.field(init=False, default=None)

    def __post_init__(self) -> None:
        model = self.model
        if isinstance(model, str):
            model = _registered(model, "SchemaParser option 'model'")
        if model is not None and not hasattr(model, "model_validate"):
            msg = (
                "SchemaParser option 'model' must be a pydantic model class or the name of "
                f"one registered with register_parser, got {self.model!r}."
            )
            raise ConfigurationError(msg)
        object.__setattr__(self, "model", model)
        if self.mapping is not None:
            mapping = MappingProxyType({str(k): str(v) for k, v in self.mapping.items()})
            object.__setattr__(self, "mapping", mapping)
            object.__setattr__(self, "labels", tuple(dict.fromkeys(mapping.values())))

    def _object(self, message: AIMessage) -> Any:
        if message.tool_calls:
            return message.tool_calls[0]["args"]
        parsed = message.additional_kwargs.get("parsed")
        if parsed is not None:
            return parsed
        text = message_text(message)
        for value in _iter_json_values(text):
            if isinstance(value, dict):
                return value
        return None

    def __call__(self, message: AIMessage) -> str | None:
        """Return the (mapped) value of ``field`` or ``None``."""
        obj = self._object(message)
        if obj is None:
            return None
        if self.model is not None:
            try:
                obj = self.model.model_validate(obj)
            except ValueError:
                return None
        value = getattr(obj, self.field, None) if not isinstance(obj, dict) else obj.get(self.field)
        if value is None or isinstance(value, dict | list):
            return None
        value = getattr(value, "value", value)  # enums
        key = str(value).strip()
        if self.mapping is not None:
            return self.mapping.get(key)
        return key


# ----------------------------------------------------------------------------- registry

_BUILTINS: Mapping[str, Callable[..., Parser]] = MappingProxyType(
    {
        "tool_decision": ToolDecisionParser,
        "answer_or_abstain": AnswerOrAbstainParser,
        "rating": RatingParser,
        "choice": ChoiceParser,
        "schema": SchemaParser,
    }
)

_TUPLE_OPTIONS = frozenset(
    {"tool_names", "refusal_patterns", "question_patterns", "abstain_patterns", "labels", "texts"}
)


def builtin_parser_names() -> tuple[str, ...]:
    """Return the names of the built-in parsers."""
    return tuple(_BUILTINS)


def get_parser(name: str, **options: Any) -> Parser:
    """Build a parser from its name and options.

    Args:
        name: A built-in name (``"tool_decision"``, ``"answer_or_abstain"``, ``"rating"``,
            ``"choice"``, ``"schema"``) or a name registered with :func:`register_parser`
            (a callable that returns a parser when called with ``options``).
        **options: The parser's options (see each parser class).

    Returns:
        The parser.

    Raises:
        ConfigurationError: If the name is unknown or an option is invalid.
    """
    factory = _BUILTINS.get(name)
    if factory is None:
        factory = _registered(name, "parser name")
    else:
        accepted = {f.name for f in fields(factory) if f.init}  # type: ignore[arg-type]
        unknown = sorted(set(options) - accepted)
        if unknown:
            msg = (
                f"parser {name!r} got unknown option(s) {unknown!r}; accepted options are "
                f"{sorted(accepted)!r}."
            )
            raise ConfigurationError(msg)
        options = {
            k: (tuple(v) if k in _TUPLE_OPTIONS and isinstance(v, list | tuple) else v)
            for k, v in options.items()
        }
    try:
        parser = factory(**options)
    except re.error as exc:
        msg = f"parser {name!r} got an invalid regular expression in its options: {exc}."
        raise ConfigurationError(msg) from exc
    except TypeError as exc:  # an option of the wrong type, e.g. a number for a name list
        msg = f"parser {name!r} got options it cannot use: {exc}; options were {options!r}."
        raise ConfigurationError(msg) from exc
    if not callable(parser):
        msg = f"parser factory {name!r} returned {parser!r}, which is not callable."
        raise ConfigurationError(msg)
    return parser
