#!/usr/bin/env bash
# GPU check for a bare CUDA machine (CUDA toolkit, CMake, ninja, Python; no Qt, no Debian
# packages, no network): builds the `gpu` preset (engine + `ember` CLI + CUDA module for
# sm_90 + ember-gpu-check + the engine and kernel tests), runs the tests (`ctest --preset gpu`;
# doctest, no Qt: carry build/carried-include from scripts/carry-headers.sh), then runs
# ember-gpu-check:
#   (a) every backend op, GPU vs float64 / the CPU backend, every weight type;
#   (b) real models on both backends: final logits and 32 greedy tokens;
#   (c) copy bandwidth, decode tok/s + achieved GB/s of synthetic Llama-3.2-1B (Q4_0, Q8_0)
#       and Llama-3-8B (Q4_K_M), prefill 2048 tokens vs cuBLAS FP16 GEMM at the same shapes;
#   (d) test_cuda_gpu: the kernel tests CI runs under the CUDA emulator (tests/kernels/cuda_emu),
#       here on the device, under compute-sanitizer (memcheck) when it is installed.
# The summary table is printed last. Target: under 8 minutes on one H200.
#
# usage: scripts/gpu-check.sh [MODELS_DIR...]
#   MODELS_DIR: where SmolLM2-135M-Instruct.Q4_1.gguf and gemma-3-270m-q4_k_m.gguf are
#   (default ~/.cache/ember/test-models, which does not travel to a lent GPU machine: copy
#   the files into an ignored folder of the checkout and pass it). stories260K is looked for
#   in $EMBER_TESTDATA, <repo>/shared/testdata and <repo>/../shared/testdata. Models that are
#   missing are skipped, loudly.
# env: OUT (results folder; default build/gpu/gpu-check), EMBER_SYNTH_DIR (synthetic models,
#   default /tmp/ember-synth), EMBER_GPU_CHECK_SKIP_8B=1 (skip the 8B model), JOBS,
#   EMBER_GPU_BUILD_DIR (build folder, default build/gpu), EMBER_GPU_CHECK_SKIP_TESTS=1 (skip
#   the test suite), EMBER_DOCTEST_INCLUDE_DIR (folder with doctest/doctest.h; default the
#   carried build/carried-include, or <repo>/.gpu-data/include when it exists). The tests take
#   the first MODELS_DIR as EMBER_TEST_MODELS_DIR.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
START=$(date +%s)
BUILD=${EMBER_GPU_BUILD_DIR:-$ROOT/build/gpu}
RESULTS=${OUT:-$BUILD/gpu-check}
SYNTH=${EMBER_SYNTH_DIR:-/tmp/ember-synth}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$RESULTS" "$SYNTH"
LOG="$RESULTS/gpu-check.log"
: >"$LOG"

say() { echo "== $*" | tee -a "$LOG"; }
elapsed() { echo $(($(date +%s) - START)); }

say "machine"
{
  uname -srm
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv 2>&1 || echo "nvidia-smi failed"
  command -v nvcc >/dev/null && nvcc --version | tail -2 || /usr/local/cuda/bin/nvcc --version | tail -2
  cmake --version | head -1
  ninja --version
} 2>&1 | tee -a "$LOG"
export PATH="$PATH:/usr/local/cuda/bin"

# ---- build ---------------------------------------------------------------------------------
TESTDATA=""
for d in "${EMBER_TESTDATA:-}" "$ROOT/shared/testdata" "$ROOT/../shared/testdata"; do
  [ -n "$d" ] && [ -d "$d" ] && TESTDATA=$(cd "$d" && pwd) && break
done
TEST_MODELS=${1:-$HOME/.cache/ember/test-models}
[ -d "$TEST_MODELS" ] && TEST_MODELS=$(cd "$TEST_MODELS" && pwd)  # configure runs in $ROOT
CONFIG_ARGS=(-DEMBER_TEST_MODELS_DIR="$TEST_MODELS")
[ -n "$TESTDATA" ] && CONFIG_ARGS+=(-DEMBER_TESTDATA_DIR="$TESTDATA")
DOCTEST_DIR=${EMBER_DOCTEST_INCLUDE_DIR:-}
[ -z "$DOCTEST_DIR" ] && [ -f "$ROOT/.gpu-data/include/doctest/doctest.h" ] && DOCTEST_DIR="$ROOT/.gpu-data/include"
[ -n "$DOCTEST_DIR" ] && CONFIG_ARGS+=(-DEMBER_DOCTEST_INCLUDE_DIR="$DOCTEST_DIR")
say "configure + build (preset gpu, $JOBS jobs) [$(elapsed) s]"
if ! (cd "$ROOT" && cmake --preset gpu -B "$BUILD" "${CONFIG_ARGS[@]}") >>"$LOG" 2>&1; then
  tail -40 "$LOG"
  echo "gpu-check: configure failed (log: $LOG)"
  exit 1
fi
if ! cmake --build "$BUILD" -j "$JOBS" --target ember_cuda ember-gpu-check >>"$LOG" 2>&1; then
  grep -E "error|Error" "$LOG" | head -40
  echo "gpu-check: build of ember_cuda / ember-gpu-check failed (log: $LOG)"
  exit 1
fi
CHECK="$BUILD/tools/gpu_check/ember-gpu-check"
EMBER="$BUILD/app/cli/ember"
if ! cmake --build "$BUILD" -j "$JOBS" --target ember >>"$LOG" 2>&1; then
  say "!!! the ember CLI did not build: synthetic models are written by ember-gpu-check --synth instead"
  EMBER=""
fi
say "built [$(elapsed) s]"

