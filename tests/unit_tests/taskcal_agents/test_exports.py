"""The public surface of ``taskcal_agents`` and ``calibrators`` is what it says it is.

Public means a public module's ``__all__``: a module is public when no part of its dotted
path starts with an underscore (the packages, ``taskcal_agents.errors``,
``taskcal_agents.cli``, ``calibrators.metrics``); every other module is private. The
surface is the unique names over every public module's ``__all__`` plus every name a lazy
``__getattr__`` serves (the 0.1 deprecation shims excluded): its size is kept here, every
name in it has a docstring, and the README, the docs and the examples import only from it.
Each ``__all__`` stays in sync with what its module defines (anchor: httpx
``tests/test_exported_members.py``).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import itertools
import pkgutil
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import calibrators
import taskcal_agents
from taskcal_agents._compat import MOVED

ROOT = Path(__file__).resolve().parents[3]


def _is_private(module_name: str) -> bool:
    return any(part.startswith("_") for part in module_name.split("."))


def _public_modules() -> list[str]:
    names = []
    for package in (taskcal_agents, calibrators):
        found = [package.__name__]
        found += [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
        names += [n for n in found if not _is_private(n) and n not in MOVED]
    return sorted(names)


PUBLIC_MODULES = _public_modules()


def _lazy_exports(module: ModuleType) -> dict[str, str]:
    """The names *module*'s ``__getattr__`` serves → the module each is read from."""
    exports: dict[str, str] = getattr(module, "_EXPORTS", {})
    return exports


def test_discovery_finds_the_public_modules() -> None:
    assert "taskcal_agents.workflow" in PUBLIC_MODULES
    assert "calibrators.metrics" in PUBLIC_MODULES
    assert "taskcal_agents.errors" in PUBLIC_MODULES
    assert "taskcal_agents.decision._decider" not in PUBLIC_MODULES


def test_every_other_module_is_a_package_or_private() -> None:
    """Besides the packages, only the modules users import by name are public."""
    modules = [m for m in PUBLIC_MODULES if not hasattr(importlib.import_module(m), "__path__")]
    assert modules == ["calibrators.metrics", "taskcal_agents.cli", "taskcal_agents.errors"]


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_all_is_defined_unique_and_resolves(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert isinstance(getattr(module, "__all__", None), list), f"{module_name} has no __all__"
    assert len(set(module.__all__)) == len(module.__all__), f"{module_name}.__all__ repeats"
    for name in module.__all__:
        assert hasattr(module, name), f"{module_name}.__all__ names missing {name!r}"


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_lazy_exports_are_public_and_resolve_to_the_same_object(module_name: str) -> None:
    module = importlib.import_module(module_name)
    exports = _lazy_exports(module)
    assert set(exports) <= set(module.__all__), "a name served lazily is public: list it"
    for name, source in exports.items():
        assert getattr(module, name) is getattr(importlib.import_module(source), name)
    if "__getattr__" in vars(module):
        assert dir(module) == sorted(module.__all__)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_one_export_mechanism(module_name: str) -> None:
    """A module's ``__getattr__`` is the one helper's (no ad-hoc lookup, no hidden table)."""
    getattr_ = vars(importlib.import_module(module_name)).get("__getattr__")
    if getattr_ is not None:
        assert getattr_.__module__ == "taskcal_agents._exports", module_name
        assert getattr_.__qualname__ == "lazy_exports.<locals>.__getattr__", module_name


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


@pytest.mark.parametrize("name", sorted(taskcal_agents._EXPORTS))
def test_the_facade_names_are_public_in_their_package(name: str) -> None:
    package = importlib.import_module(taskcal_agents._EXPORTS[name])
    assert getattr(taskcal_agents, name) is getattr(package, name)
    assert name in package.__all__


@pytest.mark.parametrize(
    "module_name",
    [
        "taskcal_agents",
        "taskcal_agents.workflow",
        "taskcal_agents.langchain",
        "taskcal_agents.decision",
    ],
)
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
        "for m in ('taskcal_agents.langchain._runnable', 'langchain_core')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    "statement", ["import taskcal_agents.workflow", "import taskcal_agents.cli"]
)
def test_cli_and_workflow_import_without_langchain(statement: str) -> None:
    assert _imports_langchain(statement) == "False"


MADE_PRIVATE_01 = {
    "taskcal_agents.endpoint": "taskcal_agents.serving",
    "taskcal_agents.sampling.logprob": "taskcal_agents.sampling",
    "taskcal_agents.sampling.offline": "taskcal_agents.sampling",
    "taskcal_agents.testing.fake_openai": "taskcal_agents.testing",
}
"""Public modules of 0.1 that are private now → the package that exports their public names."""


