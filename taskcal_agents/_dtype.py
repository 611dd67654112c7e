"""The dtype vLLM serves in: the one the CPU computes fast, chosen in one place.

Registry models are stored in bfloat16 and vLLM casts them at load. A CPU with
``avx512_bf16`` or ``amx_bf16`` multiplies bf16 matrices two to three times faster than
float32; one without them (AMD Zen 2/3, most laptops: AVX2 only) cannot create vLLM's oneDNN
bf16 linear layer ("Failed to create oneDNN linear, fallback to torch linear") and runs every
layer in a fallback about five times slower than float32. :func:`choose_dtype` decides, in
this order:

1. an explicit ``dtype`` argument (``VLLMServer(dtype=...)``, ``taskcal serve --dtype``);
   giving it together with a ``--dtype`` in ``extra_args`` is refused;
2. a ``--dtype`` in ``extra_args`` (kept as it is);
3. the ``TASKCAL_DTYPE`` environment variable;
4. on a GPU, vLLM's own default (no ``--dtype``);
5. on the CPU: ``float32`` unless the CPU flags list ``avx512_bf16`` or ``amx_bf16`` and
   oneDNN is not capped below them (``ONEDNN_MAX_CPU_ISA``); then a short GEMM probe, run
   by the server's interpreter, confirms that bf16 is the
   faster of the two (flags can lie in a VM), else ``float32``. The probe runs with the
   server's own variables (``VLLMServer(env=...)``) over this process's environment.

Every server, ``taskcal serve``, the demo, the test fixtures, the offline sampler and the
in-Ray engine take their dtype from :func:`choose_dtype`; the choice carries its reason,
which the server log and the command line print.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from taskcal_agents.errors import ConfigurationError

__all__ = [
    "BF16_FLAGS",
    "DTYPES",
    "DTYPE_ENV",
    "DtypeChoice",
    "GemmProbe",
    "choose_dtype",
    "cpu_flags",
    "probe_gemm",
]

DTYPE_ENV = "TASKCAL_DTYPE"
"""Environment variable that sets the serving dtype (``auto`` or one of :data:`DTYPES`)."""

DTYPES = ("bfloat16", "float32", "float16")
"""The dtypes one may ask for (besides ``"auto"``)."""

BF16_FLAGS = ("avx512_bf16", "amx_bf16")
"""CPU flags (``/proc/cpuinfo``) of a fast bf16 matmul."""

_ONEDNN_BELOW_BF16 = frozenset(
    {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI"}
)
"""``ONEDNN_MAX_CPU_ISA`` values that keep oneDNN from bf16 matmul instructions."""

_PROBE = """
import json, time, torch
torch.manual_seed(0)
def rate(dtype):
    x = torch.randn(128, 1024).to(dtype); w = torch.randn(2048, 1024).to(dtype)
    torch.nn.functional.linear(x, w)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter(); torch.nn.functional.linear(x, w)
        best = min(best, time.perf_counter() - t)
    return 2 * 128 * 1024 * 2048 / best / 1e9
print(json.dumps({"bfloat16": rate(torch.bfloat16), "float32": rate(torch.float32)}))
"""
"""Times one ``linear`` of a 128 x 1024 input by a 2048 x 1024 weight in each dtype (best
of five, after a warm-up): about 0.1 s of compute after PyTorch's import."""

_PROBE_ENV = ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "PYTHONPATH", "LD_PRELOAD")
"""The variables that can change what the probe measures (its cache key)."""


@dataclass(frozen=True)
class GemmProbe:
    """What the GEMM probe measured: GFLOP/s of one matmul in each dtype."""

    bfloat16: float
    float32: float


@dataclass(frozen=True)
class DtypeChoice:
    """A serving dtype and why it was chosen.

    Attributes:
        dtype: ``"bfloat16"``, ``"float32"`` or ``"float16"``; ``None`` leaves it to vLLM
            (a GPU with no dtype asked for).
        reason: Why, in words (printed by ``taskcal serve`` and written to the server log).
        source: ``"argument"``, ``"extra_args"``, ``"environment"`` or ``"detected"``.
    """

    dtype: str | None
    reason: str
    source: str

    def args(self) -> list[str]:
        """The ``--dtype`` arguments to add to vLLM's command line (none from extra_args)."""
        if self.dtype is None or self.source == "extra_args":
            return []
        return ["--dtype", self.dtype]

    def __str__(self) -> str:
        return f"{self.dtype or 'auto'} ({self.reason})"


