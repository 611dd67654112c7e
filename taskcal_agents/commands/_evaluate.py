r"""``taskcal evaluate`` and ``taskcal report``: compare decoders, then draw the comparison.

``evaluate`` cross-fits the decoders on a samples file and prints (and writes) the
evaluation; ``report`` turns that evaluation JSON into figures and a markdown summary.

::

    taskcal evaluate --samples runs/when2call.samples.jsonl --folds 5 \
        --out runs/when2call.eval.json
    taskcal report --evaluation runs/when2call.eval.json --out-dir runs/when2call-report
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from taskcal_agents.commands._common import (
    ReparseOption,
    SampledFromOption,
    SamplesOption,
    consoles,
    fail,
    split_names,
)
from taskcal_agents.errors import ConfigurationError, TaskCalError

__all__ = ["evaluate", "register", "report"]


def evaluate(
    samples: SamplesOption,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Evaluation JSON to write.")
    ] = None,
    folds: Annotated[int, typer.Option(min=2, help="Stratified cross-fitting folds.")] = 5,
    seed: Annotated[int, typer.Option(help="Seed of the folds and of the label shuffles.")] = 0,
    calibrators: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated calibration maps to cross-fit; NAME or NAME:KEY=VALUE[:...] "
            "(e.g. dirichlet:reg_lambda=0.01). dirichlet is ODIR with reg_lambda and reg_mu "
            "chosen by inner cross-validation; matrix is the same map unregularised. Default: "
            "every registered map but identity (mbr_raw) and logistic (on request)."
        ),
    ] = None,
    test_calibrator: Annotated[
        str,
        typer.Option(
            help="Calibrator of the MBR decoder in the label-shuffle test (default: the "
            "regularised dirichlet)."
        ),
    ] = "dirichlet",
    permutations: Annotated[
        int, typer.Option(min=0, help="Label shuffles of the permutation test (0: skip).")
    ] = 200,
    jobs: Annotated[
        int,
        typer.Option(
            help="Processes for the label shuffles (-1: all cores); the result does not "
            "depend on it. Leave 1 on a machine shared with a model server."
        ),
    ] = 1,
    task: Annotated[
        Path | None,
        typer.Option(help="Task file (default: the sampling task; costs may be changed)."),
    ] = None,
    alpha: Annotated[float, typer.Option(min=0.0, help="Belief smoothing prior α.")] = 0.1,
    data_file: SampledFromOption = None,
    reparse: ReparseOption = False,
    items: Annotated[
        bool, typer.Option(help="Store per-item beliefs and actions (needed by `report`).")
    ] = True,
    target_risk: Annotated[
        float | None,
        typer.Option(
            help="Acceptable risk (mean cost of the decided items, > 0): report the coverage "
            "each decoder reaches at it."
        ),
    ] = None,
    artefact: Annotated[
        Path | None,
        typer.Option(
            help="A calibrator artefact fitted elsewhere (`taskcal fit`), evaluated held out "
            "as mbr_artefact with its α and (without --task) its task; the label-shuffle "
            "test tests it."
        ),
    ] = None,
) -> None:
    """Compare decoders (constant, greedy, majority, MBR raw/calibrated) with cross-fitting."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from taskcal_agents._files import write_json
    from taskcal_agents.workflow import (
        DEFAULT_CALIBRATORS,
        cost_sweep_rich_table,
        evaluate_samples,
        rich_table,
        tool_rich_table,
        verdict,
    )

    console, err = consoles()
    names = list(DEFAULT_CALIBRATORS) if calibrators is None else split_names(calibrators)
    if target_risk is not None and not (math.isfinite(target_risk) and target_risk > 0):
        msg = f"--target-risk must be a finite number > 0, got {target_risk!r}."
        raise fail(err, ConfigurationError(msg))
    try:
        with Progress(
            TextColumn("[bold]evaluating[/bold]"),
            BarColumn(),
            MofNCompleteColumn(),
            console=err,
            transient=True,
        ) as progress:
            total = 1 + len(names) + int(artefact is not None) + permutations
            bar = progress.add_task("evaluate", total=total)
            evaluation, settings = evaluate_samples(
                samples,
                calibrators=names,
                folds=folds,
                seed=seed,
                permutations=permutations,
                test_calibrator=test_calibrator or None,
                jobs=jobs,
                task=task,
                alpha=alpha,
                data=data_file,
                reparse=reparse,
                items=items,
                target_risk=target_risk,
                progress=lambda k: progress.advance(bar, k),
                artefact=artefact,
            )
    except TaskCalError as exc:
        raise fail(err, exc) from exc
    n_items = evaluation["n_items"]
    title = f"{evaluation['task']['name']}: {n_items} items, {folds}-fold cross-fitted, " + (
        "one-pass belief"
        if settings.get("belief") in ("one_pass", "logprob")
        else f"N={settings.get('n')} samples at T={settings.get('temperature')}"
    )
    console.print(rich_table(evaluation, title=title))
    tools = tool_rich_table(evaluation)
    if tools is not None:
        console.print(tools)
    sweep = cost_sweep_rich_table(evaluation)
    if sweep is not None:
        console.print(sweep)
    clusters = evaluation["meta"].get("answer_clusters")
    if clusters is not None:
        console.print(
            f"answer clusters ({clusters['method']}): {clusters['mean_n_clusters']:.2f} per "
            f"item on average, {clusters['n_one_cluster']} of {n_items} items with one; the "
            f"label is whether the modal answer is right ({clusters['n_modal_right']} items).",
            highlight=False,
            soft_wrap=True,
        )
    console.print(verdict(evaluation), highlight=False, soft_wrap=True)
    if out is not None:
        write_json(evaluation, out)
        console.print(f"wrote {out}")


# --------------------------------------------------------------------------------------
# report


def report(
    evaluation: Annotated[Path, typer.Option(help="Evaluation JSON from `taskcal evaluate`.")],
    out_dir: Annotated[Path, typer.Option(help="Folder for the figures and summary.md.")],
) -> None:
    """Reliability diagrams, a cost-by-decoder figure and a markdown summary."""
    from taskcal_agents.workflow import load_evaluation, write_report

    console, err = consoles()
    try:
        paths = write_report(load_evaluation(evaluation), out_dir)
    except TaskCalError as exc:
        raise fail(err, exc) from exc
    for path in paths:
        console.print(f"wrote {path}")


def register(app: typer.Typer) -> None:
    """Register ``evaluate`` and ``report``."""
    app.command("evaluate")(evaluate)
    app.command("report")(report)
