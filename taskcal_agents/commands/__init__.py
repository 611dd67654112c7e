"""The ``taskcal`` sub-commands, one module per group; :mod:`taskcal_agents.cli` registers them."""

__all__: list[str] = []