@pytest.mark.parametrize("old", sorted(MADE_PRIVATE_01))
def test_a_01_module_made_private_warns_and_forwards(old: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(
        DeprecationWarning, match="^" + re.escape(f"{old} moved to {MADE_PRIVATE_01[old]};")
    ):
        module = importlib.import_module(old)
    (home,) = MOVED[old]
    private = importlib.import_module(home)
    assert _is_private(home)
    for name in private.__all__:
        assert getattr(module, name) is getattr(private, name), f"{old}.{name}"
    package = importlib.import_module(MADE_PRIVATE_01[old])
    assert set(package.__all__) & set(private.__all__), f"{old}: no public name in {package}"


# --------------------------------------------------------------------------------------
# the surface: its size, and a docstring for every name


def _surface() -> dict[str, str]:
    """Every public name → the first public module that lists it (or serves it lazily)."""
    found: dict[str, str] = {}
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in [*module.__all__, *_lazy_exports(module)]:
            found.setdefault(name, module_name)
    return found


SURFACE_SIZE = 148
"""The number of public names, all public modules together (a name the facade and its
package both list counts once). A new public name raises it here, deliberately."""


def test_the_surface_keeps_its_size() -> None:
    surface = _surface()
    per_module = {m: len(importlib.import_module(m).__all__) for m in PUBLIC_MODULES}
    assert len(surface) == SURFACE_SIZE, (
        f"{len(surface)} public names (kept: {SURFACE_SIZE}): {per_module}. A name other "
        "packages need but users do not is imported in the package's __init__ outside "
        "__all__; a new public name raises SURFACE_SIZE"
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


@pytest.mark.parametrize(("name", "module_name"), sorted(_surface().items()))
def test_every_public_name_has_a_docstring(name: str, module_name: str) -> None:
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
        "taskcal_agents.langchain._interop"
    )
    assert _source_of("taskcal_agents", "Task") == "taskcal_agents.decision._task"
    assert _source_of("taskcal_agents.models", "MODELS") == "taskcal_agents.models._registry"


# --------------------------------------------------------------------------------------
# what the README, the docs and the examples import is public

_FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```", re.MULTILINE | re.DOTALL)
_IMPORT_LINE = re.compile(
    r"^\s*(?:from\s+(?P<from>(?:taskcal_agents|calibrators)[\w.]*)\s+import\s+(?P<names>.+)"
    r"|import\s+(?P<import>(?:taskcal_agents|calibrators)[\w.]*))",
    re.MULTILINE,
)
_DIRECTIVE = re.compile(r"^:::\s+(?P<path>[\w.]+)", re.MULTILINE)


def _documents() -> list[Path]:
    return [
        ROOT / "README.md",
        *sorted((ROOT / "docs").rglob("*.md")),
        *sorted((ROOT / "examples").glob("*.py")),
    ]


def _code_of(path: Path) -> list[str]:
    """The Python a reader copies from *path*: an example's source, a page's code blocks."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        return [text]
    return [
        "\n".join(
            line[4:] if line[:4] in (">>> ", "... ") else line for line in m["body"].split("\n")
        )
        for m in _FENCE.finditer(text)
        if m["lang"] in ("python", "py", "pycon", "")
    ]


def _imported(code: str) -> list[tuple[str, list[str]]]:
    """``(module, names)`` of each import of ours in *code* (``names`` empty: ``import X``)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:  # a fragment: read the import lines alone
        return [
            (
                m["from"],
                [n.split()[0] for n in re.sub(r"[()\\]", "", m["names"]).split(",") if n.strip()],
            )
            if m["from"]
            else (m["import"], [])
            for m in _IMPORT_LINE.finditer(code)
        ]
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
    return [(m, n) for m, n in found if m.split(".")[0] in ("taskcal_agents", "calibrators")]


def _not_public(module_name: str, names: list[str]) -> list[str]:
    """What in ``from module_name import names`` (or ``import module_name``) is not public."""
    if _is_private(module_name) or module_name not in PUBLIC_MODULES:
        return [f"{module_name} (not a public module)"]
    public = set(importlib.import_module(module_name).__all__)
    return [
        f"{module_name}.{name}"
        for name in names
        if name not in public and f"{module_name}.{name}" not in PUBLIC_MODULES
    ]


@pytest.mark.parametrize("path", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_readme_docs_and_examples_import_only_public_names(path: Path) -> None:
    bad = [
        problem
        for code in _code_of(path)
        for module_name, names in _imported(code)
        for problem in _not_public(module_name, names)
    ]
    assert not bad, f"{path.relative_to(ROOT)} imports what is not public: {bad}"


def test_the_api_pages_render_public_modules_and_names() -> None:
    for page in sorted((ROOT / "docs" / "api").glob("*.md")):
        for m in _DIRECTIVE.finditer(page.read_text(encoding="utf-8")):
            module_name, _, name = m["path"].rpartition(".")
            assert m["path"] in PUBLIC_MODULES or not _not_public(module_name, [name]), (
                f"{page.name}: ::: {m['path']} is neither a public module nor a public name"
            )


def test_the_import_check_sees_what_is_not_public() -> None:
    code = (
        "from taskcal_agents.decision import Task, Nope\n"
        "from taskcal_agents.decision._task import Task\n"
        "import taskcal_agents.langchain._runnable\n"
        "from taskcal_agents import langchain\n"
    )
    problems = [p for m, n in _imported(code) for p in _not_public(m, n)]
    assert problems == [
        "taskcal_agents.decision.Nope",
        "taskcal_agents.decision._task (not a public module)",
        "taskcal_agents.langchain._runnable (not a public module)",
    ]
    fragment = "from taskcal_agents.parsing._labels import (\n    Parser,\n"  # cut short
    assert _imported(fragment) == [("taskcal_agents.parsing._labels", [])]
