"""Tool calls written as text: extract them from a completion's content.

Small models often write a call as JSON (tagged ``<tool_call>``, fenced, or bare) instead of
emitting a native tool call; these functions find such calls, repair the message and give
each call a stable id.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage, InvalidToolCall, ToolCall

from taskcal_agents.parsing._text import message_text

__all__ = [
    "ContentToolCalls",
    "canonical_tool_calls",
    "extract_tool_calls",
    "has_written_call",
    "parse_tool_calls",
    "with_tool_calls",
]

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
