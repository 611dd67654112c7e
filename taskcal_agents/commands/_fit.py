r"""``taskcal fit``: fit a calibration map on a samples file and write its JSON artefact.

::

    taskcal fit --samples runs/when2call.samples.jsonl --calibrator dirichlet \
        -o runs/when2call.calibrator.json
    taskcal fit --samples runs/when2call.samples.jsonl --risk-control tool_call_when_not:0.05 \
        --delta 0.05 -o runs/when2call.guarded.json
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from taskcal_agents.commands._common import (
    ReparseOption,
    SampledFromOption,
    SamplesOption,
    consoles,
    fail,
)
from taskcal_agents.errors import ConfigurationError, TaskCalError

__all__ = ["fit", "register"]


def _parse_params(values: list[str] | None) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for value in values or []:
        key, sep, raw = value.partition("=")
        if not sep or not key:
            msg = f"--param must look like KEY=VALUE (VALUE in JSON or plain text), got {value!r}."
            raise ConfigurationError(msg)
        try:
            params[key] = json.loads(raw)
        except json.JSONDecodeError:
            params[key] = raw
    return params


def fit(
    samples: SamplesOption,
    out: Annotated[Path, typer.Option("--out", "-o", help="Calibrator artefact JSON to write.")],
    calibrator: Annotated[
        str,
        typer.Option(
            help="dirichlet (ODIR, reg_lambda and reg_mu chosen by inner cross-validation), "
            "matrix (the same map unregularised), logistic (multinomial, L2 by cross-validation; "
            "what `taskcal calibrate` fits), temperature, vector, isotonic, histogram "
            "or identity (optionally NAME:KEY=VALUE[:...]). Fitted on items with a usable "
            "sample only."
        ),
    ] = "dirichlet",
    param: Annotated[
        list[str] | None,
        typer.Option(help="Calibrator parameter KEY=VALUE (repeatable), e.g. reg_lambda=0.01."),
    ] = None,
    task: Annotated[
        Path | None, typer.Option(help="Task file (default: the task stored in the samples).")
    ] = None,
    alpha: Annotated[
        float, typer.Option(min=0.0, help="Belief smoothing prior α (use the deployed value).")
    ] = 0.1,
    cv_folds: Annotated[
        int, typer.Option(min=0, help="Folds of the cross-validated fit metrics (0: none).")
    ] = 5,
    seed: Annotated[int, typer.Option(help="Seed of the folds.")] = 0,
    data_file: SampledFromOption = None,
    reparse: ReparseOption = False,
    risk_control: Annotated[
        str | None,
        typer.Option(
            help="Also certify a risk limit, stored in the artefact and applied by every front "
            "door: ACTION_when_not:ALPHA (rate of taking ACTION when it is not a least-cost "
            "action), ACTION_wrong:ALPHA (the same among decisions that took ACTION), or "
            "cost:ALPHA (expected cost / max cost); ACTION may be 'any'. The threshold is "
            "chosen by Learn-then-Test on cross-fitted calibrated beliefs."
        ),
    ] = None,
    delta: Annotated[
        float,
        typer.Option(help="With --risk-control: allowed probability δ that the limit fails."),
    ] = 0.05,
) -> None:
    """Fit a calibration map on a samples file and write it as a JSON artefact."""
    import warnings

    from rich.table import Table

    from taskcal_agents._files import write_json
    from taskcal_agents.decision import (
        FEW_ITEMS,
        RiskNotCertifiedWarning,
        StoppingPriorWarning,
        few_items_message,
    )
    from taskcal_agents.workflow import fit_artefact

    console, err = consoles()
    try:
        # An uncertified limit and a weakly fitted stopping prior are reported below.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RiskNotCertifiedWarning)
            warnings.simplefilter("ignore", StoppingPriorWarning)
            artefact, risk = fit_artefact(
                samples, calibrator=calibrator, params=_parse_params(param), task=task,
                alpha=alpha, cv_folds=cv_folds, seed=seed, data=data_file, reparse=reparse,
                risk_control=risk_control, delta=delta,
            )  # fmt: skip
    except TaskCalError as exc:
        raise fail(err, exc) from exc
    metrics = artefact["fit_metrics"]
    write_json(artefact, out)
    excluded = metrics["n_excluded_no_sample"]
    chosen = metrics.get("chosen") or {}
    table = Table(
        title=f"{calibrator} on {metrics['n_fit']} served items of {artefact['task']!r} "
        f"({excluded} without a usable sample excluded)"
        + ("; chose " + ", ".join(f"{k}={v}" for k, v in chosen.items()) if chosen else "")
        + ("; reads the unparsed share" if metrics.get("inputs") == "features" else "")
    )
    table.add_column("beliefs")
    keys = ("nll", "brier", "ece", "classwise_ece", "expected_cost")
    for key in keys:
        table.add_column(key, justify="right")
    rows = [("raw (in-sample)", metrics["before"]), ("calibrated (in-sample)", metrics["after"])]
    crossval = metrics.get("crossval") or {}
    if crossval and "error" not in crossval:
        rows.append((f"calibrated ({cv_folds}-fold cross-fit)", crossval))
    for label, scores in rows:
        table.add_row(label, *(f"{scores[k]:.4f}" for k in keys))
    console.print(table)
    if "error" in crossval:
        console.print(f"no cross-fitted scores: {crossval['error']}", highlight=False)
    if risk is not None:
        where = f"{risk.n} cross-fitted items ({risk.method})"
        if risk.certified:
            console.print(
                f"risk limit {risk.spec} certified at δ = {risk.delta} on {where}: guard "
                f"threshold {risk.threshold:g}, empirical risk {risk.risk:.4f}, coverage "
                f"{risk.coverage:.3f}",
                highlight=False,
            )
        else:
            err.print(
                f"[yellow]warning:[/yellow] risk limit {risk.spec} could not be certified at "
                f"δ = {risk.delta} on {where}; the guard will always downgrade (coverage "
                f"{risk.coverage:.3f}). Use more items, a larger α or δ, or better beliefs.",
                highlight=False,
                soft_wrap=True,
            )
    prior = artefact.get("stopping_prior")
    if prior is not None:
        total = sum(prior["concentration"])
        console.print(
            f"adaptive N's stopping prior: total concentration {total:.3g} on "
            f"{prior['n_items']} items",
            highlight=False,
        )
        if prior["n_items"] < FEW_ITEMS:
            err.print(
                f"[yellow]warning:[/yellow] {few_items_message(prior['n_items'])}",
                highlight=False,
                soft_wrap=True,
            )
    console.print(f"wrote {out}")


def register(app: typer.Typer) -> None:
    """Register ``fit``."""
    app.command("fit")(fit)
