r"""``taskcal sample``: N completions (and a greedy one) per item into a resumable samples file.

::

    taskcal sample --task when2call.yaml --data data/when2call.jsonl \
        --base-url http://127.0.0.1:8000/v1 --model smollm2-135m-instruct --n 16 \
        --out runs/when2call.samples.jsonl
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from taskcal_agents._endpoint import BASE_URL_ENV, MODEL_ENV, server_from_env
from taskcal_agents.commands._common import (
    BaseUrlOption,
    ModelOption,
    close_sampler,
    consoles,
    fail,
    load_task,
    make_sampler,
    split_names,
)
from taskcal_agents.errors import ConfigurationError, TaskCalError

__all__ = ["register", "sample"]

if TYPE_CHECKING:
    from taskcal_agents.decision import Task


LENGTH_WARN_SHARE = 0.1
"""`taskcal sample` warns when more than this share of samples ends on the length limit."""


def sample(
    task: Annotated[Path, typer.Option(help="Task file (YAML/JSON): labels, costs, parser.")],
    data: Annotated[Path, typer.Option(help="Dataset JSONL (see `taskcal data convert`).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Samples JSONL (created or resumed).")],
    base_url: BaseUrlOption = None,
    model: ModelOption = None,
    n: Annotated[int, typer.Option(min=1, help="Completions per item.")] = 16,
    temperature: Annotated[float, typer.Option(min=0.0, help="Sampling temperature.")] = 1.0,
    max_tokens: Annotated[int, typer.Option(min=1, help="Completion length limit.")] = 256,
    greedy: Annotated[
        bool, typer.Option(help="Also draw one greedy (temperature 0) completion per item.")
    ] = True,
    concurrency: Annotated[int, typer.Option(min=1, help="Items sampled at once.")] = 4,
    limit: Annotated[int | None, typer.Option(help="Only the first N items of --data.")] = None,
    max_failures: Annotated[
        int, typer.Option(min=1, help="Stop after this many failed items.")
    ] = 10,
    api_key: Annotated[
        str, typer.Option(envvar="OPENAI_API_KEY", help="API key (vLLM ignores it).")
    ] = "EMPTY",
    timeout: Annotated[float, typer.Option(min=1.0, help="Seconds per request.")] = 600.0,
    belief: Annotated[
        str,
        typer.Option(
            help="samples: N parsed completions; one_pass: one-pass belief from top_logprobs "
            "under a choice constraint, stored as probabilities (a tool decision's over 'call "
            "TOOL', ask and refuse, smoothed as 16 pseudo-samples, with the greedy completion's "
            "call; other tasks' over their labels or --choices, smoothed as --n); logprob: the "
            "earlier name, over the labels for every task."
        ),
    ] = "samples",
    choices: Annotated[
        str | None,
        typer.Option(
            help="With --belief one_pass: comma-separated strings the model emits, one per task "
            "label in order (default: the labels)."
        ),
    ] = None,
    adaptive: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            max=1.0,
            help="Adaptive N: draw 4, 8, ... up to --n samples and stop once the probability "
            "that --n samples would change the calibrated MBR action is below EPS (needs "
            "--artefact); records say where they stopped (stopped_at).",
        ),
    ] = None,
    artefact: Annotated[
        Path | None,
        typer.Option(help="With --adaptive: the calibrator artefact (`taskcal fit`) to decide by."),
    ] = None,
    engine: Annotated[
        str,
        typer.Option(
            help="local: a thread pool against --base-url; ray: Ray Data's HTTP processor "
            "against --endpoints (pip install 'taskcal-agents[ray]')."
        ),
    ] = "local",
    endpoints: Annotated[
        str | None,
        typer.Option(
            help="With --engine ray: comma-separated server URLs (http://host:8000/v1,...); "
            "items are spread over them (default: --base-url)."
        ),
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(
            help="With --engine ray: the Ray cluster to join (`auto`, or the head node's "
            "HOST:6379; this command is its driver); default: a local Ray."
        ),
    ] = None,
    batch_size: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="With --engine ray: requests per batch, whole items, one endpoint (a failed "
            "batch loses these). Default 4.",
        ),
    ] = None,
    parse_tasks: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="With --engine ray: parse tasks at once (each worker imports the library "
            "once; raise it when the parse, not the servers, is the bottleneck). Default 2.",
        ),
    ] = None,
) -> None:
    """Sample N completions (+ a greedy one) per item into a resumable samples file.

    A rerun with the same --out skips finished items; killing it at any moment loses
    and duplicates nothing. With --engine ray, --concurrency is the number of HTTP actors
    (one request in flight each); --max-failures also bounds the batches Ray may drop.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from taskcal_agents.datasets import read_dataset
    from taskcal_agents.workflow import (
        RayEngine,
        SampleSettings,
        SamplesStore,
        run_sampling,
        run_sampling_ray,
        sample_header,
    )

    console, err = consoles()
    base_url, model = server_from_env(base_url, model)
    urls = split_names(endpoints) if endpoints else []
    if engine == "ray" and not base_url and urls:
        base_url = urls[0]
    sampler: Any = None
    try:
        if engine not in ("local", "ray"):
            msg = f"--engine must be 'local' or 'ray', got {engine!r}."
            raise ConfigurationError(msg)
        ray_only = {
            "--endpoints": endpoints,
            "--ray-address": ray_address,
            "--batch-size": batch_size,
            "--parse-tasks": parse_tasks,
        }
        given = [name for name, value in ray_only.items() if value is not None]
        if engine == "local" and given:
            msg = f"{', '.join(given)} need --engine ray."
            raise ConfigurationError(msg)
        if not base_url or not model:
            msg = (
                f"--base-url and --model are required (or set ${BASE_URL_ENV} and "
                f"${MODEL_ENV}); got base_url={base_url!r}, model={model!r}."
            )
            raise ConfigurationError(msg)
        task_obj = load_task(task)
        items = read_dataset(data, labels=task_obj.labels, allow_unlabelled=True)
        items = items[:limit] if limit is not None else items
        decider, aid = _adaptive_decider(task_obj, adaptive, artefact)
        settings = SampleSettings(
            n=n,
            temperature=temperature,
            greedy=greedy,
            max_tokens=max_tokens,
            model=model,
            base_url=base_url,
            belief=belief,
            choices=tuple(split_names(choices)) if choices else None,
            adaptive=adaptive,
            adaptive_artefact=aid,
        )
        ray_engine: Any = None
        if engine == "ray":
            ray_engine = RayEngine.for_task(
                task_obj,
                settings,
                endpoints=tuple(urls or [base_url]),
                model=model,
                api_key=api_key,
                timeout=timeout,
                concurrency=concurrency,
                address=ray_address,
                **{
                    k: v
                    for k, v in {"batch_size": batch_size, "parse_tasks": parse_tasks}.items()
                    if v is not None
                },
            )
        else:
            sampler = make_sampler(base_url, model, api_key, timeout)
        store = SamplesStore.open(out, sample_header(task_obj, settings, str(data)))
    except BaseException as exc:
        close_sampler(sampler)
        if isinstance(exc, (TaskCalError, ImportError)):
            raise fail(err, exc) from exc
        raise
    counts: Counter[str] = Counter()
    with (
        store,
        Progress(
            TextColumn("[bold]sampling[/bold]"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[status]}"),
            console=err,
        ) as progress,
    ):
        done = sum(i.id in store.done for i in items)
        bar = progress.add_task("sample", total=len(items), completed=done, status="")

        def on_record(record: dict[str, Any] | None) -> None:
            if record is None:
                counts["(failed)"] += 1
            else:
                counts.update(lab or "(unparsed)" for lab in record["labels"])
                if "probs" in record:  # logprob belief: count the most probable label
                    probs = record["probs"]
                    counts[task_obj.labels[probs.index(max(probs))]] += 1
            shown = ", ".join(f"{k} {v}" for k, v in counts.most_common(4))
            progress.update(bar, advance=1, status=shown)

        try:
            if ray_engine is not None:
                report = run_sampling_ray(
                    task_obj,
                    items,
                    store,
                    settings,
                    ray_engine,
                    max_failures=max_failures,
                    on_record=on_record,
                )
            else:
                report = run_sampling(
                    task_obj,
                    items,
                    sampler,
                    store,
                    settings,
                    concurrency=concurrency,
                    max_failures=max_failures,
                    on_record=on_record,
                    decider=decider,
                )
        except (TaskCalError, ImportError) as exc:
            raise fail(err, exc) from exc
        finally:
            close_sampler(sampler)
    console.print(
        f"{out}: {report.written} items sampled now, {report.skipped} already there, "
        f"{len(report.failures)} failed (of {report.total})."
    )
    if report.unparsed_reasons:
        shown = ", ".join(f"{k} {v}" for k, v in report.unparsed_reasons.most_common())
        n_unparsed = sum(report.unparsed_reasons.values())
        console.print(f"unparsed samples: {n_unparsed} of {report.n_samples} ({shown}).")
    if report.length_share > LENGTH_WARN_SHARE:
        err.print(
            f"[yellow]warning[/yellow]: {report.n_length} of {report.n_samples} samples "
            f"({report.length_share:.0%}) ended on the length limit (--max-tokens "
            f"{max_tokens}); raise --max-tokens so that completions are not cut off.",
            highlight=False,
            soft_wrap=True,
        )
    for item_id, message in report.failures[:5]:
        err.print(f"[red]failed[/red] {item_id}: {message}", highlight=False, soft_wrap=True)
    if report.failures or report.interrupted:
        err.print("Run the same command again to retry: finished items are kept.")
        raise typer.Exit(code=1)


