"""Question wording of argument grounding: ask the user for what a call lacks.

:func:`question_for` builds the clarifying question from the tool's schema, with no model
call: the tool's description gives the purpose, the parameter names the words.
:func:`mentions` tells whether a text (a sampled clarifying question) names an argument.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

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
