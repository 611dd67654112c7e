"""``taskcal outcomes import``: attach true labels to logged decisions.

::

    taskcal outcomes import reviews.csv --log runs/decisions.jsonl

The file holds rows of ``id,label`` (a CSV with that header, or JSONL objects with those
keys). Every row is recorded or reported: unknown ids and labels outside the task are
listed, and the exit status is 1 if any row was rejected.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Annotated

import typer

from taskcal_agents._files import read_jsonl
from taskcal_agents.commands._common import consoles, fail
from taskcal_agents.errors import DataFileError, TaskCalError

__all__ = ["outcomes_import", "read_outcome_rows", "register"]


def read_outcome_rows(path: Path) -> list[tuple[str, str]]:
    """The ``(id, label)`` rows of a CSV (with an ``id,label`` header) or JSONL file.

    Raises:
        DataFileError: The file is missing, or a row lacks a string ``id`` or ``label``.
    """
    if not path.is_file():
        msg = "outcomes file not found."
        raise DataFileError(msg, path=str(path))
    rows: list[tuple[str, str]] = []
    if path.suffix.lower() == ".csv":
        with path.open(newline="", encoding="utf-8") as fh:
            items = [(i, r) for i, r in enumerate(csv.DictReader(fh), start=2)]
    else:
        items = list(read_jsonl(path))
    for line, row in items:
        decision_id = row.get("id") if isinstance(row, dict) else None
        label = row.get("label") if isinstance(row, dict) else None
        if not isinstance(decision_id, str) or not isinstance(label, str) or not decision_id:
            msg = f"each row needs a string 'id' and 'label', got {row!r}."
            raise DataFileError(msg, path=str(path), line=line)
        rows.append((decision_id, label))
    return rows


def outcomes_import(
    file: Annotated[Path, typer.Argument(help="CSV (id,label header) or JSONL of id, label.")],
    log: Annotated[Path, typer.Option(help="The decision log (.jsonl, .sqlite or .db).")],
) -> None:
    """Record the true labels of logged decisions; report unknown ids and bad labels."""
    from taskcal_agents.production import import_outcomes

    console, err = consoles()
    try:
        report = import_outcomes(log, read_outcome_rows(file))
    except (TaskCalError, OSError) as exc:
        raise fail(err, exc) from exc
    console.print(f"recorded {report.recorded} outcome(s) in {log}", highlight=False)
    for decision_id in report.unknown:
        err.print(f"unknown decision id: {decision_id}", highlight=False)
    for decision_id, label in report.bad_labels:
        err.print(f"label outside the task: {decision_id} {label!r}", highlight=False)
    if report.rejected:
        err.print(
            f"rejected {report.rejected} row(s): {len(report.unknown)} unknown id(s), "
            f"{len(report.bad_labels)} label(s) outside the task",
            highlight=False,
        )
        raise typer.Exit(code=1)


def register(app: typer.Typer) -> None:
    """Register ``outcomes import``."""
    outcomes_app = typer.Typer(help="Outcomes: the true labels of logged decisions.")
    outcomes_app.command("import")(outcomes_import)
    app.add_typer(outcomes_app, name="outcomes")
