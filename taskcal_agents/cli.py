"""The ``taskcal`` command line.

Sub-commands live in :mod:`taskcal_agents.commands`, one private module per group; each
registers its own commands on the shared Typer app (``register_commands``).
"""

from __future__ import annotations

import typer

from taskcal_agents.commands import register_commands

__all__ = ["app", "main"]

app = typer.Typer(
    name="taskcal",
    help="Task-calibrated, cost-aware decisions for LLM agents.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
"""The ``taskcal`` Typer app, every command group registered (:func:`main` runs it)."""
register_commands(app)


def main() -> None:
    """Run the ``taskcal`` command line."""
    app()


if __name__ == "__main__":
    main()
