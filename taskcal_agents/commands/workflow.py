"""``taskcal`` sub-commands: workflow."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Register the workflow commands on *app*."""
