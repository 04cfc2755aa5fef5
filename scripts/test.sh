#!/usr/bin/env bash
# Set everything up and run the whole test suite (what CI runs, via .ci/run):
#   install-deps -> fetch-test-models -> cmake --preset ci -> build
#   -> sanitizers (scripts/fuzz.sh: every fuzzer for a short budget; the `asan` preset's
#      tests) -> ctest --preset ci
#
# The last lines printed are ctest's own summary ("100% tests passed, 0 tests failed out of N",
# then "Total Test time"), and the exit status is ctest's. Any earlier failure stops the run
# with a non-zero status.
#
# Environment knobs (all optional):
#   EMBER_JOBS=2                 parallel compile jobs and parallel tests
#   EMBER_BUILD_CUDA=ON|OFF      default: ON iff kernels/cuda/CMakeLists.txt exists
#   EMBER_TEST_MODELS_DIR, EMBER_TESTDATA_DIR   where the models / shared test data live
#   EMBER_TEST_TIMEOUT=300       default per-test timeout (s) for tests that set none
#   EMBER_SKIP_DEPS=1            do not run scripts/install-deps.sh (e.g. no root, no apt)
#   EMBER_SKIP_SANITIZERS=1      skip the sanitizer step (fuzzers + ASan/UBSan tests)
#   EMBER_FUZZ_SECONDS=30        time budget of each fuzzer in the sanitizer step
#   EMBER_ASAN_EXCLUDE=REGEX     asan tests the sanitizer step leaves out (ctest -E); default
#                                '^(test_inference|gpu_check_cpu_as_gpu|test_quant_peer)$' (end-to-end
#                                decoding, the peer run of llama.cpp (quant) and
#                                the check-table tool, far too slow in a Debug ASan build; the ci
#                                preset runs both); '' runs them all
#   EMBER_ASAN_TIMEOUT=900       per-test timeout (s) of the asan tests that set none
set -euo pipefail
EMBER_SCRIPT="test"
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$EMBER_ROOT"

if [[ "${EMBER_SKIP_DEPS:-0}" != 1 ]]; then
  ember_step "install-deps"
  scripts/install-deps.sh
fi

ember_step "fetch-test-models"
scripts/fetch-test-models.sh

# llama.cpp's llama-perplexity, the peer that test_quant_peer runs on Ember's quantized files;
# built once (minutes, cold) and cached in ~/.cache/ember/llama-tools, then this step is instant.
ember_step "peer tools (llama.cpp)"
scripts/llama-cpp-tools.sh llama-perplexity >/dev/null

ember_step "check-format"
scripts/check-format.sh

ember_step "configure (ci)"
ember_cmake_args
ember_log "cmake --preset ci ${EMBER_CMAKE_ARGS[*]}"
cmake --preset ci "${EMBER_CMAKE_ARGS[@]}"

ember_step "build (ci, -j$EMBER_JOBS)"
cmake --build --preset ci --parallel "$EMBER_JOBS"

# Fuzzers and the ASan + UBSan build's tests (engine and kernels). A failure stops the run
# here, before ctest; the ci preset's ctest summary stays the last output.
if [[ "${EMBER_SKIP_SANITIZERS:-0}" != 1 ]]; then
  ember_step "fuzz (${EMBER_FUZZ_SECONDS:-30}s per fuzzer)"
  scripts/fuzz.sh "${EMBER_FUZZ_SECONDS:-30}"

  ember_step "asan: configure + build"
  # The CPU build only: CUDA code is not instrumented, and its tests run in the ci build.
  cmake --preset asan "${EMBER_CMAKE_ARGS[@]}" -DEMBER_BUILD_CUDA=OFF
  cmake --build --preset asan --parallel "$EMBER_JOBS"

  ember_step "asan: ctest"
  # Debug + ASan runs test_template ~10x slower than ci (over 300 s on a busy machine).
  ASAN_CTEST=(ctest --preset asan --no-tests=error --parallel "$EMBER_JOBS" --timeout "${EMBER_ASAN_TIMEOUT:-900}")
  exclude="${EMBER_ASAN_EXCLUDE-^(test_inference|gpu_check_cpu_as_gpu|test_quant_peer)\$}"
  [[ -z "$exclude" ]] || ASAN_CTEST+=(-E "$exclude")
  ember_log "==> ${ASAN_CTEST[*]}"
  "${ASAN_CTEST[@]}"
fi

ember_times

# Qt Quick tests want a display; give them a virtual one when there is none.
CTEST=(ctest --preset ci --no-tests=error --parallel "$EMBER_JOBS" --timeout "${EMBER_TEST_TIMEOUT:-300}")
if [[ -z "${DISPLAY:-}" ]] && command -v xvfb-run >/dev/null 2>&1; then
  CTEST=(xvfb-run -a -s "-screen 0 1280x1024x24" "${CTEST[@]}")
fi
ember_log "==> ctest: ${CTEST[*]}"
# exec: ctest's summary stays the last output and its exit status is ours.
exec "${CTEST[@]}"
