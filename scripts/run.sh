#!/usr/bin/env bash
# Set everything up and run Ember's main job:
#   install-deps -> fetch-test-models -> cmake --preset dev -> build -> run
#
# Arguments are passed to the main job. Environment knobs: see scripts/test.sh
# (EMBER_JOBS, EMBER_BUILD_CUDA, EMBER_TEST_MODELS_DIR, EMBER_TESTDATA_DIR, EMBER_SKIP_DEPS).
set -euo pipefail
EMBER_SCRIPT="run"
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$EMBER_ROOT"

MODELS_DIR="${EMBER_TEST_MODELS_DIR:-$HOME/.cache/ember/test-models}"

# ---- THE MAIN JOB: the one place to change what `scripts/run.sh` runs. -----------------
# The desktop app with the built-in default model (SmolLM2). Without a display (an SSH
# session, a container) the same model opens in the terminal chat instead.
DEFAULT_MODEL="$MODELS_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
if [[ -n "${DISPLAY:-}" || -n "${WAYLAND_DISPLAY:-}" || -n "${QT_QPA_PLATFORM:-}" ]]; then
  MAIN_JOB=(build/dev/app/desktop/ember-app --model "$DEFAULT_MODEL")
else
  MAIN_JOB=(build/dev/app/cli/ember chat "$DEFAULT_MODEL")
fi
# -----------------------------------------------------------------------------------------

if [[ "${EMBER_SKIP_DEPS:-0}" != 1 ]]; then
  ember_step "install-deps"
  scripts/install-deps.sh
fi
ember_use_ccache

ember_step "fetch-test-models"
scripts/fetch-test-models.sh

ember_step "configure (dev)"
ember_cmake_args
ember_log "cmake --preset dev ${EMBER_CMAKE_ARGS[*]}"
cmake --preset dev "${EMBER_CMAKE_ARGS[@]}"

# Only what the main job needs: the app, the CLI, and the CUDA module where a GPU is there
# to use it (the tests, benchmarks and the CUDA kernels for a machine without a GPU are
# most of the build: scripts/test.sh builds those).
TARGETS=(ember-app ember)
if [[ "${EMBER_CMAKE_ARGS[0]}" == "-DEMBER_BUILD_CUDA=ON" ]] && command -v nvidia-smi >/dev/null 2>&1 \
   && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  TARGETS+=(ember_cuda)
fi
ember_step "build (dev: ${TARGETS[*]}, -j$EMBER_JOBS)"
cmake --build --preset dev --parallel "$EMBER_JOBS" --target "${TARGETS[@]}"

ember_times
[[ -x "${MAIN_JOB[0]}" ]] || ember_die "the build did not produce ${MAIN_JOB[0]}"
[[ "${MAIN_JOB[0]}" == *ember-app ]] || ember_log "no display found: starting the terminal chat (ember chat) instead of the desktop app"
ember_log "==> ${MAIN_JOB[*]} $*"
exec "${MAIN_JOB[@]}" "$@"
