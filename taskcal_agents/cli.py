"""The ``taskcal`` command line.

Sub-commands live in :mod:`taskcal_agents.commands`; each module there registers its
own commands on the shared Typer app, so this file stays a table of contents.
"""

from __future__ import annotations

import typer

from taskcal_agents.commands import (
    calibrate,
    data,
    demo,
    evaluate,
    fit,
    monitor,
    outcomes,
    refit,
    sample,
    serving,
)

__all__ = ["app", "main"]

app = typer.Typer(
    name="taskcal",
    help="Task-calibrated, cost-aware decisions for LLM agents.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
serving.register(app)
data.register(app)
sample.register(app)
fit.register(app)
evaluate.register(app)
demo.register(app)
outcomes.register(app)
monitor.register(app)
refit.register(app)
calibrate.register(app)


def main() -> None:
    """Run the ``taskcal`` command line."""
    app()


if __name__ == "__main__":
    main()
