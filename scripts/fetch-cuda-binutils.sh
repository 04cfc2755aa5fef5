#!/usr/bin/env bash
# NVIDIA's cuobjdump and nvdisasm (the SASS side of the offline performance model,
# tools/perf_model), which the wheel-installed CUDA 13.0 toolkit in /usr/local/cuda lacks.
# NVIDIA publishes them on the package index as nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm
# (oldest there: 13.2.51, pinned; a 13.2 cuobjdump reads CUDA 13.0's sm_90 objects). Each
# wheel holds one binary, nvidia/cu13/bin/<tool>, plus its licence and metadata.
#
# Cache: ${EMBER_CUDA_BINUTILS:-$HOME/.cache/ember/cuda-binutils}/bin (CMake looks there).
# Idempotent; the binaries are moved into place only once complete. Prints the bin folder.
set -euo pipefail
# shellcheck disable=SC2034  # common.sh logs with it
EMBER_SCRIPT="fetch-cuda-binutils"
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
VERSION=13.2.51
DEST="${EMBER_CUDA_BINUTILS:-$HOME/.cache/ember/cuda-binutils}"
if [[ -x "$DEST/bin/cuobjdump" && -x "$DEST/bin/nvdisasm" && "$(cat "$DEST/VERSION" 2>/dev/null)" == "$VERSION" ]]; then
  echo "$DEST/bin"
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for tool in cuobjdump nvdisasm; do
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp/wheels" "nvidia-cuda-$tool==$VERSION" >&2 ||
    ember_die "cannot download nvidia-cuda-$tool==$VERSION from the package index"
done
for whl in "$tmp"/wheels/*.whl; do
  python3 -m zipfile -e "$whl" "$tmp/unpacked"
done
for tool in cuobjdump nvdisasm; do
  [[ -f "$tmp/unpacked/nvidia/cu13/bin/$tool" ]] || ember_die "the nvidia-cuda-$tool wheel has no nvidia/cu13/bin/$tool"
done
mkdir -p "$DEST/bin"
for tool in cuobjdump nvdisasm; do
  chmod +x "$tmp/unpacked/nvidia/cu13/bin/$tool"
  mv "$tmp/unpacked/nvidia/cu13/bin/$tool" "$DEST/bin/$tool.part"
  mv "$DEST/bin/$tool.part" "$DEST/bin/$tool"
done
"$DEST/bin/cuobjdump" --version >/dev/null || ember_die "$DEST/bin/cuobjdump does not run"
echo "$VERSION" >"$DEST/VERSION"
ember_log "cuobjdump and nvdisasm $VERSION in $DEST/bin"
echo "$DEST/bin"
