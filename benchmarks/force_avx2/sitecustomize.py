"""Make this machine look like an AVX2-only x86 CPU to PyTorch, oneDNN and vLLM-CPU.

Put this folder on ``PYTHONPATH`` (``benchmarks/force_avx2.sh`` does, with the two
environment variables below) to check the path an AVX2 machine takes (AMD Zen 2/3, most
laptops) on one with AVX-512:

- ``ATEN_CPU_CAPABILITY=avx2`` caps PyTorch's own kernels;
- ``ONEDNN_MAX_CPU_ISA=AVX2`` caps oneDNN, whose bf16 matmul then cannot be created (vLLM logs
  "Failed to create oneDNN linear, fallback to torch linear", as on a real AVX2 CPU);
- vLLM-CPU picks its kernel library (``_C``, ``_C_AVX512`` or ``_C_AVX2``) and its attention
  ISA from ``torch.cpu._is_avx512_supported()`` and friends, which read CPUID and ignore both
  variables: this module makes them answer ``False`` in every Python process started with it
  (the API server and the engine core alike), patched as torch finishes importing, so
  a process that never imports torch does not load it.
"""

import importlib.abc
import importlib.util
import os
import sys

_ISA_CHECKS = (
    "_is_avx512_supported",
    "_is_avx512_vnni_supported",
    "_is_avx512_bf16_supported",
    "_is_amx_tile_supported",
    "_is_amx_fp16_supported",
)


def _patch(torch):
    for name in _ISA_CHECKS:
        if hasattr(torch.cpu, name):
            setattr(torch.cpu, name, lambda: False)


class _PatchTorchOnImport(importlib.abc.MetaPathFinder):
    """Find ``torch`` as usual, then patch its ISA checks once its module has run.

    It stays on ``sys.meta_path`` until torch is imported: a bare
    ``importlib.util.find_spec("torch")`` (vLLM makes some) imports nothing.
    """

    busy = False

    def find_spec(self, name, path=None, target=None):
        if name != "torch" or self.busy:
            return None
        self.busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy = False
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _patch(module)
            if self in sys.meta_path:
                sys.meta_path.remove(self)

        spec.loader.exec_module = exec_and_patch
        return spec


if os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper() == "AVX2":
    if "torch" in sys.modules:
        _patch(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _PatchTorchOnImport())
