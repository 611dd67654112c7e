"""``taskcal demo``: the main job on the CPU default."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Register the ``demo`` command on *app*."""
