"""Every command group of ``taskcal``, registered in the order ``taskcal --help`` lists them."""

from __future__ import annotations

import typer

from taskcal_agents.commands import (
    _calibrate,
    _data,
    _demo,
    _evaluate,
    _fit,
    _monitor,
    _outcomes,
    _refit,
    _sample,
    _serving,
)

__all__ = ["register_commands"]

_GROUPS = (
    _serving,
    _data,
    _sample,
    _fit,
    _evaluate,
    _demo,
    _outcomes,
    _monitor,
    _refit,
    _calibrate,
)


def register_commands(app: typer.Typer) -> None:
    """Register every command group's commands on *app*."""
    for group in _GROUPS:
        group.register(app)
