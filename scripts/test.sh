#!/usr/bin/env bash
# Set everything up and run the whole test suite (what CI runs, via .ci/run):
#   install-deps -> fetch-test-models (+ the openai client) -> cmake --preset ci -> build
#   -> sanitizers (scripts/fuzz.sh: every fuzzer for a short budget; the `asan` preset's
#      tests) -> package-test (scripts/package-test.sh) -> ctest --preset ci
#
# Every stage is timed; a table of the stages' wall times follows the final ctest, and then
# ctest's own summary lines again ("100% tests passed, 0 tests failed out of N", "Total Test
# time"), so they stay the last lines printed (what CI reads). The exit status is ctest's. Any
# earlier failure stops the run with a non-zero status (and prints the table so far).
#
# Environment knobs (all optional):
#   EMBER_JOBS=2                 parallel compile jobs and parallel tests
#   EMBER_BUILD_CUDA=ON|OFF      default: ON iff kernels/cuda/CMakeLists.txt exists
#   EMBER_TEST_MODELS_DIR, EMBER_TESTDATA_DIR   where the models / shared test data live
#   EMBER_TEST_TIMEOUT=300       default per-test timeout (s) for tests that set none
#   EMBER_SKIP_DEPS=1            do not run scripts/install-deps.sh (e.g. no root, no apt)
#   EMBER_CCACHE=0               compile without ccache (used by default when installed)
#   EMBER_SKIP_SANITIZERS=1      skip the sanitizer step (fuzzers + ASan/UBSan tests)
#   EMBER_FUZZ_SECONDS=20        time budget of each fuzzer in the sanitizer step (13 fuzzers,
#                                EMBER_JOBS at a time)
#   EMBER_ASAN_EXCLUDE=REGEX     asan tests the sanitizer step leaves out (ctest -E); default
#                                '^(test_inference|gpu_check_cpu_as_gpu|test_quant_peer|test_server_openai|test_server_load|test_structured_output|test_server_openai_tools_gemma3|test_server_ollama_gemma3|test_remote_llama)$' (end-to-end
#                                decoding (250 schema-constrained answers among them), the check-table tool and llama.cpp's peers run, too slow
#                                under ASan; the Python scripts driving `ember serve`, not targets
#                                of this build; the ci preset runs them all); '' runs them all
#   EMBER_ASAN_TIMEOUT=900       per-test timeout (s) of the asan tests that set none
set -euo pipefail
EMBER_SCRIPT="test"
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$EMBER_ROOT"
# A stage that fails still shows how long each stage took.
# shellcheck disable=SC2317  # run by the EXIT trap
on_exit() {
  local status=$?
  [[ $status == 0 ]] || { ember_log "FAILED (status $status); stage times so far:"; ember_times; }
}
trap on_exit EXIT

# asan_test_targets BUILD_DIR EXCLUDE_REGEX: the targets of the tests ctest would run there
# (from the generated CTestTestfile.cmake files; the build then brings in what they depend
# on), one a line: a test's command when it is a target, else the targets its arguments name
# inside the build folder (a Python script driving build/asan/.../ember); nothing when a test
# names none (the caller then builds everything).
asan_test_targets() {
  python3 - "$1" "$2" <<'PY'
import os, re, subprocess, sys
build, exclude = os.path.abspath(sys.argv[1]), sys.argv[2]
targets = set(subprocess.run(["ninja", "-C", build, "-t", "targets", "all"], capture_output=True, text=True,
                             check=True).stdout.split())
targets = {t.rstrip(":") for t in targets}
names = set()
for root, _, files in os.walk(build):
    if "CTestTestfile.cmake" in files:
        text = open(os.path.join(root, "CTestTestfile.cmake")).read()
        for name, args in re.findall(r'add_test\(\[=\[(.+?)\]=\] (.*)\)', text):
            if exclude and re.search(exclude, name):
                continue
            paths = re.findall(r'"([^"]+)"', args)
            exe = os.path.basename(paths[0])
            needed = {exe} if exe in targets else {os.path.basename(a) for a in paths[1:]
                                                    if a.startswith(build + "/") and os.path.basename(a) in targets}
            if not needed:
                sys.exit(0)  # a test that names none of our targets: the caller builds everything
            names |= needed
print("\n".join(sorted(names)))
PY
}

if [[ "${EMBER_SKIP_DEPS:-0}" != 1 ]]; then
  ember_step "install-deps"
  scripts/install-deps.sh
fi
ember_use_ccache

