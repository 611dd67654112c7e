"""The ``taskcal`` sub-commands, one private module per group.

Nothing here is public (``__all__`` is empty): :mod:`taskcal_agents.cli` imports
``register_commands``, which registers every group on its Typer app.
"""

from taskcal_agents.commands._groups import register_commands as register_commands

__all__: list[str] = []
