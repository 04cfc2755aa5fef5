#!/usr/bin/env bash
# Builds the CUDA binaries HERE and stages them, with what they need, in .gpu-data/ (an
# ignored folder that travels to a lent GPU machine when a `run` names it in `carry`), so that
# the device's short lease is spent checking and timing, not compiling. scripts/gpu-run.sh is
# the command that runs there.
#
#   .gpu-data/bin       ember-gpu-check, test_cuda_gpu, ember (the `gpu` preset's builds)
#   .gpu-data/lib       libember_cuda.so (sm_90)
#   .gpu-data/syslib    the `ember` CLI's shared libraries that are not glibc/libstdc++
#                       (sqlite, curl, httplib and theirs: a bare CUDA machine has none)
#   .gpu-data/stdlib    this machine's libstdc++/libgcc_s, used there only if theirs is older
#   .gpu-data/testdata  stories260K and its greedy reference (test_cuda_gpu reads them from
#                       /tmp/ember-testdata, compiled in; gpu-run.sh links it there)
#   .gpu-data/text      a text for the perplexity comparison (GPL-3)
#   .gpu-data/peer      llama.cpp's llama-bench with its CUDA backend for sm_90 (the peer that
#                       gpu-run.sh's `peer` step runs beside `ember bench`), when built: by
#                       `EMBER_LLAMA_CUDA=1 scripts/llama-cpp-tools.sh llama-bench` (long: see
#                       docs/BENCHMARKS.md), or here with EMBER_STAGE_PEER=build
#
# usage: scripts/gpu-stage.sh      (needs the CUDA toolkit at /usr/local/cuda; ~1 min cached)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build/gpu-stage
STAGE=$ROOT/.gpu-data
TESTDATA_THERE=/tmp/ember-testdata  # the path compiled into test_cuda_gpu

grep -qx '/.gpu-data/' "$ROOT/.git/info/exclude" 2>/dev/null || {
  mkdir -p "$ROOT/.git/info"
  echo '/.gpu-data/' >>"$ROOT/.git/info/exclude"
}
export CUDACXX=${CUDACXX:-/usr/local/cuda/bin/nvcc}
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
(cd "$ROOT" && cmake --preset gpu -B "$BUILD" "${LAUNCHER[@]}" \
  -DEMBER_TESTDATA_DIR="$TESTDATA_THERE" -DEMBER_TEST_MODELS_DIR=/tmp/ember-test-models >/dev/null)
cmake --build "$BUILD" -j "$(nproc)" --target ember_cuda ember-gpu-check ember test_cuda_gpu

rm -rf "$STAGE"
mkdir -p "$STAGE"/{bin,lib,syslib,stdlib,testdata/models,text}
cp "$BUILD/tools/gpu_check/ember-gpu-check" "$BUILD/tests/kernels/cuda_emu/test_cuda_gpu" \
  "$BUILD/app/cli/ember" "$STAGE/bin/"
cp "$BUILD/lib/libember_cuda.so" "$STAGE/lib/"
ldd "$BUILD/app/cli/ember" | awk '/=>/ {print $1, $3}' |
  grep -vE '^(libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s)\.so' |
  while read -r name path; do cp -L "$path" "$STAGE/syslib/$name"; done
cp -L /lib/x86_64-linux-gnu/libstdc++.so.6 /lib/x86_64-linux-gnu/libgcc_s.so.1 "$STAGE/stdlib/"
TESTDATA=${EMBER_TESTDATA_DIR:-$ROOT/../shared/testdata}
cp "$TESTDATA"/models/stories260K* "$STAGE/testdata/models/"
cp /usr/share/common-licenses/GPL-3 "$STAGE/text/"
# The peer: staged when its cached build exists (the tools script returns at once then).
peer_cache="${EMBER_LLAMA_TOOLS_DIR:-$HOME/.cache/ember/llama-tools}/build-${LLAMA_CPP_PYTHON_VERSION:-0.3.36}-cuda-sm90/bin"
if [[ -x "$peer_cache/llama-bench" || "${EMBER_STAGE_PEER:-}" == build ]]; then
  peer_bin=$(EMBER_LLAMA_CUDA=1 "$ROOT/scripts/llama-cpp-tools.sh" llama-bench | tail -1)
  mkdir -p "$STAGE/peer"
  cp "$peer_bin/llama-bench" "$STAGE/peer/"
else
  echo "gpu-stage: no CUDA llama-bench in $peer_cache: the peer step will be skipped" \
    "(EMBER_STAGE_PEER=build builds it)"
fi
echo "gpu-stage: $(du -sh "$STAGE" | cut -f1) in $STAGE (carry .gpu-data; run scripts/gpu-run.sh there)"
