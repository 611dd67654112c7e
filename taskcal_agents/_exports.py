"""A package's ``__getattr__`` and ``__dir__``: names imported on first use, and the 0.1 names.

The one export mechanism of ``taskcal_agents``: a package's ``__init__`` imports its names
from its private modules, and its ``__all__`` is the public part. Where an import is heavy
(the root facade, ``workflow``, ``langchain``, the one-pass belief of ``sampling``) the
package names the module of each such public name in its ``_EXPORTS`` table instead and
imports it on first use through :func:`lazy_exports`. Every package also finds, with a
``DeprecationWarning``, the names 0.1 exported from it that moved
(:data:`taskcal_agents._compat.MOVED_NAMES`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

from taskcal_agents._compat import moved_name

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for *package*.

    ``__getattr__`` imports ``exports[name]`` on use and reads *name* from it (each time: a
    test that patches the module is seen); any other name is a 0.1 name that moved
    (:func:`taskcal_agents._compat.moved_name`: found with a warning) or an
    ``AttributeError``. ``__dir__`` lists the package's ``__all__``.

    Args:
        package: The package's ``__name__``.
        exports: Public name → the module it is imported from (the package's private module
            that defines it; for the root facade, the package that exports it). Every name is
            in the package's ``__all__``: a name served here is public.
    """
    exports = dict(exports)

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is not None:
            return getattr(import_module(module), name)
        return moved_name(package, name)

    def __dir__() -> list[str]:
        return sorted(sys.modules[package].__all__)

    return __getattr__, __dir__
