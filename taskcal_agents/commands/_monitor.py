"""``taskcal monitor``: drift alarm on a decision log (:mod:`taskcal_agents.production._monitor`).

::

    taskcal monitor --log runs/decisions.jsonl --artefact cal.json --window 7d --png drift.png

Exit status: 0 no alarm, 1 alarm (for CI and cron), 2 usage or data error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from taskcal_agents._files import save_figure, write_json
from taskcal_agents.commands._common import consoles, fail
from taskcal_agents.errors import TaskCalError

__all__ = ["monitor_command", "plot_monitor", "register"]

HELP = """Drift alarm: compare what the calibrated system predicted with the outcomes.

Per window, on labelled served decisions: realised minus expected cost (0 if calibrated),
NLL and the NLL gap -log q\\[y] - H(q) (0 if calibrated), classwise ECE (vs the ECE of
calibrated beliefs at the window size, by resampling outcomes from q);
on labelled decisions: label prior (biased when outcomes arrive for some decisions only);
on all decisions: unparsed and fallback rates (vs fit time, else vs the first window).
Each with its SE; an alarm when z exceeds --z (default 3: about ten metrics per window
make a two-SE rule alarm by chance) in a window of at least --min-n items. Decisions of
other tasks in the log are left out and counted; without labelled decisions a warning.
Exit 0: no alarm; 1: alarm; 2: usage or data error (never 1).
"""


def plot_monitor(report: Any, path: Path) -> Path:
    """A PNG of each metric's z per window over time (the alarm threshold dashed)."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - matplotlib is in the dev extra
        msg = (
            "taskcal monitor --png draws with matplotlib, which is not installed; "
            "install it with: pip install 'taskcal-agents[plot]'."
        )
        raise ImportError(msg) from exc
    fig = Figure(figsize=(9, 4.5))
    ax = fig.add_subplot()
    windows = report.windows
    x = list(range(len(windows)))
    names = [m.name for m in windows[0].metrics] if windows else []
    for name in names:
        zs = [w.metric(name).z for w in windows]
        ax.plot(x, [float("nan") if z is None else max(min(z, 10), -10) for z in zs],
                marker="o", label=name)  # fmt: skip
    for sign in (1, -1):
        ax.axhline(sign * report.z, color="red", linestyle="--", linewidth=1)
    ax.set_xticks(x, [w.time_from[:16] if w.time_from else f"w{w.index}" for w in windows],
                  rotation=30, ha="right", fontsize=7)  # fmt: skip
    ax.set_ylabel("z vs reference (clipped at ±10)")
    ax.set_title(f"taskcal monitor: {report.task}")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return save_figure(fig, path, dpi=100)


def monitor_command(
    log: Annotated[Path, typer.Option(help="The decision log (.jsonl, .sqlite or .db).")],
    artefact: Annotated[
        Path | None, typer.Option(help="Calibrator artefact: the task and fit-time references.")
    ] = None,
    task: Annotated[Path | None, typer.Option(help="Task file, when no artefact is given.")] = None,
    window: Annotated[
        str | None, typer.Option(help="Window: a count of decisions (200) or a duration (24h, 7d).")
    ] = None,
    z: Annotated[float, typer.Option(help="Alarm threshold in standard errors.")] = 3.0,
    min_n: Annotated[int, typer.Option(help="Fewest items a window needs to alarm.")] = 30,
    png: Annotated[Path | None, typer.Option(help="Write a plot of z over time.")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the report.")] = None,
    artefact_id: Annotated[
        str | None, typer.Option(help="Only decisions of this artefact id (default: all).")
    ] = None,
) -> None:
    """Drift alarm on a decision log (the full help is :data:`HELP`)."""
    from taskcal_agents.production import monitor_log

    console, err = consoles()
    if not log.exists():
        raise fail(err, FileNotFoundError(f"decision log not found: {log}"))
    try:
        report = monitor_log(
            log, artefact=artefact, task=task, window=window, z=z, min_n=min_n,
            artefact_id=artefact_id,
        )  # fmt: skip
        if png is not None:
            plot_monitor(report, png)
    except (TaskCalError, OSError, ImportError) as exc:
        raise fail(err, exc) from exc
    except Exception as exc:  # exit 1 means an alarm: no other failure may look like one
        raise fail(err, RuntimeError(f"{type(exc).__name__}: {exc}")) from exc
    console.print(report.to_table())
    if report.n_other_task:
        console.print(
            f"{report.n_other_task} decisions of other tasks left out (monitoring task "
            f"{report.task!r}).",
            highlight=False,
        )
    for warning in report.warnings:
        err.print(f"[yellow]warning:[/yellow] {warning}", highlight=False, soft_wrap=True)
    if json_out is not None:
        write_json(report.to_dict(), json_out)
    for index, metric in report.alarms():
        err.print(
            f"ALARM window {index}: {metric.name} = {metric.value:.4g} vs {metric.reference:.4g} "
            f"({metric.source}), z = {metric.z:+.1f}",
            highlight=False,
        )
    if report.alarm:
        raise typer.Exit(code=1)


def register(app: typer.Typer) -> None:
    """Register ``monitor``."""
    app.command("monitor", help=HELP)(monitor_command)
