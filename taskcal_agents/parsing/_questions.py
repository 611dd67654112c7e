"""Question wording of argument grounding: ask the user for what a call lacks.

:func:`question_for` builds the clarifying question from the tool's schema, with no model
call: the tool's description gives the purpose, the parameter names the words.
:func:`mentions` tells whether a text (a sampled clarifying question) names an argument.
:func:`confirmation_question` asks the user to confirm a call whose values come from sources
a trust policy does not trust; :func:`is_affirmative` reads the user's yes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from typing import Any

from langchain_core.messages import AIMessage

from taskcal_agents.parsing._answer_tokens import answer_tokens
from taskcal_agents.parsing._evidence import STOPWORDS, stem


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
    words = {stem(w) for w in _phrase_of(argument).split() if w not in STOPWORDS}
    found = {stem(t) for t in answer_tokens(text)}
    return bool(words & found)


CONFIRM_CLOSE = "Should I make this call? I will not unless you confirm."
"""How a confirmation question ends (:func:`confirmation_question`)."""

CONFIRM_METADATA_KEY = "taskcal_confirm"
"""The ``response_metadata`` key of a confirmation question the library asked
(:func:`confirmation_message`, :func:`approval_message`): its first call, ``{"name",
"args"}``, and all of its calls under ``"calls"``. A user's plain yes right after it
confirms those calls (:class:`~taskcal_agents.parsing.GroundingContext`)."""

_AFFIRMATIVE = re.compile(
    r"^\s*(?:yes|yeah|yep|yup|y|ok|okay|sure|confirm(?:ed)?|go ahead|do it|please do|proceed|"
    r"approved?|correct)\b[\s.!,]*(?:(?:please|thanks|thank you|do it|do that|go ahead|"
    r"send it|go for it|proceed|yes|sure|that's right|sounds good)\b[\s.!,]*){0,3}$",
    re.IGNORECASE,
)


def is_affirmative(text: str) -> bool:
    """Whether a user's reply is a plain yes ("yes", "ok, go ahead", "Yes, send it.").

    A yes followed by nothing but a few words of assent; a reply that adds anything ("yes,
    but to Rome") is not one.
    """
    return bool(_AFFIRMATIVE.match(text))


def confirmation_question(call: Any) -> str:
    """Ask the user to confirm a call whose values come from sources the policy does not trust.

    Args:
        call: A :class:`~taskcal_agents.parsing._grounding.CallGrounding` with violations.

    Returns:
        "The result of get_webpage gives the recipient 'US13…' for send_money(…). Should I
        make this call? I will not unless you confirm."; for a call no warrant covers,
        "Your request does not ask for delete_file(file_id='13'), which follows the result
        of get_webpage. Should I make this call? I will not unless you confirm."
    """
    by_source: dict[str, list[str]] = {}
    unwarranted = None
    for v in call.violations:
        if not v.argument:  # the call itself has no warrant: name the result it follows
            unwarranted = v
            continue
        value = repr(v.value) if isinstance(v.value, str) else json.dumps(v.value, default=str)
        by_source.setdefault(v.describe(), []).append(f"the {_phrase_of(v.argument)} {value}")
    parts = [f"{source} gives {' and '.join(what)}" for source, what in by_source.items()]
    text = _call_text(call)  # the call as it is sent, as the mark confirms it
    if unwarranted is not None:
        follows = f", which follows {unwarranted.describe()}" if unwarranted.sources else ""
        lead = f"Your request does not ask for {text}{follows}"
        detail = f" ({'; '.join(parts)})" if parts else ""
        return f"{lead}{detail}. {CONFIRM_CLOSE}"
    lead = "; ".join(parts) or "this call needs your confirmation"
    return f"{lead[:1].upper()}{lead[1:]} for {text}. {CONFIRM_CLOSE}"


def _sent(call: Any) -> dict[str, Any]:
    dropped = set(call.dropped)
    return {"name": call.name, "args": {k: v for k, v in call.args.items() if k not in dropped}}


def _mark(calls: Sequence[Any]) -> dict[str, Any]:
    """The metadata mark of a confirmation: its first call, and every call under ``calls``."""
    sent = [_sent(c) for c in calls]
    return {**sent[0], "calls": sent}


def confirmation_message(call: Any) -> AIMessage:
    """The confirmation question as an ``AIMessage`` that names its call in its metadata.

    Only this mark (:data:`CONFIRM_METADATA_KEY`), which a model's or a tool's text cannot
    set, lets a user's yes confirm the call.
    """
    return AIMessage(
        content=confirmation_question(call), response_metadata={CONFIRM_METADATA_KEY: _mark([call])}
    )


def _call_text(call: Any) -> str:
    sent = _sent(call)
    args = ", ".join(f"{k}={v!r}" for k, v in sent["args"].items())
    return f"{call.name}({args})"


def approval_question(calls: Sequence[Any]) -> str:
    """Ask the user to approve the exact call(s) the decision would send.

    Args:
        calls: The calls (:class:`~taskcal_agents.parsing._grounding.CallGrounding`), as sent.

    Returns:
        "I can call get_weather(city='Paris') (Get the current weather for a city). Shall
        I?"
    """
    parts = []
    for call in calls:
        description = (call.description or "").strip().split("\n")[0].rstrip(".")
        parts.append(_call_text(call) + (f" ({description})" if description else ""))
    return f"I can call {' and '.join(parts)}. Shall I?"


def approval_message(calls: Sequence[Any]) -> AIMessage:
    """The approval question as an ``AIMessage`` marked like :func:`confirmation_message`.

    A user's plain yes right after it sends exactly these calls.
    """
    if not calls:
        msg = "approval_message needs at least one call to approve."
        raise ValueError(msg)
    return AIMessage(
        content=approval_question(calls), response_metadata={CONFIRM_METADATA_KEY: _mark(calls)}
    )
