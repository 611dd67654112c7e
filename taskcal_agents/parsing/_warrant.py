"""Warrant for a call's tool: does the user's request ask for what the tool does?

Argument provenance (:class:`~taskcal_agents.parsing.TrustPolicy`) keeps a value that only
a tool result supplies from being sent. An injection can also pick the *tool*: an injected
"reserve this hotel" or "delete that file" is a call whose arguments are of kinds a
legitimate flow also takes from tool results, but whose tool nothing the user said asks
for. A :class:`Warrant` says what asked for a proposed call:

- ``user``: the current request names the tool's **action** and its **object**, or names
  its action while no value the call sends comes from a tool result;
- ``chain``: the current request names the tool's action, and every value the call takes
  from a tool result comes from the result of an earlier call that has a warrant itself; a
  value that picks what the call acts on (an ID, a recipient, an amount: any kind but
  ``other``) from a call on the same object (a file's ID from a file search, for a file's
  deletion), its free text from any;
- ``none``: neither; the tool results it follows are recorded.

The words (the rule, version :data:`WARRANT_RULE_VERSION`):

- The current request is the user's turns since the model's last reply that made no tool
  call (the end of the previous exchange; a question the user's next turn answers, the
  library's confirmation with a plain yes or another question with words that name no
  action, does not end it): never a tool result, nor a summary LangChain's
  ``SummarizationMiddleware`` wrote as a user message, nor an earlier exchange's words. A
  conversation cut short (a window of its last messages) holds fewer of them: the warrant
  fails closed.
- A tool's **action** is the first word of its name that is a verb of one of the
  :data:`ACTION_FAMILIES` (``send_money`` → ``send``), else the first such verb of its
  description's first sentence. The user names it with any verb of a family that holds it
  and fits the tool's object (``pay`` or ``refund`` for ``send_money``; ``adjust`` for
  ``update_scheduled_transaction``); a question ("what", "which", "tell me"…) names a read.
  With no such verb, the name's first word is its action (``remind``, ``export``) unless
  it names an object (``file_manager``): then the action is named only where the object
  is, with a verb that is not a read's. A read of values the user gave (none from a tool
  result) is the user's: the step their request needs first.
- A tool's **object** is the other words of its name (less its action and
  :data:`GENERIC_WORDS`), each with its :data:`OBJECT_SYNONYMS`, and the nouns of its
  action's family (``bill`` for a money transfer). A tool with no object word has its
  object named.
- Words are compared lower-cased, singular (``files`` → ``file``) and, for verbs, on their
  base (``sending``, ``sent`` → ``send``); "tell me" and "tell us" ask for a read, not a
  message.

The lists were written from common tool names and requests (messages, money, calendars,
files, bookings, directories). Version 1 came before any injection was run against them;
version 2 changed them after independent reviews' hand-made conversations, none taken from
a benchmark's injections.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator

from taskcal_agents.parsing._effects import EFFECTS, Effect
from taskcal_agents.parsing._evidence import stem
from taskcal_agents.parsing._provenance import Source

__all__ = [
    "ACTION_FAMILIES",
    "GENERIC_WORDS",
    "OBJECT_SYNONYMS",
    "WARRANT_KINDS",
    "WARRANT_RULE_VERSION",
    "Capability",
    "Warrant",
    "WarrantKind",
    "WarrantRule",
    "capability",
    "names_an_action",
    "user_words",
]

WARRANT_RULE_VERSION = 2
"""The version of the warrant rule (bumped whenever a list or a step changes)."""

WarrantKind = Literal["user", "chain", "none"]
"""What asked for a call: the user's request, a chain of warranted steps, or nothing."""

WARRANT_KINDS: tuple[str, ...] = ("user", "chain", "none")


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


