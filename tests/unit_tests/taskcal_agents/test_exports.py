from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import taskcal_agents
from taskcal_agents import sampling

MODULES = [
    "taskcal_agents.adaptive",
    "taskcal_agents.answer_clusters",
    "taskcal_agents.belief",
    "taskcal_agents.chat_model",
    "taskcal_agents.decision",
    "taskcal_agents.decision_model",
    "taskcal_agents.middleware",
    "taskcal_agents.parsers",
    "taskcal_agents.prompting",
    "taskcal_agents.runnable",
    "taskcal_agents.sampling",
    "taskcal_agents.sampling._chat_models",
    "taskcal_agents.task",
    "taskcal_agents.tasks",
]


def test_all_in_sync_with_lazy_exports() -> None:
    exports = taskcal_agents._EXPORTS
    assert sorted(taskcal_agents.__all__) == sorted([*exports, "__version__"])
    assert dir(taskcal_agents) == sorted(taskcal_agents.__all__)


@pytest.mark.parametrize("name", sorted(taskcal_agents._EXPORTS))
def test_lazy_export_resolves(name: str) -> None:
    obj = getattr(taskcal_agents, name)
    module = importlib.import_module(taskcal_agents._EXPORTS[name])
    assert obj is getattr(module, name)
    assert name in module.__all__


def test_unknown_attribute() -> None:
    with pytest.raises(AttributeError, match=r"^module 'taskcal_agents' has no attribute 'nope'$"):
        taskcal_agents.nope  # noqa: B018


@pytest.mark.parametrize("module_name", MODULES)
def test_module_all_is_defined(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        assert hasattr(module, name), f"{module_name}.__all__ names missing {name!r}"


def test_sampling_package_reexports_chat_model_sampler() -> None:
    from taskcal_agents.sampling import _chat_models

    assert set(_chat_models.__all__) <= set(sampling.__all__)


def test_import_is_lazy() -> None:
    code = (
        "import sys, taskcal_agents; "
        "print(any(m in sys.modules for m in ('taskcal_agents.runnable', 'langchain_core')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
