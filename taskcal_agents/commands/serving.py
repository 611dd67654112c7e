"""``taskcal`` sub-commands: serving."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Register the serving commands on *app*."""