def _adaptive_decider(
    task: Task, adaptive: float | None, artefact: Path | None
) -> tuple[Any, str | None]:
    """The decider ``taskcal sample --adaptive`` stops by and its artefact's content id.

    ``(None, None)`` without --adaptive. The id goes into the samples file's settings, so a
    resume under another artefact (calibrator, α, risk limit or stopping prior) is refused.

    Raises:
        ConfigurationError: --adaptive without --artefact, or --artefact without --adaptive.
        LabelMismatchError: The artefact was fitted for other labels.
        DataFileError: The artefact cannot be read.
    """
    if adaptive is None:
        if artefact is not None:
            msg = "--artefact is only used with --adaptive EPS; drop it or pass --adaptive."
            raise ConfigurationError(msg)
        return None, None
    if artefact is None:
        msg = (
            f"--adaptive {adaptive} needs --artefact FIT.json: the stopping rule watches the "
            "calibrated MBR action, so fit a calibrator first (`taskcal fit`)."
        )
        raise ConfigurationError(msg)
    from taskcal_agents.decision import Decider, resolve_calibrator
    from taskcal_agents.production import artefact_id

    resolved = resolve_calibrator(artefact, task, owner="taskcal sample")
    return Decider.from_resolved(task, resolved), artefact_id(resolved.artefact)


def register(app: typer.Typer) -> None:
    """Register ``sample``."""
    app.command("sample")(sample)
