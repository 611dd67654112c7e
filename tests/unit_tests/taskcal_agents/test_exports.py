"""Every package and public module of ``taskcal_agents`` and ``calibrators`` keeps its
``__all__`` in sync with what it defines (anchor: httpx ``tests/test_exported_members.py``)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
from types import ModuleType

import pytest

import calibrators
import taskcal_agents


def _public_modules() -> list[str]:
    names = []
    for package in (taskcal_agents, calibrators):
        found = [package.__name__]
        found += [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
        names += [n for n in found if not any(p.startswith("_") for p in n.split("."))]
    return sorted(names)


PUBLIC_MODULES = _public_modules()


def _lazy_exports(module: ModuleType) -> dict[str, str]:
    exports: dict[str, str] = getattr(module, "_EXPORTS", {})
    return exports


def test_discovery_finds_the_packages() -> None:
    for name in ("taskcal_agents", "taskcal_agents.workflow", "calibrators", "calibrators.metrics"):
        assert name in PUBLIC_MODULES


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_all_is_defined_unique_and_resolves(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert isinstance(getattr(module, "__all__", None), list), f"{module_name} has no __all__"
    assert len(set(module.__all__)) == len(module.__all__), f"{module_name}.__all__ repeats"
    for name in module.__all__:
        assert hasattr(module, name), f"{module_name}.__all__ names missing {name!r}"


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_lazy_exports_resolve_to_the_same_object(module_name: str) -> None:
    module = importlib.import_module(module_name)
    exports = _lazy_exports(module)
    assert set(exports) <= set(module.__all__)
    for name, source in exports.items():
        assert getattr(module, name) is getattr(importlib.import_module(source), name)
    if exports:
        assert dir(module) == sorted(module.__all__)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_public_definitions_are_exported_or_private(module_name: str) -> None:
    module = importlib.import_module(module_name)
    exported = set(module.__all__)
    stray = [
        name
        for name, value in vars(module).items()
        if name.isidentifier()  # pydantic registers parametrised generics as "Base[...]"
        and not name.startswith("_")
        and (inspect.isfunction(value) or inspect.isclass(value))
        and value.__module__ == module_name
        and name not in exported
    ]
    assert not stray, f"{module_name} defines public names outside __all__: {stray}"


def test_root_all_in_sync_with_lazy_exports() -> None:
    exports = taskcal_agents._EXPORTS
    assert sorted(taskcal_agents.__all__) == sorted([*exports, "__version__"])
    assert dir(taskcal_agents) == sorted(taskcal_agents.__all__)


@pytest.mark.parametrize("name", sorted(taskcal_agents._EXPORTS))
def test_root_export_is_in_its_module_all(name: str) -> None:
    module = importlib.import_module(taskcal_agents._EXPORTS[name])
    assert getattr(taskcal_agents, name) is getattr(module, name)
    assert name in module.__all__


@pytest.mark.parametrize("module_name", ["taskcal_agents", "taskcal_agents.workflow"])
def test_unknown_attribute(module_name: str) -> None:
    module = importlib.import_module(module_name)
    with pytest.raises(AttributeError, match=rf"^module '{module_name}' has no attribute 'nope'$"):
        module.nope  # noqa: B018


def _imports_langchain(statement: str) -> str:
    code = f"import sys; {statement}; print('langchain_core' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_import_is_lazy() -> None:
    code = (
        "import sys, taskcal_agents; "
        "print(any(m in sys.modules "
        "for m in ('taskcal_agents.langchain.runnable', 'langchain_core')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    "statement", ["import taskcal_agents.workflow", "import taskcal_agents.cli"]
)
def test_cli_and_workflow_import_without_langchain(statement: str) -> None:
    assert _imports_langchain(statement) == "False"
