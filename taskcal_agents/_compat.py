"""The import paths of 0.1 that moved in 0.2 keep working, for one release, with a warning.

``import taskcal_agents.parsers`` (or ``from taskcal_agents.task import Task``) gives a
module that forwards each name to its new home and warns once, at import, with a
``DeprecationWarning`` naming the new path. The table is the CHANGELOG's.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from importlib import import_module
from typing import Any

__all__ = ["MOVED", "MOVED_NAMES", "install", "moved_name"]

_P = "taskcal_agents."

MOVED: dict[str, tuple[str, ...]] = {
    _P + "parsers": (
        _P + "parsing.labels",
        _P + "parsing.registry",
        _P + "parsing.tool_calls",
        _P + "parsing.text",
    ),
    _P + "tool_turns": (_P + "parsing.tool_turns",),
    _P + "grounding": (_P + "parsing.grounding",),
    _P + "answer_clusters": (_P + "parsing.answer_clusters",),
    _P + "constraints": (_P + "parsing.constraints",),
    _P + "datasets.grading": (_P + "parsing.grading",),
    _P + "prompting": (_P + "sampling.prompts",),
    _P + "belief": (_P + "decision.belief",),
    _P + "options": (_P + "decision.options",),
    _P + "task": (_P + "decision.task",),
    _P + "tasks": (_P + "decision.presets",),
    _P + "risk_control": (_P + "decision.risk_control",),
    _P + "adaptive": (_P + "decision.adaptive",),
    _P + "artefact": (_P + "decision.artefact", _P + "production.reload"),
    _P + "decision_log": (_P + "production.decision_log",),
    _P + "monitor": (_P + "production.monitor", _P + "production.monitor_report"),
    _P + "runnable": (_P + "langchain.runnable",),
    _P + "chat_model": (_P + "langchain.chat_model",),
    _P + "middleware": (_P + "langchain.middleware",),
    _P + "decision_model": (_P + "langchain.decision_model", _P + "parsing.labels"),
    _P + "interop": (_P + "langchain.interop",),
}
"""Old module path → the modules its names live in now (the first holds most)."""

_SHOWN = {
    _P + "parsers": _P + "parsing",
    _P + "artefact": _P + "decision.artefact (ArtefactReloader: taskcal_agents.production.reload)",
}
"""The new path a warning names where the names went to more than one module."""

MOVED_NAMES: dict[str, dict[str, str]] = {
    _P + "decision": {
        name: _P + "decision.decider"
        for name in (
            "TOOL_CALL_ACTION",
            "ActionChoice",
            "carried_actions",
            "carries_out",
            "executable_mbr",
            "grounded_flags",
            "mbr_action",
            "ungrounded_flags",
        )
    },
    _P + "workflow": {
        "RefitResult": _P + "production.refit",
        "refit_from_records": _P + "production.refit",
    },
}
"""Names of 0.1 that a package no longer exports → the module that has them now (found
through the package for one release, with a warning: :func:`moved_name`)."""


def moved_name(package: str, name: str) -> Any:
    """The object *name* of *package* that moved (see :data:`MOVED_NAMES`), with a warning.

    Raises:
        AttributeError: *name* did not move out of *package*.
    """
    new = MOVED_NAMES.get(package, {}).get(name)
    if new is None:
        msg = f"module {package!r} has no attribute {name!r}"
        raise AttributeError(msg)
    warnings.warn(
        f"{package}.{name} moved to {new}.{name}; import it from there "
        "(the old path goes in the next release).",
        DeprecationWarning,
        stacklevel=3,
    )
    return getattr(import_module(new), name)


class _MovedModule(types.ModuleType):
    """A deprecated module path: each attribute is read from the new modules."""

    _targets: tuple[str, ...]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        for target in self._targets:
            module = import_module(target)
            if hasattr(module, name):
                return getattr(module, name)
        msg = f"module {self.__name__!r} (moved to {self._targets[0]!r}) has no attribute {name!r}"
        raise AttributeError(msg)

    def __dir__(self) -> list[str]:
        names: set[str] = set()
        for target in self._targets:
            names.update(getattr(import_module(target), "__all__", ()))
        return sorted(names)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        targets = MOVED[spec.name]
        new = _SHOWN.get(spec.name, targets[0])
        warnings.warn(
            f"{spec.name} moved to {new}; import from the new path "
            f"(the old one goes in the next release).",
            DeprecationWarning,
            stacklevel=2,  # warnings skips importlib's frames: 2 is the importer
        )
        module = _MovedModule(spec.name, f"Deprecated: moved to {new}.")
        module._targets = targets
        module.__all__ = module.__dir__()  # type: ignore[attr-defined]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


_FINDER = _Finder()


def install() -> None:
    """Put the finder of moved paths on ``sys.meta_path`` (once)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)
