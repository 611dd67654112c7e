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

__all__ = ["MOVED", "install"]

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
    _P + "monitor": (_P + "production.monitor",),
    _P + "runnable": (_P + "langchain.runnable",),
    _P + "chat_model": (_P + "langchain.chat_model",),
    _P + "middleware": (_P + "langchain.middleware",),
    _P + "decision_model": (_P + "langchain.decision_model",),
    _P + "interop": (_P + "langchain.interop",),
}
"""Old module path → the modules its names live in now (the first holds most)."""

_SHOWN = {
    _P + "parsers": _P + "parsing",
    _P + "artefact": _P + "decision.artefact (ArtefactReloader: taskcal_agents.production.reload)",
}
"""The new path a warning names where the names went to more than one module."""


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


def _stacklevel() -> int:
    """The stack level of the frame that imported the old path (past importlib's frames)."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and (
        frame.f_code.co_filename.startswith("<frozen importlib")
        or frame.f_code.co_filename == __file__
    ):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


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
            stacklevel=_stacklevel(),
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
