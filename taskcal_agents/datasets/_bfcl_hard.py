"""Items that break "few shared words means no tool fits": near misses and generic names.

The corpus's first no-fit items pair a request with *other requests'* tools, which share few
of its words; its right calls mostly have tools named for what they do. A calibrator reading
the request's lexical fit to the tools learns that little overlap means no tool fits, and
real tools often have generic names (``run_command``, ``record``). Two more kinds of item,
built by rules written before any split was read:

``near_miss`` (label ``cannot_answer``)
    The request with its *own* BFCL tool set less the right tool(s): BFCL's distractors,
    the same service's other capabilities. Only distractors that cannot stand in for the
    right tool are kept, as :func:`~taskcal_agents.datasets._bfcl_negatives.hard_negatives`
    keeps other requests' tools: no name sharing a content word with the right tool's,
    no text within :data:`~taskcal_agents.datasets._bfcl_negatives.NEGATIVE_SIMILARITY_MAX`
    of the right tool's, no tool that answers anything. The item is made only when the
    request's lexical fit to what is kept
    (:func:`~taskcal_agents.parsing._relevance.lexical_fit`, the runtime's feature) is at
    least the lower quartile of its split's ``tool_call`` items': it shares words with the
    request as three right calls in four do.
``generic_name`` (label ``tool_call``)
    A request with a single offered tool, offered under a generic name
    (:data:`GENERIC_NAMES`, the first in a seeded order none of whose words the request
    holds), its description and parameters unchanged; BFCL's accepted calls are renamed
    alike.

Each request plays at most one of these roles, in its own split (the split the corpus gave
it), in a seeded order; a split takes as many ``generic_name`` items as it has
``near_miss`` ones, so its calls and no-fits stay balanced. The items follow the split's
first items, which keep their order: a prefix sampled before these existed stays a prefix.
"""

from __future__ import annotations

import random
import re
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from taskcal_agents.datasets._bfcl_negatives import (
    NEGATIVE_SIMILARITY_MAX,
    _generic,
    _name_words,
    tool_text,
)
from taskcal_agents.datasets._bfcl_source import Request
from taskcal_agents.datasets._format import DatasetItem
from taskcal_agents.parsing import lexical_fit

__all__ = ["GENERIC_NAMES", "hard_items"]

GENERIC_NAMES = ("execute", "run", "record", "process", "answer", "handle", "perform", "submit")
"""The generic tool names of ``generic_name`` items (the held-out failures' pattern)."""


def _kept_distractors(r: Request, vectorizer: Any) -> list[dict[str, Any]]:
    right = set(r.answer)
    rights = [f for f in r.functions if f.get("name") in right]
    names = set().union(*(_name_words(str(f.get("name", ""))) for f in rights))
    right_vector = vectorizer.transform([tool_text(rights)])
    kept = []
    for f in r.functions:
        name = str(f.get("name", ""))
        if name in right or names & _name_words(name) or _generic(name):
            continue
        close = float((right_vector @ vectorizer.transform([tool_text([f])]).T).toarray()[0, 0])
        if close < NEGATIVE_SIMILARITY_MAX:
            kept.append(f)
    return kept


def _generic_name(question: str, rng: random.Random) -> str | None:
    words = set(re.findall(r"[a-z]+", question.lower()))
    order = list(GENERIC_NAMES)
    rng.shuffle(order)
    return next((n for n in order if not set(n.split("_")) & words), None)


def _renamed(function: Mapping[str, Any], name: str) -> dict[str, Any]:
    return {**function, "name": name}


def hard_items(
    requests: Sequence[Request],
    split_of: Sequence[str],
    made: Sequence[DatasetItem],
    tools: Any,
    source: str,
    seed: int,
) -> dict[str, list[DatasetItem]]:
    """The ``near_miss`` and ``generic_name`` items of each split (see the module docstring).

    Args:
        requests: The corpus's de-duplicated requests.
        split_of: Each request's split.
        made: The corpus's first items (the lower quartile of each split's calls' lexical fit).
        tools: ``_tools(functions, source)``: BFCL functions as the items' OpenAI tools.
        source: The source path, as the items record it.
        seed: The corpus seed.
    """
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer(stop_words="english", sublinear_tf=True, min_df=1)
    vectorizer.fit([tool_text(r.functions) for r in requests] + [r.question for r in requests])
    rng = random.Random(f"{seed}-hard")
    order = list(range(len(requests)))
    rng.shuffle(order)
    out: dict[str, list[DatasetItem]] = {}
    for split in dict.fromkeys(split_of):
        calls = [
            lexical_fit(i.messages[0]["content"], i.tools)
            for i in made
            if i.meta.get("split") == split and i.label == "tool_call"
        ]
        bar = statistics.quantiles(calls, n=4)[0] if len(calls) > 1 else 0.0
        mine = [i for i in order if split_of[i] == split]
        near: list[DatasetItem] = []
        used: set[int] = set()
        for i in mine:
            r = requests[i]
            if len(r.functions) < 2:
                continue
            kept = _kept_distractors(r, vectorizer)
            offered = tools(kept, source) if kept else []
            if not kept or lexical_fit(r.question, offered) < bar:
                continue
            used.add(i)
            near.append(DatasetItem(
                id=f"bfcl-cannot_answer-near-{r.id}",
                messages=[{"role": "user", "content": r.question}],
                tools=offered, label="cannot_answer",
                meta={"source": "bfcl", "bfcl_id": r.id, "category": r.category,
                      "kind": "near_miss", "right_tool": r.function, "split": split},
            ))  # fmt: skip
        generic: list[DatasetItem] = []
        for i in mine:
            if len(generic) == len(near):
                break
            r = requests[i]
            if i in used or len(r.functions) != 1:
                continue
            name = _generic_name(r.question, rng)
            if name is None:
                continue
            generic.append(DatasetItem(
                id=f"bfcl-tool_call-generic-{r.id}",
                messages=[{"role": "user", "content": r.question}],
                tools=tools([_renamed(r.functions[0], name)], source), label="tool_call",
                meta={"source": "bfcl", "bfcl_id": r.id, "category": r.category,
                      "kind": "generic_name", "original_tool": r.function,
                      "possible_answer": {name: r.answer[r.function]}, "target_tool": name,
                      "split": split},
            ))  # fmt: skip
        near = near[: len(generic)]
        out[split] = [item for pair in zip(near, generic, strict=True) for item in pair]
    return out
