"""A tool-decision corpus built from the data the PyPI package ``bfcl-eval`` ships.

BFCL (the Berkeley Function Calling Leaderboard, Apache-2.0) pairs requests with the tools
that serve them and the calls that would be right. Three of its categories are read —
``simple_python``, ``multiple`` and ``live_multiple``
(:data:`~taskcal_agents.datasets._bfcl_source.BFCL_CATEGORIES`) — and never the ones kept
for independent evaluation
(:data:`~taskcal_agents.datasets._bfcl_source.RESERVED_CATEGORIES`). Each request becomes
one item of one label:

``tool_call``
    the request as it is, with its own tools (``meta["possible_answer"]``: BFCL's accepted
    calls);
``request_for_info``
    the request with the phrase that carries one required argument's value removed
    ("... in Paris", "... for 3 nights"), as When2Call built its asks; the argument's name
    is ``meta["held_out_param"]``. A request qualifies only when the value appears once,
    inside a prepositional phrase or a short sentence of its own, and the rest still reads
    as a sentence (:func:`~taskcal_agents.datasets._bfcl_asks.delete_argument`);
``cannot_answer``
    the request with the tools of another request that are closest to it in words (TF-IDF)
    yet cannot serve it: no tool whose name shares a content word with the right tool's,
    no tool whose text is close to the right tool's, no tool that answers anything (a web
    search, a question-answering model); one tool set serves at most
    :data:`TOOL_SET_USES` no-fits (hard negatives,
    :func:`~taskcal_agents.datasets._bfcl_negatives.hard_negatives`).

The requests are de-duplicated on their text and split once by :data:`CORPUS_SEED` into
``train``, ``dev`` and ``test`` (``meta["split"]``), near-duplicates together and each
category in the same shares. Within each split and category each request plays one role at
most: the asks are dealt first, in a seeded order, to the requests with a qualifying phrase,
then calls and no-fits in turn (a no-fit takes tools of its own split), an item whose words
repeat another's is dropped, and each label is cut to the least frequent one's count. Within
a split the labels are interleaved, so any prefix is balanced. Each split then ends with its
``near_miss`` no-fits (the request's own service's other tools) and as many ``generic_name``
calls (the right tool under a generic name), pair by pair
(:mod:`~taskcal_agents.datasets._bfcl_hard`): a request's words shared with the tools, or not,
say nothing of the label.

The source is the ``bfcl_eval`` wheel itself (``pip download --no-deps
bfcl-eval==2026.3.23``; its bytes are read, never installed or imported, and a pinned
version's SHA-256 is checked) or an unpacked ``bfcl_eval/data`` folder.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from taskcal_agents.datasets._bfcl_asks import delete_argument
from taskcal_agents.datasets._bfcl_hard import hard_items
from taskcal_agents.datasets._bfcl_negatives import hard_negatives, tool_text
from taskcal_agents.datasets._bfcl_source import BFCL_CATEGORIES, Request, read_requests
from taskcal_agents.datasets._format import DatasetItem
from taskcal_agents.datasets._tools import bfcl_tool
from taskcal_agents.errors import ConfigurationError

__all__ = ["CORPUS_SEED", "SPLITS", "build_corpus", "convert_bfcl"]

CORPUS_SEED = 20261203
"""The seed of the role deal and of the split, fixed before any fitting."""

SPLITS = ("train", "dev", "test")
SPLIT_SHARES = {"test": 0.36, "dev": 0.16}
"""Shares of each label's items in the locked test split and the development split; the
rest is ``train``."""


def _tools(functions: Sequence[Mapping[str, Any]], source: str) -> list[dict[str, Any]]:
    return [bfcl_tool(dict(f), path=Path(source), line=0) for f in functions]


TOOL_SET_USES = 3
"""The most no-fit items one tool set (the same tool names) is offered in."""

NEAR_DUPLICATE = 0.8
"""Requests whose words are this close (TF-IDF cosine) share a split."""


def _near_duplicate_groups(requests: Sequence[Request]) -> list[int]:
    """A group id per request: near-duplicates (:data:`NEAR_DUPLICATE`) share one."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectors = TfidfVectorizer(sublinear_tf=True).fit_transform([r.question for r in requests])
    close = (vectors @ vectors.T).toarray() >= NEAR_DUPLICATE
    parent = list(range(len(requests)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in zip(*np.nonzero(np.triu(close, 1)), strict=True):
        parent[root(int(a))] = root(int(b))
    return [root(i) for i in range(len(requests))]


def _assign_splits(requests: Sequence[Request], rng: random.Random) -> list[str]:
    """A split per request: whole near-duplicate groups, in shares per category.

    A group goes whole to one split, even when its members are of several categories.
    """
    groups = _near_duplicate_groups(requests)
    everyone: dict[int, list[int]] = {}
    for i, g in enumerate(groups):
        everyone.setdefault(g, []).append(i)
    split_of = [""] * len(requests)
    targets = {"test": SPLIT_SHARES["test"], "dev": SPLIT_SHARES["dev"]}
    targets["train"] = 1.0 - sum(targets.values())
    for category in BFCL_CATEGORIES:
        keys = sorted({groups[i] for i, r in enumerate(requests) if r.category == category})
        rng.shuffle(keys)
        total = sum(r.category == category for r in requests)
        count = dict.fromkeys(SPLITS, 0)
        for i, r in enumerate(requests):
            if r.category == category and split_of[i]:  # placed with an earlier category
                count[split_of[i]] += 1
        for key in keys:  # each group to the split furthest below its share
            if split_of[everyone[key][0]]:
                continue
            split = max(SPLITS, key=lambda s: targets[s] * total - count[s])
            for i in everyone[key]:
                split_of[i] = split
                count[split] += requests[i].category == category
    return split_of


def build_corpus(source: Path, seed: int = CORPUS_SEED) -> list[DatasetItem]:
    """The whole corpus: every item with ``meta["split"]``, splits in :data:`SPLITS` order.

    Requests are split first, near-duplicates together and each category in the same
    shares; then, within each split and category, the roles are dealt (asks first to the
    requests with a removable phrase, then calls and no-fits in turn, a no-fit taking the
    closest unused tool set of its own split), and each label is cut to the least
    frequent one's count, so every split holds each label alike within each category.
    """
    requests = read_requests(source)
    seen: set[str] = set()
    unique = []
    for r in requests:
        key = re.sub(r"\W+", " ", r.question.lower()).strip()
        if key not in seen:
            seen.add(key)
            unique.append(r)
    rng = random.Random(seed)
    for r in unique:
        r.text = tool_text(r.functions)
        function = next(f for f in r.functions if f.get("name") == r.function)
        r.deletion = delete_argument(r.question, function, r.answer[r.function], rng)
    split_of = _assign_splits(unique, rng)
    negatives = hard_negatives(unique, split_of)
    order = list(range(len(unique)))
    rng.shuffle(order)
    labels = ("tool_call", "request_for_info", "cannot_answer")
    used_sets: Counter[str] = Counter()
    texts: set[str] = set()
    items: list[DatasetItem] = []
    for split in SPLITS:
        per_label: dict[str, list[DatasetItem]] = {k: [] for k in labels}
        for category in BFCL_CATEGORIES:
            mine = [i for i in order if unique[i].category == category and split_of[i] == split]
            eligible = [i for i in mine if unique[i].deletion is not None]
            size = min(len(eligible), len(mine) // 3)
            asks = eligible[:size]
            rest = [i for i in mine if i not in set(asks)]
            roles = [(i, "request_for_info") for i in asks]
            roles += [(i, labels[0] if n % 2 == 0 else labels[2]) for n, i in enumerate(rest)]
            made: dict[str, list[DatasetItem]] = {k: [] for k in labels}
            for i, label in roles:
                item = _item(unique, i, label, negatives[i], split_of, used_sets, source)
                if item is None:
                    continue
                text = re.sub(r"\W+", " ", item.messages[0]["content"].lower()).strip()
                if text in texts:  # the same words as an item already made
                    _release(item, used_sets)
                    continue
                texts.add(text)
                made[label].append(item)
            least = min(len(v) for v in made.values())
            for label in labels:
                per_label[label] += made[label][:least]
                for item in made[label][least:]:  # cut: free its words and its tool set
                    texts.discard(re.sub(r"\W+", " ", item.messages[0]["content"].lower()).strip())
                    _release(item, used_sets)
        for k in range(max(len(v) for v in per_label.values())):
            for label in labels:
                if k < len(per_label[label]):
                    item = per_label[label][k]
                    items.append(item.model_copy(update={"meta": {**item.meta, "split": split}}))
    # Then, in each split after its first items, the near misses and the generic names.
    hard = hard_items(unique, split_of, items, _tools, str(source), seed)
    return [
        item
        for split in SPLITS
        for item in [*(i for i in items if i.meta["split"] == split), *hard.get(split, [])]
    ]


def _tool_set_key(names: Iterable[str]) -> str:
    return json.dumps(sorted(names))


def _release(item: DatasetItem, used_sets: Counter[str]) -> None:
    """Give back the tool-set use of a no-fit item that is not kept."""
    if item.label == "cannot_answer":
        used_sets[_tool_set_key(t["function"]["name"] for t in item.tools)] -= 1


def _item(
    unique: Sequence[Request],
    i: int,
    label: str,
    negatives: Sequence[tuple[int, float]],
    split_of: Sequence[str],
    used_sets: Counter[str],
    source: Path,
) -> DatasetItem | None:
    """Request *i* in the role *label*, or ``None`` when it cannot play it."""
    r = unique[i]
    meta: dict[str, Any] = {"source": "bfcl", "bfcl_id": r.id, "category": r.category}
    if label == "tool_call":
        question, functions = r.question, r.functions
        meta["possible_answer"] = r.answer
        meta["target_tool"] = r.function
    elif label == "request_for_info":
        assert r.deletion is not None
        question, functions = r.deletion[0], r.functions
        meta.update(held_out_param=r.deletion[1], removed=r.deletion[2], target_tool=r.function)
    else:
        for j, _ in negatives:
            key = _tool_set_key(str(f.get("name")) for f in unique[j].functions)
            if split_of[j] == split_of[i] and used_sets[key] < TOOL_SET_USES:
                used_sets[key] += 1
                break
        else:  # no unused hard negative of its split left: the request plays no role
            return None
        question, functions = r.question, unique[j].functions
        meta.update(tools_from=unique[j].id, right_tool=r.function)
    return DatasetItem(
        id=f"bfcl-{label}-{r.id}",
        messages=[{"role": "user", "content": question}],
        tools=_tools(functions, str(source)),
        label=label,
        meta=meta,
    )


def convert_bfcl(source: Path, split: str | None = None) -> list[DatasetItem]:
    """The BFCL tool-decision corpus (see the module docstring), or one split of it.

    Args:
        source: The ``bfcl_eval`` wheel, a folder holding it, or an unpacked
            ``bfcl_eval/data`` folder.
        split: ``train``, ``dev`` or ``test``; ``None`` keeps all (each item's
            ``meta["split"]`` says which).

    Raises:
        ConfigurationError: Unknown split.
        DataFileError: The source is missing, unpinned, changed or malformed.
    """
    if split is not None and split not in SPLITS:
        msg = f"split must be one of {list(SPLITS)} or None, got {split!r}."
        raise ConfigurationError(msg)
    items = build_corpus(source)
    return [i for i in items if split is None or i.meta["split"] == split]
