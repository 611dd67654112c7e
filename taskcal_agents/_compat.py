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
        _P + "parsing._labels",
        _P + "parsing._registry",
        _P + "parsing._tool_calls",
        _P + "parsing._text",
    ),
    _P + "tool_turns": (_P + "parsing._tool_turns",),
    _P + "grounding": (_P + "parsing._grounding",),
    _P + "answer_clusters": (_P + "parsing._answer_clusters",),
    _P + "constraints": (_P + "parsing._constraints",),
    _P + "datasets.grading": (_P + "parsing._grading",),
    _P + "prompting": (_P + "sampling._prompts",),
    _P + "belief": (_P + "decision._belief",),
    _P + "options": (_P + "decision._options",),
    _P + "task": (_P + "decision._task",),
    _P + "tasks": (_P + "decision._presets",),
    _P + "risk_control": (_P + "decision._risk_control",),
    _P + "adaptive": (_P + "decision._adaptive",),
    _P + "artefact": (_P + "decision._artefact", _P + "production._reload"),
    _P + "decision_log": (_P + "production._decision_log",),
    _P + "monitor": (_P + "production._monitor", _P + "production._monitor_report"),
    _P + "runnable": (_P + "langchain._runnable",),
    _P + "chat_model": (_P + "langchain._chat_model",),
    _P + "middleware": (_P + "langchain._middleware",),
    _P + "decision_model": (_P + "langchain._decision_model", _P + "parsing._labels"),
    _P + "interop": (_P + "langchain._interop",),
    # public modules of 0.1 that are private now (their public names: the package's)
    _P + "endpoint": (_P + "_endpoint",),
    _P + "sampling.logprob": (_P + "sampling._logprob",),
    _P + "sampling.offline": (_P + "sampling._offline",),
    _P + "testing.fake_openai": (_P + "testing._fake_openai",),
}
"""Old module path → the modules its names live in now (the first holds most)."""

_SHOWN = {
    _P + "artefact": _P + "decision (ArtefactReloader: taskcal_agents.production)",
    _P + "endpoint": _P + "serving",
}
"""The public path a warning names where it is not the package of the first new module."""


def _public_package(module: str) -> str:
    """The public package of *module*: its path up to the first private part."""
    parts = module.split(".")
    private = [i for i, part in enumerate(parts) if part.startswith("_")]
    return ".".join(parts[: private[0]]) if private else module


MOVED_NAMES: dict[str, dict[str, str]] = {
    _P + "decision": {
        name: _P + "decision._decider"
        for name in (
            "TOOL_CALL_ACTION",
            "ActionChoice",
            "carries_out",
            "executable_mbr",
            "mbr_action",
        )
    },
    _P + "workflow": {
        "RefitResult": _P + "production",
        "refit_from_records": _P + "production",
        "Evaluation": _P + "workflow._evaluate",
        "RiskCoverage": _P + "workflow._selective",
        "SamplesFile": _P + "workflow._store",
        "SamplingReport": _P + "workflow._runner",
        "eval_arrays": _P + "workflow._data",
        "evaluate_arrays": _P + "workflow._evaluate",
        "evaluation_to_dict": _P + "workflow._evaluation_json",
        "load_eval_arrays": _P + "workflow._data",
        "risk_coverage": _P + "workflow._selective",
    },
}
"""Names of 0.1 that a package no longer exports → the module that has them now (found
through the package for one release, with a warning: :func:`moved_name`). A private module
means the name is internal now."""


def moved_name(package: str, name: str) -> Any:
    """The object *name* of *package* that moved (see :data:`MOVED_NAMES`), with a warning.

    Raises:
        AttributeError: *name* did not move out of *package*.
    """
    new = MOVED_NAMES.get(package, {}).get(name)
    if new is None:
        msg = f"module {package!r} has no attribute {name!r}"
        raise AttributeError(msg)
    if _public_package(new) == new:
        msg = (
            f"{package}.{name} moved to {new}.{name}; import it from there "
            "(the old path goes in the next release)."
        )
    else:
        msg = f"{package}.{name} is internal now (no longer exported); it goes in the next release."
    warnings.warn(msg, DeprecationWarning, stacklevel=3)
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
        new = _SHOWN.get(spec.name, _public_package(targets[0]))
        warnings.warn(
            f"{spec.name} moved to {new}; import from the new path (a name it does not "
            "export is internal now); the old path goes in the next release.",
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
    """Put the finder of moved paths first on ``sys.meta_path`` (once).

    First, so that an old path is always the forwarding module: a file of the old name left
    behind (an upgrade in place, another checkout's editable install) is never imported.
    """
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
