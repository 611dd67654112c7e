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
  (the API server and the engine core alike).
"""

import os

if os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper() == "AVX2":
    try:
        import torch
    except ImportError:  # an interpreter without torch (pip, before the install) runs as is
        torch = None

    for _name in (
        "_is_avx512_supported",
        "_is_avx512_vnni_supported",
        "_is_avx512_bf16_supported",
        "_is_amx_tile_supported",
        "_is_amx_fp16_supported",
    ):
        if torch is not None and hasattr(torch.cpu, _name):
            setattr(torch.cpu, _name, lambda: False)
