"""``taskcal calibrate``: fit a tool-decision calibrator for the model a server serves.

::

    pip download --no-deps bfcl-eval==2026.3.23 -d runs
    taskcal calibrate --base-url http://127.0.0.1:8000/v1 --model NAME \
        --source runs/bfcl_eval-2026.3.23-py3-none-any.whl --work-dir runs/calibrate

Samples the train split of the BFCL corpus on the endpoint, fits, and writes the artefact
(``WORK_DIR/calibrator.json`` or ``--out``) that a front door takes as ``calibrator=PATH``.
It prints its expected duration after its first items; a rerun resumes it.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Any

import typer

from taskcal_agents._endpoint import BASE_URL_ENV, MODEL_ENV, server_from_env
from taskcal_agents.commands._common import (
    BaseUrlOption,
    ModelOption,
    close_sampler,
    consoles,
    fail,
    make_sampler,
)
from taskcal_agents.errors import ConfigurationError, TaskCalError

__all__ = ["calibrate", "register"]


def _duration(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


def calibrate(
    source: Annotated[
        Path,
        typer.Option(
            help="The bfcl-eval 2026.3.23 wheel or its data folder (`pip download --no-deps "
            "bfcl-eval==2026.3.23`); read, never installed."
        ),
    ],
    work_dir: Annotated[
        Path, typer.Option(help="Folder of the split and the samples (a rerun resumes).")
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Artefact to write (default WORK_DIR/calibrator.json)."),
    ] = None,
    base_url: BaseUrlOption = None,
    model: ModelOption = None,
    n: Annotated[int, typer.Option(min=2, help="Completions per item (your front doors' N).")] = 16,
    temperature: Annotated[
        float, typer.Option(min=0.0, help="Their temperature (your front doors').")
    ] = 1.0,
    max_tokens: Annotated[int, typer.Option(min=1, help="Their length limit.")] = 256,
    calibrator: Annotated[
        str | None, typer.Option(help="Calibrator family (default: the one shipped ones use).")
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Items sampled at once.")] = 4,
    limit: Annotated[
        int | None, typer.Option(min=1, help="Only the first N items (a trial run).")
    ] = None,
    dtype: Annotated[
        str | None, typer.Option(help="The dtype the server runs the model in (recorded).")
    ] = None,
    belief: Annotated[
        str,
        typer.Option(
            help="samples: --n completions per item; one_pass: one forward pass over the "
            "tools, ask and refuse, and one greedy completion per item (for front doors with "
            "SamplingOptions(belief='one_pass'); samples in WORK_DIR/samples.one_pass.jsonl)."
        ),
    ] = "samples",
    api_key: Annotated[
        str, typer.Option(envvar="OPENAI_API_KEY", help="API key (vLLM ignores it).")
    ] = "EMPTY",
    timeout: Annotated[float, typer.Option(min=1.0, help="Seconds per request.")] = 600.0,
) -> None:
    """Sample the BFCL corpus's train split on a server and fit its tool-decision calibrator."""
    from taskcal_agents.workflow import CALIBRATE_CALIBRATOR, calibrate_endpoint

    console, err = consoles()
    if belief not in ("samples", "one_pass"):
        raise fail(
            err, ConfigurationError(f"--belief must be samples or one_pass, got {belief!r}.")
        )
    base_url, model = server_from_env(base_url, model)
    if not base_url or not model:
        exc = ConfigurationError(
            f"--base-url and --model are required (or set ${BASE_URL_ENV} and ${MODEL_ENV}); "
            f"got base_url={base_url!r}, model={model!r}."
        )
        raise fail(err, exc)
    done = [0]

    def on_estimate(seconds: float, left: int) -> None:
        console.print(
            f"expected duration: about {_duration(seconds)} for the {left} items left "
            "(from the pace of the first ones; a rerun resumes)",
            highlight=False,
        )

    def on_record(record: dict[str, Any] | None) -> None:
        done[0] += 1
        if done[0] % 50 == 0:
            console.print(f"{done[0]} items sampled", highlight=False)

    family = calibrator or CALIBRATE_CALIBRATOR
    # Recorded in the artefact: no server address or local path (the wheel by its name).
    command = ["taskcal", "calibrate", "--base-url", "URL", "--model", model]
    command += ["--source", source.name, "--work-dir", "WORK_DIR", "--n", str(n)]
    command += ["--temperature", f"{temperature:g}", "--max-tokens", str(max_tokens)]
    command += ["--calibrator", family, "--concurrency", str(concurrency)]
    command += [] if limit is None else ["--limit", str(limit)]
    command += [] if dtype is None else ["--dtype", dtype]
    command += [] if belief == "samples" else ["--belief", belief]
    sampler = None
    try:
        sampler = make_sampler(base_url, model, api_key, timeout)
        result = calibrate_endpoint(
            sampler, model=model, source=source, work_dir=work_dir, out=out, base_url=base_url,
            n=n, temperature=temperature, max_tokens=max_tokens,
            calibrator=family, concurrency=concurrency,
            limit=limit, dtype=dtype, belief=belief,  # type: ignore[arg-type]
            command=shlex.join(command),
            on_estimate=on_estimate, on_record=on_record,
        )  # fmt: skip
    except TaskCalError as exc:
        raise fail(err, exc) from exc
    finally:
        close_sampler(sampler)
    report = result.report
    console.print(
        f"{result.samples}: {report.written} items sampled now, {report.skipped} already "
        f"there, {len(report.failures)} failed (of {report.total})."
    )
    if result.artefact is None:
        for item_id, message in report.failures[:5]:
            err.print(f"[red]failed[/red] {item_id}: {message}", highlight=False, soft_wrap=True)
        err.print("Run the same command again to resume: finished items are kept.")
        raise typer.Exit(code=1)
    metrics = result.artefact.metadata.get("fit_metrics") or {}
    crossval = metrics.get("crossval") or {}
    if "nll" in crossval:
        console.print(
            f"cross-fitted NLL {crossval['nll']:.4f} (raw {metrics['before']['nll']:.4f}), "
            f"expected cost {crossval['expected_cost']:.4f}",
            highlight=False,
        )
    console.print(
        f"wrote {result.path} (content id {result.artefact.content_id}); use it with "
        f"calibrator={str(result.path)!r}",
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    """Add ``taskcal calibrate`` to ``app``."""
    app.command("calibrate")(calibrate)
