"""The import graph is layered: no module imports a module of a higher layer.

Every ``import`` counts, including those inside functions (a lazy import is still a
dependency) and the modules a package's lazy-export table names; only ``if TYPE_CHECKING:``
blocks are exempt. The packages, low to high, in
the pipeline's order::

    0  calibrators · errors · _endpoint · testing · _files · _validation · _vllm_cpu · _dtype ·
       _compat · _exports · _stats
    1  parsing        (g_T: completion → label; tool calls in text; grounding; clusters)
    2  decision       (task, belief, options, decider, risk control, adaptive N, artefact)
    3  datasets · models
    4  sampling | serving        (side by side: neither imports the other)
    5  workflow       (offline: sample → fit → evaluate → report)
    6  production     (decision log, monitor, refit, artefact reload)
    7  langchain      (the front doors: Runnable, chat model, middleware, decision model)
    8  commands · cli · taskcal_agents (the lazy facade)

Inside a layer imports may go either way, but never in a cycle. A private module
(``pkg._name``) is imported only from inside its own package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("calibrators", "taskcal_agents")

LAYERS: dict[str, int] = {
    "calibrators": 0,
    "taskcal_agents.errors": 0,
    "taskcal_agents._endpoint": 0,
    "taskcal_agents.testing": 0,
    "taskcal_agents._files": 0,
    "taskcal_agents._validation": 0,
    "taskcal_agents._vllm_cpu": 0,
    "taskcal_agents._dtype": 0,
    "taskcal_agents._compat": 0,
    "taskcal_agents._exports": 0,
    "taskcal_agents._stats": 0,
    "taskcal_agents.parsing": 1,
    "taskcal_agents.decision": 2,
    "taskcal_agents.datasets": 3,
    "taskcal_agents.models": 3,
    "taskcal_agents.sampling": 4,
    "taskcal_agents.serving": 4,
    "taskcal_agents.workflow": 5,
    "taskcal_agents.production": 6,
    "taskcal_agents.langchain": 7,
    "taskcal_agents.commands": 8,
    "taskcal_agents.cli": 8,
    "taskcal_agents": 8,
}
"""Layer of each module or package (the longest matching prefix wins)."""

LAZY_TABLES = ("_EXPORTS",)
"""Tables of lazily exported names → their modules: each module named is an import.
(``_compat``'s tables of moved paths are not: they load only when an old path is used.)"""

SIDE_BY_SIDE = ("taskcal_agents.sampling", "taskcal_agents.serving")
"""Two packages on one layer that must not import each other."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(path): path for package in PACKAGES for path in (ROOT / package).rglob("*.py")
    }


def _is_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(name: str, path: Path) -> set[str]:
    """Every module of ours that *name* imports (function bodies included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    exempt = {  # the body of ``if TYPE_CHECKING:`` only, not its ``else:`` branch
        id(sub)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and _is_type_checking(node)
        for statement in node.body
        for sub in ast.walk(statement)
    }
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):  # lazy exports: ``_EXPORTS = {"Name": "taskcal_agents.x"}``
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Dict):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(x, ast.Name) and x.id in LAZY_TABLES for x in targets):
                found.update(
                    v.value
                    for v in node.value.values
                    if isinstance(v, ast.Constant) and isinstance(v.value, str)
                )
    for node in ast.walk(tree):
        if id(node) in exempt:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            # ``from pkg import mod`` depends on ``pkg.mod``; ``from mod import name`` on ``mod``.
            found.update(f"{module}.{alias.name}" for alias in node.names)
            found.add(module)
    return found


def _resolve(target: str, modules: dict[str, Path]) -> str | None:
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target or None


def _layer(module: str) -> int:
    prefix = module
    while prefix:
        if prefix in LAYERS and (prefix != "taskcal_agents" or module == prefix):
            return LAYERS[prefix]
        prefix = prefix.rpartition(".")[0]
    msg = f"module {module!r} has no layer: add it (or its package) to LAYERS in {__file__}."
    raise AssertionError(msg)


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        for target in _imports(name, path):
            resolved = _resolve(target, modules)
            if resolved is None or resolved == name:
                continue
            # A module's own packages are imported on the way to it; the root facade is not.
            if name.startswith(f"{resolved}.") and resolved not in PACKAGES:
                continue
            edges.add(resolved)
        graph[name] = edges
    return graph


GRAPH = _graph()


def test_every_module_has_a_layer() -> None:
    for module in GRAPH:
        _layer(module)


def _upward(module: str, targets: set[str]) -> list[str]:
    return sorted(t for t in targets if _layer(t) > _layer(module))


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_no_upward_import(module: str) -> None:
    upward = _upward(module, GRAPH[module])
    assert not upward, f"{module} (layer {_layer(module)}) imports higher layers: " + ", ".join(
        f"{t} (layer {_layer(t)})" for t in upward
    )


def test_sampling_and_serving_stay_side_by_side() -> None:
    crossing = sorted(
        (source, target)
        for source, targets in GRAPH.items()
        for target in targets
        for a, b in (SIDE_BY_SIDE, SIDE_BY_SIDE[::-1])
        if (source == a or source.startswith(f"{a}."))
        and (target == b or target.startswith(f"{b}."))
    )
    assert not crossing, f"sampling and serving import each other: {crossing}"


def test_no_import_cycle() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in GRAPH[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in GRAPH:
        if node not in index:
            visit(node)
    assert not cycles, f"import cycles: {cycles}"


def test_the_walk_sees_imports_inside_functions(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import taskcal_agents.workflow\n"
        "def f():\n    from taskcal_agents.sampling import OpenAISampler\n"
    )
    found = _imports("taskcal_agents.probe", source)
    assert "taskcal_agents.sampling.OpenAISampler" in found
    assert "taskcal_agents.workflow" not in found


def test_the_else_branch_of_type_checking_counts(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import taskcal_agents.workflow\n"
        "else:\n    import taskcal_agents.langchain._runnable\n"
    )
    found = _imports("taskcal_agents.probe", source)
    assert "taskcal_agents.langchain._runnable" in found
    assert "taskcal_agents.workflow" not in found


def test_an_upward_edge_is_caught() -> None:
    assert _upward("taskcal_agents.decision._belief", {"taskcal_agents.workflow._runner"}) == [
        "taskcal_agents.workflow._runner"
    ]
    assert _upward("taskcal_agents.workflow._runner", {"taskcal_agents.decision._belief"}) == []
    # Importing the root facade from below is upward; a package's own __init__ is not.
    assert _upward("taskcal_agents.decision._task", {"taskcal_agents"}) == ["taskcal_agents"]


def _private_package(module: str) -> str | None:
    """The package that owns *module* when it is private (``a.b._c`` → ``a.b``), else None."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def test_no_private_import_across_packages() -> None:
    crossing = sorted(
        f"{source} imports {target}"
        for source, targets in GRAPH.items()
        for target in targets
        if (owner := _private_package(target)) is not None
        and source != owner
        and not source.startswith(f"{owner}.")
    )
    assert not crossing, "private modules imported from another package:\n" + "\n".join(crossing)
