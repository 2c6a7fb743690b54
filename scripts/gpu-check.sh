#!/usr/bin/env bash
# The device check on a machine with a real GPU (WebGPU through Dawn: Vulkan, Metal or D3D12):
#   bash scripts/gpu-check.sh [--json]
# Prints the adapter, checks the webgpu backend against wasm (bench/gpu.ts parity on the
# tiny preset's dimensions: logits, every gradient, an optimiser step, greedy decoding,
# checkpoints both ways), then tokens/s of training steps for the tiny, small and
# stack-100m presets (batch 16, 16 and 4 at seq 512). Exit 1 when parity fails. Needs the
# optional dependencies `webgpu` and `@tensorflow/tfjs-backend-webgpu` (npm install).
# A software adapter (SwiftShader) is reported as such: its figures are not a GPU's.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
# Dawn finds NVIDIA's Vulkan driver through the loader; say what the loader sees.
ls /usr/share/vulkan/icd.d /etc/vulkan/icd.d 2>/dev/null || true
exec node --require tsx/cjs bench/gpu.ts device "$@"
