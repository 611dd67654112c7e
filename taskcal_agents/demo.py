"""The built-in demonstration: calibrate, then decide, on 36 tool-use requests.

Everything ``taskcal demo`` does, as functions: the task (When2Call's cost matrix), the
built-in requests (written for this library: each with its tools and its true label), and
:func:`run_demo`, which samples them through an OpenAI-compatible server into a resumable
samples file, compares decoders with cross-fitted calibration, and decides a few requests
with a calibrator fitted on the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from taskcal_agents.datasets import DatasetItem, read_dataset
from taskcal_agents.decision import Decision, decide_from_messages
from taskcal_agents.task import Task
from taskcal_agents.tasks import tool_decision

__all__ = [
    "DEMO_COST",
    "DEMO_PROMPT",
    "DemoResult",
    "demo_items",
    "demo_task",
    "run_demo",
]

DEMO_COST: list[list[float]] = [[0, 1, 2], [4, 0, 2], [4, 1, 0]]
"""Row = truth, column = action, order tool_call, request_for_info, cannot_answer: a wrong
tool call costs 4, a needless question 1, a wrong abstention 2."""

DEMO_PROMPT = (
    "You are an assistant with tools. If a tool fits the request and every required argument "
    "is given, call the tool. If a tool fits but a required argument is missing, ask the user "
    "a short question for it. If no tool can do what the user wants, say that you cannot help "
    "with that."
)
"""The system prompt that elicits the decision."""


def demo_task() -> Task:
    """The demo's task: tool call / ask / abstain with :data:`DEMO_COST`."""
    return tool_decision(cost=DEMO_COST, name="demo_tool_use", prompt=DEMO_PROMPT)


def demo_items() -> list[DatasetItem]:
    """The 36 built-in requests (12 per label), with their tools and true labels."""
    source = resources.files("taskcal_agents") / "data" / "demo_tool_requests.jsonl"
    with resources.as_file(source) as path:
        return read_dataset(path, labels=demo_task().labels)


@dataclass
class DemoResult:
    """What :func:`run_demo` produced.

    Attributes:
        samples_path: The samples file (rerunning resumes it).
        evaluation: The JSON-able decoder comparison (``taskcal.evaluation`` format).
        decisions: ``(request text, true label, decision)`` for the shown requests.
    """

    samples_path: Path
    evaluation: dict[str, Any]
    decisions: list[tuple[str, str, Decision]]


def run_demo(
    sampler: Any,
    out_dir: Path,
    *,
    model: str,
    base_url: str,
    n: int = 16,
    folds: int = 5,
    permutations: int = 200,
    show: int = 4,
    concurrency: int = 4,
    on_record: Callable[[dict[str, Any] | None], None] | None = None,
    progress: Callable[[int], None] | None = None,
) -> DemoResult:
    """Sample, cross-fit calibrators, evaluate decoders, and decide a few requests.

    Args:
        sampler: An :class:`~taskcal_agents.sampling.openai.OpenAISampler` (or any object
            with its ``sample`` method).
        out_dir: Where the samples and evaluation files go.
        model: The served model name (recorded in the samples file).
        base_url: The server URL (recorded in the samples file).
        n: Completions per request.
        folds: Cross-fitting folds.
        permutations: Label shuffles of the permutation test.
        show: How many requests to decide at the end (each with a calibrator fitted on
            the other requests).
        concurrency: Requests sampled at once.
        on_record: Called after each sampled request (for a progress bar).
        progress: Called with step counts during evaluation (for a progress bar).

    Returns:
        The result.

    Raises:
        SamplingError: Sampling failed for some request (a rerun resumes).
    """
    from taskcal_agents.errors import SamplingError
    from taskcal_agents.workflow import (
        SampleSettings,
        SamplesStore,
        calibrator_inputs,
        evaluate_arrays,
        evaluation_to_dict,
        load_eval_arrays,
        message_from_dict,
        read_samples,
        run_sampling,
        sample_header,
        write_json,
    )
    from taskcal_agents.workflow._evaluate import default_factory

    make_dirichlet = default_factory("dirichlet")
    task = demo_task()
    items = demo_items()
    out_dir.mkdir(parents=True, exist_ok=True)
    samples_path = out_dir / f"demo.n{n}.samples.jsonl"
    settings = SampleSettings(
        n=n, temperature=1.0, greedy=True, max_tokens=64, model=model, base_url=base_url
    )
    with SamplesStore.open(samples_path, sample_header(task, settings, "builtin:demo")) as store:
        report = run_sampling(
            task, items, sampler, store, settings, concurrency=concurrency, on_record=on_record
        )
    if report.failures:
        item_id, message = report.failures[0]
        msg = (
            f"taskcal demo: {len(report.failures)} of {report.total} requests failed to sample "
            f"(first: {item_id}: {message}); run the demo again to resume."
        )
        raise SamplingError(msg)

    task, _, data = load_eval_arrays(samples_path, task)
    evaluation = evaluate_arrays(
        data, n_folds=folds, seed=0, n_permutations=permutations, progress=progress
    )
    evaluation_dict = evaluation_to_dict(
        evaluation,
        data,
        task={
            "name": task.name,
            "labels": task.labels,
            "actions": task.action_list,
            "cost": DEMO_COST,
        },
        meta={"samples": str(samples_path), "n": n, "model": model},
        include_items=False,
    )

    # Decide a few requests, one per label first, each with the workflow's Dirichlet map
    # fitted on the other served requests (those with a usable sample).
    records = read_samples(samples_path).records
    shown: list[DatasetItem] = []
    for label in task.labels:
        shown += [i for i in items if i.label == label][: max(1, show // len(task.labels))]
    shown = shown[:show]
    decisions: list[tuple[str, str, Decision]] = []
    index = {item_id: row for row, item_id in enumerate(data.ids)}
    X, make_dirichlet, _ = calibrator_inputs(data, make_dirichlet)
    for item in shown:
        keep = [row for item_id, row in index.items() if item_id != item.id and data.served[row]]
        calibrator = make_dirichlet().fit(X[keep], data.y[keep])
        messages = [message_from_dict(m) for m in records[item.id]["samples"]]
        decision = decide_from_messages(task, messages, calibrator=calibrator)
        decisions.append((str(item.messages[-1]["content"]), str(item.label), decision))
    write_json(evaluation_dict, out_dir / "demo.evaluation.json")
    return DemoResult(samples_path=samples_path, evaluation=evaluation_dict, decisions=decisions)