ember_step "fetch-test-models"
scripts/fetch-test-models.sh
# The official openai Python client (pinned) for test_server_openai, in a cached venv.
scripts/fetch-openai-client.sh
# The same client and jsonschema (pinned) for test_structured_output, in a venv of their own.
scripts/fetch-structured-client.sh
# The official ollama Python client (pinned) for test_server_ollama, in a cached venv.
scripts/fetch-ollama-client.sh
# Python's jinja2 (pinned), the reference test_template_jinja2 renders the real chat templates with.
scripts/fetch-jinja2.sh
# NVIDIA's cuobjdump / nvdisasm (pinned wheels), the SASS side of perf_model_sm90 (tools/perf_model).
scripts/fetch-cuda-binutils.sh >/dev/null

# llama.cpp's llama-perplexity, the peer that test_quant_peer runs on Ember's quantized files,
# llama-tokenize, which test_tokenizer compares token ids with, and llama-server, which
# test_remote_llama points Ember's remote engine at; built once (minutes, cold) and cached in
# ~/.cache/ember/llama-tools, then this step is instant.
ember_step "peer tools (llama.cpp)"
scripts/llama-cpp-tools.sh llama-perplexity llama-tokenize llama-server >/dev/null

ember_step "check-format"
scripts/check-format.sh

ember_step "ci: configure"
ember_cmake_args
ember_log "cmake --preset ci ${EMBER_CMAKE_ARGS[*]}"
cmake --preset ci "${EMBER_CMAKE_ARGS[@]}"

ember_step "ci: build (-j$EMBER_JOBS)"
cmake --build --preset ci --parallel "$EMBER_JOBS"

# Fuzzers and the ASan + UBSan build's tests (engine and kernels). A failure stops the run
# here, before ctest; the ci preset's ctest summary stays the last output.
if [[ "${EMBER_SKIP_SANITIZERS:-0}" != 1 ]]; then
  ember_step "fuzz (${EMBER_FUZZ_SECONDS:-20} s each)"
  scripts/fuzz.sh "${EMBER_FUZZ_SECONDS:-20}"

  ember_step "asan: configure + build"
  # The CPU build only: CUDA code is not instrumented, and its tests run in the ci build.
  cmake --preset asan "${EMBER_CMAKE_ARGS[@]}" -DEMBER_BUILD_CUDA=OFF
  # test_server_openai, test_server_load: Python scripts driving `ember serve` (not targets of
  # this build); the load test's RSS bound means nothing under ASan's quarantine.
  # test_server_openai_tools_gemma3, test_server_ollama_gemma3: the same generic tool-call and
  # Ollama paths as the smollm2 runs, on a model 2x its size (70-90 s each under ASan); the ci
  # build runs them.
  exclude="${EMBER_ASAN_EXCLUDE-^(test_inference|gpu_check_cpu_as_gpu|test_quant_peer|test_server_openai|test_server_load|test_structured_output|test_server_openai_tools_gemma3|test_server_ollama_gemma3|test_remote_llama)\$}"
  # Only the tests this step runs (and what they need): not the tools, the benchmarks or the
  # tests it leaves out, which the ci build already built and runs.
  mapfile -t asan_targets < <(asan_test_targets build/asan "$exclude")
  if [[ ${#asan_targets[@]} -gt 0 ]]; then
    ember_log "asan targets: ${asan_targets[*]}"
    cmake --build --preset asan --parallel "$EMBER_JOBS" --target "${asan_targets[@]}"
  else
    cmake --build --preset asan --parallel "$EMBER_JOBS"
  fi

  ember_step "asan: ctest"
  # ASan (-O1) runs tests several times slower than ci: a generous per-test timeout.
  ASAN_CTEST=(ctest --preset asan --no-tests=error --parallel "$EMBER_JOBS" --timeout "${EMBER_ASAN_TIMEOUT:-900}")
  [[ -z "$exclude" ]] || ASAN_CTEST+=(-E "$exclude")
  ember_log "==> ${ASAN_CTEST[*]}"
  "${ASAN_CTEST[@]}"
fi

# The .deb and .tar.gz: built from build/ci, installed, run, purged (issue #15; needs root).
ember_step "package-test"
scripts/package-test.sh build/ci

ember_step "ctest (ci)"
# Qt Quick tests want a display; give them a virtual one when there is none.
CTEST=(ctest --preset ci --no-tests=error --parallel "$EMBER_JOBS" --timeout "${EMBER_TEST_TIMEOUT:-300}")
if [[ -z "${DISPLAY:-}" ]] && command -v xvfb-run >/dev/null 2>&1; then
  CTEST=(xvfb-run -a -s "-screen 0 1280x1024x24" "${CTEST[@]}")
fi
ember_log "==> ctest: ${CTEST[*]}"
ctest_log="$(mktemp)"
set +e
"${CTEST[@]}" 2>&1 | tee "$ctest_log"
ctest_status=${PIPESTATUS[0]}
set -e
trap - EXIT
ember_times
# ctest's closing lines once more, last: they are what CI reads.
grep -E '^[0-9]+% tests passed|^Total Test time' "$ctest_log" || true
rm -f "$ctest_log"
exit "$ctest_status"