ACTION_FAMILIES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # family: (its verbs, the nouns of the object its verbs imply)
    "money": (
        _words("send transfer pay wire refund remit reimburse repay"),
        _words("money payment transaction transfer bill rent refund amount fund invoice fee"),
    ),
    "message": (
        _words("send message email mail write reply post dm forward notify contact tell"),
        _words("message dm note reply chat text email mail"),
    ),
    "create": (
        _words("create add setup schedule arrange organize organise insert register compose draft"),
        (),
    ),
    "change": (
        _words(
            "update change modify edit adjust set reset rename correct fix amend replace move "
            "reschedule postpone shift"
        ),
        (),
    ),
    "remove": (
        _words("delete remove cancel erase drop clear discard trash unsubscribe revoke kick"),
        (),
    ),
    "share": (_words("share grant invite"), _words("access permission invitation")),
    "reserve": (
        _words("reserve reservation book booking"),
        _words("reservation booking table room stay seat ticket"),
    ),
    "append": (_words("append add write insert include"), ()),
    "publish": (_words("post publish upload"), _words("post page website")),
    "purchase": (_words("buy purchase order checkout"), _words("order product item cart")),
    "execute": (_words("run execute exec launch trigger invoke"), _words("command script job")),
    "read": (
        _words(
            "get read search find list check show look see fetch view display retrieve browse "
            "visit summarize summarise what which who whom whose when where why how"
        ),
        (),
    ),
}
"""The action families: each one's verbs (any of them names the action) and the nouns of
the object they imply (``pay`` implies money)."""

OBJECT_SYNONYMS: tuple[tuple[str, ...], ...] = tuple(
    _words(group)
    for group in (
        "transaction payment transfer",
        "message dm msg note",
        "email mail inbox",
        "event meeting appointment calendar reminder",
        "file document doc drive",
        "user member colleague person people employee",
        "webpage website page site web url",
        "hotel room stay",
        "restaurant table",
        "car rental",
    )
)
"""Words that name the same object (``payment`` names a ``transaction``)."""

GENERIC_WORDS: frozenset[str] = frozenset(
    _words(
        "by to for from in of on at with all given new info information detail data id ids "
        "item the a an my your"
    )
)
"""Words of a tool's name that name no object (``get_file_by_id``: file)."""

_VERBS = frozenset(v for verbs, _ in ACTION_FAMILIES.values() for v in verbs)
_WRITE_VERBS = _VERBS - frozenset(ACTION_FAMILIES["read"][0])
_NOUNS = frozenset(n for _, nouns in ACTION_FAMILIES.values() for n in nouns) | frozenset(
    w for group in OBJECT_SYNONYMS for w in group
)
_IRREGULAR = {
    "sent": "send", "paid": "pay", "made": "make", "wrote": "write", "written": "write",
    "gave": "give", "given": "give", "found": "find", "saw": "see", "seen": "see",
    "kept": "keep", "shared": "share", "e-mail": "email", "emails": "email",
}  # fmt: skip
_TOKEN = re.compile(r"[a-z][a-z-]*")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _base(word: str) -> str:
    """A word's base: a verb's (``sending`` → ``send``), else its singular."""
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if word in _VERBS:
        return word
    for ending in ("ing", "ed", "es", "s"):
        if word.endswith(ending) and len(word) > len(ending) + 3:
            rest = word[: -len(ending)]
            for candidate in (rest, rest + "e", rest[:-1] if rest[-1:] == rest[-2:-1] else rest):
                if candidate in _VERBS:
                    return candidate
    return stem(word)


def _tokens(text: str) -> list[str]:
    text = _CAMEL.sub(" ", text).replace("_", " ").lower()
    return [_base(t.strip("-")) for t in _TOKEN.findall(text) if t.strip("-")]


def user_words(texts: Iterable[str]) -> frozenset[str]:
    """The base words of the user's turns ("tell me" and "tell us" ask for a read)."""
    out: set[str] = set()
    for text in texts:
        tokens = _tokens(text)
        for i, w in enumerate(tokens):
            asks = w == "tell" and tokens[i + 1 : i + 2] in (["me"], ["us"])
            out.add("show" if asks else w)
    return frozenset(out)


def names_an_action(text: str) -> bool:
    """Whether ``text`` names an action (a family's verb, a question word aside)."""
    questions = {"what", "which", "who", "whom", "whose", "when", "where", "why", "how"}
    return bool((user_words([text]) & _VERBS) - questions)


@dataclass(frozen=True)
class Capability:
    """What a tool does, in words: its action's verbs and its object's words.

    Attributes:
        tool: The tool's name.
        action: Its action verb (``None``: none listed, and its name begins with an
            object's word).
        verbs: The verbs that name the action (of the families that hold it and fit its
            object, or the name's own first word); empty when ``action`` is ``None``.
        objects: The words that name its object (its name's other words, their synonyms
            and its families' nouns); empty when its name has no object word.
    """

    tool: str
    action: str | None
    verbs: frozenset[str]
    objects: frozenset[str]

    @property
    def reads(self) -> bool:
        """Whether its action is a read's (``get``, ``search``, ``list``…)."""
        return self.action in ACTION_FAMILIES["read"][0]

    def action_named(self, words: frozenset[str]) -> bool:
        """Whether ``words`` name the action.

        For a tool with no listed verb: its object and some action that is not a read.
        """
        if self.action is None:
            return bool(self.objects & words) and bool(_WRITE_VERBS & words)
        return bool(self.verbs & words)

    def object_named(self, words: frozenset[str]) -> bool:
        """Whether ``words`` name the object (always, for a tool with no object word)."""
        return not self.objects or bool(self.objects & words)


