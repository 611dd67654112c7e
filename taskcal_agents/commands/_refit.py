"""``taskcal refit``: refit a calibrator on the decision log; promote it only if not worse.

::

    taskcal refit --log runs/decisions.jsonl --artefact runs/cal.json -o runs/cal.json \
        --half-life 14

The labelled, served decisions of the artefact's task are split in time: the most recent
``--holdout`` fraction compares the old and the refitted map (same calibrator name and
parameters, or ``--calibrator``), the rest trains it (recency weights with
``--half-life``). Both maps decide the holdout through the runtime's path and the new
one is promoted iff its NLL is lower (``mean(new − old NLL) + z · paired SE < 0``) and
its cost is not shown higher (``mean(new − old cost) − z · paired SE <= margin``; see
:mod:`taskcal_agents.production._refit`). Only a promoted artefact is written, atomically
(``-o`` may be the old artefact's path: front doors with ``reload_artefact=True`` pick
the replacement up at their next decision).

Exit status: 0 promoted (NEW written), 3 kept the old artefact (nothing written: too few
labelled decisions, a failed fit, or the new map not shown better or shown costlier), 2 a usage or
data error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from taskcal_agents.commands._common import consoles, fail, load_task
from taskcal_agents.errors import TaskCalError

__all__ = ["KEPT_EXIT_CODE", "refit", "register"]

KEPT_EXIT_CODE = 3
"""The exit status when the old artefact is kept (nothing written)."""


def _fmt(value: float | None, spec: str = ".4f") -> str:
    return "—" if value is None else format(value, spec)


def refit(
    log: Annotated[Path, typer.Option(help="The decision log (.jsonl, .sqlite or .db).")],
    artefact: Annotated[Path, typer.Option(help="The calibrator artefact in force (OLD).")],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Where to write NEW (only when promoted).")
    ],
    half_life: Annotated[
        float | None,
        typer.Option(help="Recency half-life of the training weights, in days (default: none)."),
    ] = None,
    holdout: Annotated[
        float, typer.Option(help="The most recent fraction held out for the comparison.")
    ] = 0.3,
    z: Annotated[
        float,
        typer.Option(
            help="Promote iff mean(new - old NLL) + z * paired SE < 0 and mean(new - old cost) "
            "- z * paired SE <= margin (1.645: one-sided 95% bounds)."
        ),
    ] = 1.645,
    margin: Annotated[
        float,
        typer.Option(help="Cost increase per decision the cost guard tolerates (cost units)."),
    ] = 0.0,
    calibrator: Annotated[
        str | None,
        typer.Option(help="Calibrator spec to fit instead of OLD's name and parameters."),
    ] = None,
    task: Annotated[
        Path | None,
        typer.Option(help="Task file, for an artefact that records no task_spec."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the fit.")] = 0,
) -> None:
    """Refit OLD on the logged labelled decisions; write NEW only if it is not worse.

    Exit status: 0 promoted (NEW written), 3 kept OLD (nothing written), 2 usage or data
    error.
    """
    from rich.table import Table

    from taskcal_agents.decision import CalibratorArtefact
    from taskcal_agents.production import open_decision_log, refit_from_records

    console, err = consoles()
    try:
        old = CalibratorArtefact.load(artefact)
        records = list(open_decision_log(log).read())
        result = refit_from_records(
            records, old, task=None if task is None else load_task(task),
            half_life_days=half_life, holdout=holdout, z=z, margin=margin,
            calibrator=calibrator, seed=seed, source=str(log),
        )  # fmt: skip
    except (TaskCalError, OSError) as exc:
        raise fail(err, exc) from exc
    except Exception as exc:  # the documented statuses are 0, 3 and 2: never a bare 1
        raise fail(err, RuntimeError(f"{type(exc).__name__}: {exc}")) from exc
    console.print(
        f"{result.n_records} records: {result.n_other_task} of another task, "
        f"{result.n_unlabelled} unlabelled, {result.n_unserved} unserved (fallback); "
        f"{result.n_train} train, {result.n_holdout} holdout "
        f"({result.n_other_artefact} logged under another artefact)",
        highlight=False,
    )
    if result.cost_diff is not None:
        table = Table(title=f"holdout ({result.n_holdout} most recent decisions)")
        for column in ("", "old", "new", "new − old ± paired SE"):
            table.add_column(column, justify="right")
        table.add_row(
            "mean cost", _fmt(result.old_cost), _fmt(result.new_cost),
            f"{_fmt(result.cost_diff, '+.4f')} ± {_fmt(result.cost_diff_se)}",
        )  # fmt: skip
        table.add_row(
            "NLL", _fmt(result.old_nll), _fmt(result.new_nll),
            f"{_fmt(result.nll_diff, '+.4f')} ± {_fmt(result.nll_diff_se)}",
        )  # fmt: skip
        console.print(table)
    if not result.promoted or result.artefact is None:
        console.print(result.reason, highlight=False)
        raise typer.Exit(code=KEPT_EXIT_CODE)
    try:
        path = result.artefact.save(output)
    except (TaskCalError, OSError) as exc:
        raise fail(err, exc) from exc
    console.print(f"{result.reason} Wrote {path}", highlight=False)


def register(app: typer.Typer) -> None:
    """Register ``refit``."""
    app.command("refit")(refit)
