"""Every package and public module of ``taskcal_agents`` and ``calibrators`` keeps its
``__all__`` in sync with what it defines (anchor: httpx ``tests/test_exported_members.py``)."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import itertools
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


# --------------------------------------------------------------------------------------
# the surface a user holds: the facade and each package's __all__

SURFACE = (
    "taskcal_agents",
    "taskcal_agents.parsing",
    "taskcal_agents.decision",
    "taskcal_agents.sampling",
    "taskcal_agents.serving",
    "taskcal_agents.models",
    "taskcal_agents.datasets",
    "taskcal_agents.workflow",
    "taskcal_agents.production",
    "taskcal_agents.langchain",
    "taskcal_agents.testing",
    "taskcal_agents.errors",
    "calibrators",
    "calibrators.metrics",
)
"""The namespaces whose ``__all__`` is the public surface (submodules keep their own)."""

SURFACE_LIMIT = 112
"""The most names the surface may list, all namespaces together (a name listed by the
facade and by its package counts twice). 111: ``calibrators.LogisticCalibrator`` joined
its sibling maps; 112: ``errors.SamplingServerError`` (a server fault while sampling)."""


def _surface() -> list[tuple[str, str]]:
    return [(m, name) for m in SURFACE for name in importlib.import_module(m).__all__]


def test_the_surface_stays_small() -> None:
    surface = _surface()
    per_module = {m: len(importlib.import_module(m).__all__) for m in SURFACE}
    assert len(surface) <= SURFACE_LIMIT, (
        f"{len(surface)} public names (at most {SURFACE_LIMIT}): {per_module}; export a new "
        "name from its submodule, not from the package"
    )


def _source_of(module_name: str, name: str) -> str:
    """The module whose top level assigns *name*, following lazy exports and re-imports."""
    module = importlib.import_module(module_name)
    exports = _lazy_exports(module)
    if name in exports:
        return _source_of(exports[name], name)
    tree = ast.parse(inspect.getsource(module))
    for node in tree.body:
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and any((alias.asname or alias.name) == name for alias in node.names)
        ):
            return _source_of(node.module, name)
    return module_name


def _has_attribute_docstring(module_name: str, name: str) -> bool:
    """Whether the top-level assignment of *name* is followed by a string literal."""
    body = ast.parse(inspect.getsource(importlib.import_module(module_name))).body
    for node, after in itertools.pairwise(body):
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and any(
            isinstance(t, ast.Name) and t.id == name for t in targets
        ):
            return (
                isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
                and bool(after.value.value.strip())
            )
    return False


def _own_docstring(obj: object) -> str | None:
    """*obj*'s own docstring: not a base class's, nor the one ``dataclass`` makes up."""
    doc = vars(obj).get("__doc__") if inspect.isclass(obj) else getattr(obj, "__doc__", None)
    if not isinstance(doc, str) or not doc.strip():
        return None
    name = getattr(obj, "__name__", "")
    if inspect.isclass(obj) and doc.startswith(f"{name}(") and doc.rstrip().endswith(")"):
        return None  # dataclass / NamedTuple: the signature, not a docstring
    return inspect.getdoc(obj)


@pytest.mark.parametrize(("module_name", "name"), _surface())
def test_every_public_name_has_a_docstring(module_name: str, name: str) -> None:
    obj = getattr(importlib.import_module(module_name), name)
    if inspect.isclass(obj) or inspect.isroutine(obj):
        assert _own_docstring(obj), f"{module_name}.{name} has no docstring of its own"
    else:
        source = _source_of(module_name, name)
        assert _has_attribute_docstring(source, name), (
            f"{module_name}.{name} (assigned in {source}) needs a docstring: a string literal "
            "right after its assignment"
        )


def test_the_docstring_checks_see_what_is_missing() -> None:
    class Bare:
        pass

    class Child(Exception):
        pass

    @dataclasses.dataclass
    class Made:
        x: int

    assert _own_docstring(Bare) is None
    assert _own_docstring(Child) is None  # Exception's docstring is not its own
    assert _own_docstring(Made) is None
    assert _has_attribute_docstring("taskcal_agents", "__version__")
    assert not _has_attribute_docstring("taskcal_agents", "_EXPORTS")
    assert _source_of("taskcal_agents.langchain", "HITL_QUESTION_ID") == (
        "taskcal_agents.langchain.interop"
    )
    assert _source_of("taskcal_agents.models", "MODELS") == "taskcal_agents.models._registry"