@functools.lru_cache(maxsize=1024)
def capability(name: str, description: str = "") -> Capability:
    """The :class:`Capability` of the tool ``name`` (see the module docstring)."""
    name_words = _tokens(name)
    first_sentence = re.split(r"(?<=[.!?])\s", description.strip(), maxsplit=1)[0]
    action = next((w for w in name_words if w in _VERBS), None)
    if action is None:
        action = next((w for w in _tokens(first_sentence) if w in _VERBS), None)
    own = None  # a verb no family lists: the name's first word, unless it names an object
    if action is None and name_words and name_words[0] not in _NOUNS | GENERIC_WORDS:
        own = action = name_words[0]
    nouns = [w for w in name_words if w != action and w not in GENERIC_WORDS and len(w) > 1]
    objects = set(nouns)
    for group in OBJECT_SYNONYMS:
        if objects & set(group):
            objects |= set(group)
    families = [f for f, (verbs, _) in ACTION_FAMILIES.items() if action in verbs]
    fitting = [f for f in families if objects & set(ACTION_FAMILIES[f][1])]
    chosen = fitting or families
    verbs = {v for f in chosen for v in ACTION_FAMILIES[f][0]} | ({own} if own else set())
    if objects:
        objects |= {n for f in chosen for n in ACTION_FAMILIES[f][1]}
    return Capability(name, action, frozenset(verbs), frozenset(objects))


@dataclass(frozen=True)
class Warrant:
    """What asked for one proposed call.

    Attributes:
        kind: ``"user"``, ``"chain"`` or ``"none"`` (see the module docstring).
        reason: Why, in words (for the decision log).
        sources: For ``chain``, the results of the warranted calls whose values it sends;
            for ``none``, the tool results that prompted it.
    """

    kind: WarrantKind
    reason: str
    sources: tuple[Source, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The warrant as JSON, for the decision log."""
        return {
            "kind": self.kind,
            "reason": self.reason,
            "sources": [s.to_dict() for s in self.sources],
            "rule_version": WARRANT_RULE_VERSION,
        }


class WarrantRule(BaseModel):
    """Which calls need a warrant: by the effect of their tool, less the tools allowed.

    In a task file, under ``trust``::

        warrant:
          effects: [write, irreversible]   # the default; [] needs none
          allow: [log_event]               # tools that need no warrant

    A call that needs one and has none (:class:`Warrant` ``none``) is not sent: the
    decision asks the user to confirm it, naming the tool result that prompted it, or
    refuses it, whichever the cost matrix makes cheaper.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    effects: tuple[Effect, ...] = ("write", "irreversible")
    """The effects whose calls need a ``user`` or ``chain`` warrant."""
    allow: tuple[str, ...] = ()
    """Tools that need no warrant, by name."""

    @field_validator("effects", mode="before")
    @classmethod
    def _known_effects(cls, value: Any) -> Any:
        values = (value,) if isinstance(value, str) else tuple(value or ())
        unknown = [v for v in values if v not in EFFECTS]
        if unknown:
            msg = (
                f"trust policy warrant.effects: unknown effect {unknown[0]!r}; an effect is "
                f"one of {', '.join(EFFECTS)}."
            )
            raise ValueError(msg)
        return tuple(dict.fromkeys(values))

    @field_validator("allow", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    def needs(self, tool: str, effect: str) -> bool:
        """Whether a call to ``tool``, of ``effect``, needs a warrant."""
        return effect in self.effects and tool not in self.allow


def prompted_by(
    cap: Capability, results: Mapping[Source, str], since: int | None
) -> tuple[Source, ...]:
    """The tool results that prompted an unwarranted call.

    Those after the user's last turn (``since``: its message index; ``None``: all) whose text
    names the tool, its action or its object; else the last of them.
    """
    recent = [s for s in results if since is None or (s.message or 0) > since]
    recent = recent or list(results)
    naming = [
        s
        for s in recent
        if cap.tool in results[s] or (cap.verbs | cap.objects) & frozenset(_tokens(results[s]))
    ]
    return tuple(naming or recent[-1:])
