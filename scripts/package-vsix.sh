#!/usr/bin/env bash
# A per-platform .vsix carrying the WebGPU backend for that platform only:
#   bash scripts/package-vsix.sh TARGET [--no-vsix]
# TARGET: linux-x64, linux-arm64, darwin-x64, darwin-arm64, win32-x64, win32-arm64.
# Copies the `webgpu` package's dawn.node for TARGET (~21 MB; on Windows with its DirectX
# shader compilers) into dist/webgpu/ and bundles @tensorflow/tfjs-backend-webgpu there
# against the extension's own tfjs-core (scripts/tfjs-core-global.cjs), then runs
# `vsce package --target TARGET`. It also stages koffi (the FFI the wasm backend's matrix
# products reach the machine's BLAS through: trainer/model/blasMatMul.ts) with TARGET's
# koffi.node only (~2 MB) into dist/koffi/. Without TARGET's files (the optional dependency is
# absent) it stops with a message: use `npm run package` for the universal .vsix (wasm and
# cpu only). `--no-vsix`: stop after dist/webgpu/ (for checking the layout).
# Why per platform: docs/decisions.md, "GPU packages".
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: bash scripts/package-vsix.sh TARGET [--no-vsix]}
koffi_triplet=${target/-/_}
case "$target" in
  linux-x64 | linux-arm64 | win32-x64 | win32-arm64) dawn="$target" ;;
  darwin-x64 | darwin-arm64) dawn=darwin-universal ;;
  *) echo "package-vsix: unknown target '$target' (linux-x64, linux-arm64, darwin-x64, darwin-arm64, win32-x64, win32-arm64)" >&2; exit 2 ;;
esac
src="node_modules/webgpu/dist/$dawn"
tfwg="node_modules/@tensorflow/tfjs-backend-webgpu/dist/tf-backend-webgpu.node.js"
[ -f "$src/dawn.node" ] || { echo "package-vsix: $src/dawn.node missing (npm install the optional dependency 'webgpu')" >&2; exit 1; }
[ -f "$tfwg" ] || { echo "package-vsix: $tfwg missing (npm install the optional dependency '@tensorflow/tfjs-backend-webgpu')" >&2; exit 1; }

koffi_node="node_modules/koffi/build/koffi/$koffi_triplet/koffi.node"
[ -f "$koffi_node" ] || { echo "package-vsix: $koffi_node missing (npm install the optional dependency 'koffi')" >&2; exit 1; }

node scripts/build.mjs
rm -rf dist/koffi
mkdir -p "dist/koffi/build/koffi/$koffi_triplet"
cp node_modules/koffi/index.js node_modules/koffi/LICENSE.txt dist/koffi/
cp "$koffi_node" "dist/koffi/build/koffi/$koffi_triplet/"
rm -rf dist/webgpu
mkdir -p dist/webgpu
cp "$src"/* dist/webgpu/
npx esbuild "$tfwg" --bundle --platform=node --format=cjs --log-level=warning \
  --alias:@tensorflow/tfjs-core=./scripts/tfjs-core-global.cjs --outfile=dist/webgpu/tfjs-backend-webgpu.js
echo "package-vsix: dist/webgpu/ for $target: $(du -sh dist/webgpu | cut -f1); dist/koffi/: $(du -sh dist/koffi | cut -f1)"
[ "${2:-}" = "--no-vsix" ] && exit 0
AGENT_LAB_KEEP_WEBGPU=1 npx vsce package --no-dependencies --allow-missing-repository --no-rewrite-relative-links --readme-path dist/vsix/README.md --target "$target" -o "agent-lab-$target.vsix"
