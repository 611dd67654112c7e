"""Without the ``agents`` extra, importing the middleware names the pip command."""

from __future__ import annotations

import subprocess
import sys

import pytest

CODE = """
import sys
sys.modules[{module!r}] = None  # as if it were not installed
try:
    import taskcal_agents.langchain._middleware
except ImportError as exc:
    print(type(exc).__name__, exc, sep=": ")
else:
    print("imported")
"""


@pytest.mark.parametrize("module", ["langchain.agents", "langgraph"])
def test_a_missing_agents_extra_names_the_pip_command(module: str) -> None:
    code = CODE.format(module=module)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith(
        "ImportError: taskcal_agents.langchain._middleware needs langchain and langgraph, "
        "the 'agents' extra: pip install 'taskcal-agents[agents]' ("
    ), out.stdout


def test_the_extra_exists_in_pyproject() -> None:
    import tomllib
    from pathlib import Path

    pyproject = Path(__file__).resolve().parents[4] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    agents = extras["optional-dependencies"]["agents"]
    assert {requirement.split(">")[0] for requirement in agents} == {"langchain", "langgraph"}
