"""Lazy re-exports for a package's ``__init__``: names are imported on first use."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str,
    exports: Mapping[str, str],
    moved: Mapping[str, str] | None = None,
    *,
    also: Mapping[str, str] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for *package*, importing ``exports[name]`` on use.

    Args:
        package: The package's ``__name__`` (for the error message).
        exports: Public name → the module that defines it (the package's ``__all__``).
        moved: Names that moved out of *package* → their new module: still found, with a
            ``DeprecationWarning`` naming the new path (for one release).
        also: Names found here without a warning but outside ``__all__`` and ``dir()``
            (names an earlier release exported, and names the library's other packages
            share) → the module that defines them.
    """
    moved = moved or {}
    also = also or {}

    def __getattr__(name: str) -> Any:
        if name in exports:
            return getattr(import_module(exports[name]), name)
        if name in also:
            return getattr(import_module(also[name]), name)
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
