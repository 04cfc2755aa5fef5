# Shared by scripts/test.sh and scripts/run.sh (sourced, not run).
# shellcheck shell=bash

EMBER_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
EMBER_JOBS="${EMBER_JOBS:-2}"   # our machines have 2 cores
_EMBER_T0=$SECONDS
_EMBER_STEP_T0=$SECONDS
_EMBER_TIMES=()

ember_log() { printf '[%s] %s\n' "${EMBER_SCRIPT:-ember}" "$*" >&2; }
ember_die() { printf '[%s] ERROR: %s\n' "${EMBER_SCRIPT:-ember}" "$*" >&2; exit 1; }

# ember_step NAME: start a timed step (closes the previous one).
ember_step() {
  ember_step_end
  _EMBER_STEP_NAME="$1"; _EMBER_STEP_T0=$SECONDS
  ember_log "==> $1"
}
ember_step_end() {
  if [[ -n "${_EMBER_STEP_NAME:-}" ]]; then
    _EMBER_TIMES+=("$(printf '%-24s  %4ds' "$_EMBER_STEP_NAME" $((SECONDS - _EMBER_STEP_T0)))")
    _EMBER_STEP_NAME=""
  fi
}
# ember_times: the table of the steps' wall times so far, and the total.
ember_times() {
  ember_step_end
  local t
  ember_log "  stage                     wall"
  ember_log "  ------------------------  -----"
  for t in "${_EMBER_TIMES[@]}"; do ember_log "  $t"; done
  ember_log "  ------------------------  -----"
  ember_log "  $(printf '%-24s  %4ds' total $((SECONDS - _EMBER_T0)))"
}

# ember_cmake_args: fills the array EMBER_CMAKE_ARGS with extra -D options for `cmake --preset`:
#  - EMBER_BUILD_CUDA follows kernels/cuda/CMakeLists.txt (ON once the CUDA backend exists);
#    override with the environment variable EMBER_BUILD_CUDA=ON|OFF.
#  - EMBER_TEST_MODELS_DIR / EMBER_TESTDATA_DIR are always passed, resolved exactly as
#    scripts/fetch-test-models.sh resolves them (environment, else the defaults), so CMake
#    looks where the fetch put things even if an earlier configure used other values.
# ember_use_ccache: compiles go through ccache when it is there (install-deps.sh installs it, so
# call this after it); CMake reads these variables on a build folder's first configure. The base
# folder keeps the cache's keys independent of where the checkout lies (CI's clean clone, a
# worktree). EMBER_CCACHE=0 turns it off.
ember_use_ccache() {
  [[ "${EMBER_CCACHE:-1}" != 0 ]] && command -v ccache >/dev/null 2>&1 || return 0
  export CMAKE_C_COMPILER_LAUNCHER="${CMAKE_C_COMPILER_LAUNCHER-ccache}"
  export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER-ccache}"
  export CMAKE_CUDA_COMPILER_LAUNCHER="${CMAKE_CUDA_COMPILER_LAUNCHER-ccache}"
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$EMBER_ROOT}"
}

ember_cmake_args() {
  local cuda="${EMBER_BUILD_CUDA:-}"
  if [[ -z "$cuda" ]]; then
    if [[ -f "$EMBER_ROOT/kernels/cuda/CMakeLists.txt" ]]; then cuda=ON; else cuda=OFF; fi
  fi
  if [[ "$cuda" == ON && -z "${CUDACXX:-}" ]] && ! command -v nvcc >/dev/null 2>&1; then
    [[ -x /usr/local/cuda/bin/nvcc ]] \
      || ember_die "the CUDA backend is on but nvcc was not found (PATH, CUDACXX, /usr/local/cuda); install the CUDA toolkit or set EMBER_BUILD_CUDA=OFF for a CPU-only build"
    export CUDACXX=/usr/local/cuda/bin/nvcc
  fi
  EMBER_CMAKE_ARGS=("-DEMBER_BUILD_CUDA=$cuda")
  EMBER_CMAKE_ARGS+=("-DEMBER_TEST_MODELS_DIR=${EMBER_TEST_MODELS_DIR:-$HOME/.cache/ember/test-models}")
  EMBER_CMAKE_ARGS+=("-DEMBER_TESTDATA_DIR=${EMBER_TESTDATA_DIR:-$EMBER_ROOT/../shared/testdata}")
}

# Benchmarks on shared cores (scripts/bench-cpu.sh, scripts/bench-moe.sh):
cpu_jiffies() {  # prints "busy steal" in clock ticks since boot
  local _cpu u n s _idle _iow irq sirq st _rest
  read -r _cpu u n s _idle _iow irq sirq st _rest </proc/stat
  echo "$((u + n + s + irq + sirq)) $st"
}
# wait_quiet: waits up to EMBER_BENCH_WAIT_QUIET seconds (default 60; 0 = never) for a
# 2-second window in which other processes use under 10 % of the cores (this script is idle
# meanwhile), so that a measurement starts on a quiet machine when one comes.
wait_quiet() {
  local limit="${EMBER_BENCH_WAIT_QUIET:-60}" t0=$SECONDS b0 b1 pct ncpu hz
  (( limit > 0 )) || return 0
  ncpu=$(nproc); hz=$(getconf CLK_TCK)
  while :; do
    read -r b0 _ < <(cpu_jiffies); sleep 2; read -r b1 _ < <(cpu_jiffies)
    pct=$(( 100 * (b1 - b0) / (2 * hz * ncpu) ))
    if (( pct < 10 )); then return 0; fi
    if (( SECONDS - t0 >= limit )); then ember_log "still ${pct}% busy after ${limit}s: measuring anyway"; return 0; fi
  done
}
