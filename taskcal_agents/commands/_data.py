"""``taskcal data``: convert public data sets to dataset JSONL and check dataset files.

::

    taskcal data convert when2call --out data/when2call.jsonl
    taskcal data check data/when2call.jsonl --task when2call.yaml
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer

from taskcal_agents.commands._common import consoles, fail, load_task
from taskcal_agents.errors import ConfigurationError, TaskCalError

__all__ = ["data_check", "data_convert", "register"]


def data_convert(
    name: Annotated[
        str, typer.Argument(help="Converter: when2call, bfcl, simpleqa, nq-open, mmlu or stsb.")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Dataset JSONL to write.")],
    source: Annotated[
        Path | None,
        typer.Option(help="Source file/folder (default: its place in $TASKCAL_SHARED_DATA)."),
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Keep at most this many items.")] = None,
    seed: Annotated[int | None, typer.Option(help="Shuffle with this seed before --limit.")] = None,
    balanced: Annotated[
        bool,
        typer.Option(
            help="Select labels in turn (small slices cover every label) and write them "
            "interleaved: one item of each label, then the next of each, ..."
        ),
    ] = False,
    split: Annotated[
        str | None,
        typer.Option(
            help="MMLU split: dev, val or dev+val (default dev); BFCL: train, dev or test."
        ),
    ] = None,
    scale_min: Annotated[
        int | None,
        typer.Option(help="STS-B: lowest rating (0: scale 0-5; 1: 1-6, for tasks.rating(k=6))."),
    ] = None,
    abstain_cost: Annotated[
        float | None,
        typer.Option(help="MMLU task: add an 'abstain' action with this cost (wrong answer: 1)."),
    ] = None,
    task_out: Annotated[
        Path | None,
        typer.Option(help="Also write the data set's default task file (YAML/JSON) here."),
    ] = None,
) -> None:
    """Convert a public data set to the generic dataset JSONL format."""
    from taskcal_agents.datasets import convert, default_task, write_dataset

    console, err = consoles()
    options: dict[str, Any] = {"split": split} if split is not None else {}
    if scale_min is not None:
        options["scale_min"] = scale_min
    try:
        task_options = dict(options)
        if abstain_cost is not None:
            if name != "mmlu" or task_out is None:
                msg = (
                    "--abstain-cost sets the abstain action of the MMLU task file: it needs "
                    f"the mmlu converter and --task-out (got {name!r}, --task-out {task_out})."
                )
                raise ConfigurationError(msg)
            task_options["abstain_cost"] = abstain_cost
        task = default_task(name, **task_options) if task_out is not None else None
        items = convert(name, source, limit=limit, seed=seed, balanced=balanced, **options)
    except TaskCalError as exc:
        raise fail(err, exc) from exc
    count = write_dataset(items, out)
    if task is not None and task_out is not None:
        task.to_file(task_out)
        console.print(f"wrote task {task.name!r} to {task_out}")
    labels = Counter(i.label if i.label is not None else "(graded after sampling)" for i in items)
    console.print(
        f"wrote {count} items to {out}: " + ", ".join(f"{k} {v}" for k, v in labels.items())
    )


def data_check(
    path: Annotated[Path, typer.Argument(help="Dataset JSONL file.")],
    task: Annotated[
        Path | None, typer.Option(help="Task file whose labels the data must use.")
    ] = None,
) -> None:
    """Validate a dataset file (and its labels against a task) and print label counts."""
    from taskcal_agents.datasets import read_dataset

    console, err = consoles()
    try:
        labels = load_task(task).labels if task is not None else None
        items = read_dataset(path, labels=labels, allow_unlabelled=True)
    except TaskCalError as exc:
        raise fail(err, exc) from exc
    counts = Counter(i.label if i.label is not None else "(graded)" for i in items)
    with_tools = sum(bool(i.tools) for i in items)
    console.print(
        f"{path}: {len(items)} items ({with_tools} with tools); labels: "
        + ", ".join(f"{k} {v}" for k, v in counts.most_common())
    )


def register(app: typer.Typer) -> None:
    """Register ``data convert`` and ``data check``."""
    data_app = typer.Typer(help="Dataset files: convert public data sets, check files.")
    data_app.command("convert")(data_convert)
    data_app.command("check")(data_check)
    app.add_typer(data_app, name="data")