def cpu_flags(path: str | Path = "/proc/cpuinfo") -> frozenset[str]:
    """The CPU's feature flags (the first ``flags`` line of *path*; empty if unreadable)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def probe_gemm(python: str, env: Mapping[str, str] | None = None) -> GemmProbe | None:
    """Time a bf16 and a float32 matmul with *python*'s PyTorch; ``None`` if it cannot run.

    Runs in a child process with *env* (the server's own variables, or this process's), so
    that what caps the server's kernels (``ONEDNN_MAX_CPU_ISA``, ``ATEN_CPU_CAPABILITY``)
    caps the probe too, with one OpenMP thread per CPU this process may use. A result is
    cached per interpreter and per value of those variables (and ``PYTHONPATH``,
    ``LD_PRELOAD``); a failure is not cached.
    """
    env = dict(os.environ if env is None else env)
    key = (python, *((name, env.get(name, "")) for name in _PROBE_ENV))
    if key in _PROBES:
        return _PROBES[key]
    threads = str(len(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else "1"
    try:
        done = subprocess.run(
            [python, "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=120,
            env={**env, "OMP_NUM_THREADS": threads},
            check=False,
        )
        rates = json.loads(done.stdout.strip().splitlines()[-1])
        found = GemmProbe(float(rates["bfloat16"]), float(rates["float32"]))
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, IndexError, TypeError):
        return None
    _PROBES[key] = found
    return found


_PROBES: dict[tuple[object, ...], GemmProbe] = {}
"""The probes measured in this process (see :func:`probe_gemm`)."""


def _dtype_in(extra_args: Sequence[str]) -> str | None:
    """The value of a ``--dtype`` in *extra_args* (``--dtype X`` or ``--dtype=X``)."""
    for i, arg in enumerate(extra_args):
        if arg == "--dtype":
            return extra_args[i + 1] if i + 1 < len(extra_args) else ""
        if arg.startswith("--dtype="):
            return arg.split("=", 1)[1]
    return None


def _checked(dtype: str, owner: str) -> str:
    if dtype not in (*DTYPES, "auto"):
        msg = f"{owner} must be 'auto' or one of {list(DTYPES)!r}, got {dtype!r}."
        raise ConfigurationError(msg)
    return dtype


def choose_dtype(
    dtype: str | None = None,
    *,
    device: str = "cpu",
    extra_args: Sequence[str] = (),
    python: str | None = None,
    env: Mapping[str, str] | None = None,
    flags: frozenset[str] | None = None,
    probe: bool = True,
) -> DtypeChoice:
    """The dtype to serve in, and why.

    In this order: an explicit *dtype* (refused together with a ``--dtype`` in
    *extra_args*); a ``--dtype`` in *extra_args*, as it is; ``$TASKCAL_DTYPE``; on a GPU,
    vLLM's default; on the CPU, float32 unless the flags list ``avx512_bf16`` or
    ``amx_bf16`` and ``ONEDNN_MAX_CPU_ISA`` does not cap oneDNN below them, and then bf16
    only if the GEMM probe (:func:`probe_gemm`) does not find it slower than float32.

    Args:
        dtype: ``None`` or ``"auto"`` to choose; else the dtype to use.
        device: ``"cpu"`` or ``"gpu"``.
        extra_args: vLLM arguments given by the user (a ``--dtype`` there is respected).
        python: The server's interpreter, which runs the GEMM probe; ``None``: no probe.
        env: The server's environment (``TASKCAL_DTYPE``, ``ONEDNN_MAX_CPU_ISA``, the
            probe's); defaults to this process's.
        flags: The CPU flags; defaults to :func:`cpu_flags`.
        probe: Confirm bf16 with the GEMM probe where the flags promise it.

    Raises:
        ConfigurationError: An unknown dtype, or ``dtype`` together with ``--dtype`` in
            ``extra_args``.
    """
    env = os.environ if env is None else env
    given = _dtype_in(extra_args)
    if dtype is not None and dtype != "auto":
        _checked(dtype, "dtype")
        if given is not None:
            msg = (
                f"dtype={dtype!r} and '--dtype {given}' in extra_args both set the dtype; "
                "give it once (the dtype argument, or --dtype in the extra arguments)."
            )
            raise ConfigurationError(msg)
        return DtypeChoice(dtype, "asked for", "argument")
    if given is not None:
        return DtypeChoice(given or None, "--dtype in the extra vLLM arguments", "extra_args")
    asked = env.get(DTYPE_ENV, "").strip()
    if asked and asked != "auto":
        _checked(asked, f"${DTYPE_ENV}")
        return DtypeChoice(asked, f"${DTYPE_ENV}={asked}", "environment")
    if device != "cpu":
        return DtypeChoice(None, "vLLM's default on a GPU", "detected")
    flags = cpu_flags() if flags is None else flags
    fast = [flag for flag in BF16_FLAGS if flag in flags]
    if not fast:
        return DtypeChoice(
            "float32",
            "the CPU has neither avx512_bf16 nor amx_bf16, so bf16 matmuls would run in a "
            "slow fallback",
            "detected",
        )
    cap = env.get("ONEDNN_MAX_CPU_ISA", "").strip().upper()
    if cap in _ONEDNN_BELOW_BF16:
        return DtypeChoice(
            "float32", f"ONEDNN_MAX_CPU_ISA={cap} keeps oneDNN from bf16 matmuls", "detected"
        )
    found = None if not probe or python is None else probe_gemm(python, env)
    if found is None:
        return DtypeChoice("bfloat16", f"the CPU has {', '.join(fast)}", "detected")
    rates = f"{found.bfloat16:.0f} GFLOP/s in bf16 against {found.float32:.0f} in float32"
    if found.bfloat16 < found.float32:
        return DtypeChoice(
            "float32", f"the CPU lists {', '.join(fast)}, but a GEMM ran {rates}", "detected"
        )
    return DtypeChoice("bfloat16", f"{', '.join(fast)}: a GEMM ran {rates}", "detected")
