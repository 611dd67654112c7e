"""Lazy re-exports for a package's ``__init__``: names are imported on first use."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

from taskcal_agents._compat import moved_name

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str,
    exports: Mapping[str, str],
    *,
    also: Mapping[str, str] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for *package*, importing ``exports[name]`` on use.

    A name 0.1 exported from *package* that moved elsewhere is still found, with a
    ``DeprecationWarning`` naming the new path (:func:`taskcal_agents._compat.moved_name`).

    Args:
        package: The package's ``__name__`` (for the error message).
        exports: Public name → the module that defines it (the package's ``__all__``).
        also: Names found here without a warning but outside ``__all__`` and ``dir()``
            (names an earlier release exported) → the module that defines them.
    """
    also = also or {}

    def __getattr__(name: str) -> Any:
        if name in exports:
            return getattr(import_module(exports[name]), name)
        if name in also:
            return getattr(import_module(also[name]), name)
        return moved_name(package, name)

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__
