#!/usr/bin/env bash
# Run a command as an AVX2-only x86 machine would (see force_avx2/sitecustomize.py):
#   bash benchmarks/force_avx2.sh .venv/bin/python benchmarks/bench_cpu_serving.py
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2
export PYTHONPATH="$here/force_avx2${PYTHONPATH:+:$PYTHONPATH}"
exec "$@"
