"""Lazy re-exports for a package's ``__init__``: names are imported on first use."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str], moved: Mapping[str, str] | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for *package*, importing ``exports[name]`` on use.

    Args:
        package: The package's ``__name__`` (for the error message).
        exports: Public name → the module that defines it.
        moved: Names that moved out of *package* → their new module: still found, with a
            ``DeprecationWarning`` naming the new path (for one release).
    """
    moved = moved or {}

    def __getattr__(name: str) -> Any:
        if name in exports:
            return getattr(import_module(exports[name]), name)
        if name in moved:
            warnings.warn(
                f"{package}.{name} moved to {moved[name]}.{name}; import it from there "
                "(the old path goes in the next release).",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(import_module(moved[name]), name)
        msg = f"module {package!r} has no attribute {name!r}"
        raise AttributeError(msg)

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__