# ---- the engine's own tests (doctest, no Qt): every engine and kernel suite -------------------
TESTS_RC=0
if [ "${EMBER_GPU_CHECK_SKIP_TESTS:-0}" = 1 ]; then
  say "!!! skipping the test suite (EMBER_GPU_CHECK_SKIP_TESTS=1)"
elif ! cmake --build "$BUILD" -j "$JOBS" >>"$LOG" 2>&1; then
  grep -E "error|Error" "$LOG" | head -40
  say "!!! the tests did not build (log: $LOG)"
  TESTS_RC=1
else
  say "ctest --preset gpu [$(elapsed) s]"
  (cd "$ROOT" && ctest --preset gpu --test-dir "$BUILD" -j 4) >"$RESULTS/ctest.log" 2>&1
  TESTS_RC=$?
  grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\(SEGFAULT\)|\*\*\*" "$RESULTS/ctest.log" | tee -a "$LOG"
  say "tests: exit $TESTS_RC (log: $RESULTS/ctest.log) [$(elapsed) s]"
fi

# ---- models ---------------------------------------------------------------------------------
MODEL_ARGS=()
for d in "$@"; do MODEL_ARGS+=(--models "$d"); done
[ $# -eq 0 ] && MODEL_ARGS+=(--models "$HOME/.cache/ember/test-models")
for d in "${EMBER_TESTDATA:-}" "$ROOT/shared/testdata" "$ROOT/../shared/testdata"; do
  [ -n "$d" ] && [ -d "$d" ] && MODEL_ARGS+=(--models "$d")
done

synth() {  # shape type file
  [ -s "$3" ] && return 0
  if [ -n "$EMBER" ]; then "$EMBER" synth --shape "$1" --type "$2" -o "$3" >>"$LOG" 2>&1 && return 0; fi
  "$CHECK" --synth "$1" "$2" "$3" >>"$LOG" 2>&1
}
say "synthetic models in $SYNTH [$(elapsed) s]"
BENCH_ARGS=()
for spec in "llama-3.2-1b Q4_0" "llama-3.2-1b Q8_0" "llama-3-8b Q4_K_M"; do
  set -- $spec
  if [ "$1" = llama-3-8b ] && [ "${EMBER_GPU_CHECK_SKIP_8B:-0}" = 1 ]; then say "!!! skipping $1 (EMBER_GPU_CHECK_SKIP_8B=1)"; continue; fi
  f="$SYNTH/$1-$2.gguf"
  if synth "$1" "$2" "$f"; then
    BENCH_ARGS+=(--bench-model "$f")
    [ "$1" = llama-3-8b ] && BENCH_ARGS+=(--prefill-model "$f")
  else
    say "!!! could not write $f (see $LOG)"
  fi
done
say "synthetic models ready [$(elapsed) s]"

# ---- ember starts; module found --------------------------------------------------------------
if [ -n "$EMBER" ]; then
  say "ember CLI"
  STORIES=""
  for d in "${EMBER_TESTDATA:-}" "$ROOT/shared/testdata" "$ROOT/../shared/testdata"; do
    [ -n "$d" ] && [ -f "$d/models/stories260K.gguf" ] && STORIES="$d/models/stories260K.gguf" && break
  done
  if [ -n "$STORIES" ]; then "$EMBER" info "$STORIES" 2>&1 | head -5 | tee -a "$LOG"; else "$EMBER" --help 2>&1 | head -3 | tee -a "$LOG"; fi
fi

# ---- the check ------------------------------------------------------------------------------
say "ember-gpu-check [$(elapsed) s]"
"$CHECK" "${MODEL_ARGS[@]}" "${BENCH_ARGS[@]}" --json "$RESULTS/gpu-check.json" 2>&1 | tee -a "$LOG"
rc=${PIPESTATUS[0]}

# ---- the emulator's kernel tests, on the device -------------------------------------------------
say "test_cuda_gpu [$(elapsed) s]"
if cmake --build "$BUILD" -j "$JOBS" --target test_cuda_gpu >>"$LOG" 2>&1; then
  TEST="$BUILD/tests/kernels/cuda_emu/test_cuda_gpu"
  SANITIZER=$(command -v compute-sanitizer || true)
  [ -z "$SANITIZER" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && SANITIZER=/usr/local/cuda/bin/compute-sanitizer
  if [ -n "$SANITIZER" ]; then
    say "test_cuda_gpu under compute-sanitizer --tool memcheck"
    EMBER_CUDA_MODULE="$BUILD/lib/libember_cuda.so" timeout "${EMBER_GPU_TEST_TIMEOUT:-600}" \
      "$SANITIZER" --tool memcheck --error-exitcode 3 "$TEST" 2>&1 | tee -a "$LOG"
  else
    say "!!! compute-sanitizer not found: test_cuda_gpu runs without it"
    EMBER_CUDA_MODULE="$BUILD/lib/libember_cuda.so" timeout "${EMBER_GPU_TEST_TIMEOUT:-600}" "$TEST" 2>&1 | tee -a "$LOG"
  fi
  trc=${PIPESTATUS[0]}
  say "test_cuda_gpu: exit $trc"
  [ "$trc" -ne 0 ] && [ "$rc" -eq 0 ] && rc=1
else
  say "!!! test_cuda_gpu did not build (doctest missing? copy /usr/include/doctest to .gpu-data/include/doctest; log: $LOG)"
fi
[ "$rc" = 0 ] && [ "$TESTS_RC" != 0 ] && rc=$TESTS_RC  # a failed test suite fails the check too
echo "gpu-check: exit $rc (tests: exit $TESTS_RC) after $(elapsed) s; log $LOG, results $RESULTS/gpu-check.json"
exit "$rc"
