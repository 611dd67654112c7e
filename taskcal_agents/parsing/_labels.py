"""Parsers g_T: map one sampled completion (an ``AIMessage``) to a task label.

A parser returns a label, or ``None`` when the completion does not express any of the
task's labels. ``None`` is never dropped silently: :class:`~taskcal_agents.decision.Belief`
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

import dataclasses
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import AIMessage

from taskcal_agents._validation import check_int
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.parsing._text import message_text, normalize_text
from taskcal_agents.parsing._tool_calls import _scan

__all__ = [
    "UNPARSED_REASONS",
    "AnswerOrAbstainParser",
    "ChoiceParser",
    "LabelParser",
    "Parser",
    "RatingParser",
    "ToolDecisionParser",
    "tool_names_of",
    "unparsed_reason",
    "with_offered_tools",
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
    <taskcal_agents.decision.Task.parse_completion>` and the ``Decider`` take as ``tool_names``. A
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


# ------------------------------------------------------------------------------- labels


@dataclass(frozen=True)
class LabelParser:
    """g_T for free-form labels: the label a reply names, case-insensitively.

    In order: the whole reply is a label ("Billing."); exactly one label occurs as a whole
    word ("route it to the technical team"); the reply opens with a label and punctuation
    ("Yes, there is no doubt"); otherwise the rules of
    :class:`ChoiceParser` (e.g. "answer: B").

    Args:
        labels: The allowed labels.
    """

    labels: tuple[str, ...]
    _by_key: dict[str, str] = field(init=False, repr=False, compare=False)
    _word: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _opening: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _choice: ChoiceParser = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        labels = tuple(str(label) for label in self.labels)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "_choice", ChoiceParser(labels=labels))
        object.__setattr__(self, "_by_key", {normalize_text(lb): lb for lb in labels})
        alt = "|".join(re.escape(lb) for lb in sorted(labels, key=len, reverse=True))
        word = re.compile(rf"(?<![\w-])({alt})(?![\w-])", re.IGNORECASE)
        opening = re.compile(rf"^[\W_]*({alt})[*_]*\s*[.,;:!)\-]", re.IGNORECASE)
        object.__setattr__(self, "_word", word)
        object.__setattr__(self, "_opening", opening)

    def __call__(self, message: AIMessage) -> str | None:
        """Return the label ``message`` names, or ``None``."""
        text = message_text(message)
        if not text:
            return None
        key = normalize_text(text)
        if key in self._by_key:
            return self._by_key[key]
        found = {self._by_key.get(normalize_text(m.group(1))) for m in self._word.finditer(text)}
        found.discard(None)
        if len(found) == 1:
            return found.pop()
        opening = self._opening.match(text)
        if opening:
            return self._by_key.get(normalize_text(opening.group(1)))
        return self._choice(message)
