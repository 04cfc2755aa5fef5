#!/usr/bin/env bash
# Serving benchmark: `ember serve` vs llama.cpp's `llama-server` on the same GGUF files, same
# slots, same threads, side by side in one run (tests/bench/serve_bench.py does the measuring;
# its header explains the method). Prints markdown tables last; JSON goes to
# build/bench/serve-bench.json, server logs to build/bench/*.log.
#
#   scripts/bench-serve.sh              # SmolLM2-135M Q4_1 and the 1B-shaped synthetic Q4_0
#   scripts/bench-serve.sh --quick      # SmolLM2 only, 1, 4 and 16 clients, 32 tokens
#   scripts/bench-serve.sh --peer-only  # llama-server alone (no ember build)
#
# Steps: build `ember` (engine preset: Release, no Qt); build llama-server from the
# llama-cpp-python source package (scripts/llama-cpp-tools.sh, cached; minutes the first
# time); write the synthetic model to ${EMBER_BENCH_MODELS_DIR:-~/.cache/ember/bench-models}
# if absent; run the benchmark.
#
# Knobs: EMBER_LLAMA_NATIVE (1: llama-server built for this CPU; 0: the portable AVX2 build),
# EMBER_BENCH_THREADS (2), EMBER_BENCH_PARALLEL (slots, 32), EMBER_BENCH_CTX (context
# per slot, 512), EMBER_BENCH_CLIENTS (1,4,8,16,32), EMBER_BENCH_MAX_TOKENS (64),
# EMBER_BENCH_REQUESTS (requests per client and round, 2), EMBER_BENCH_MIN_REQUESTS (at
# least this many per round, more per client at low counts: 0), EMBER_BENCH_REPEAT (rounds per
# server and client count, the median kept: 3, --quick 1; ~16 min for the full run),
# EMBER_BENCH_PROMPT_TOKENS (prompts as
# this many token ids, 38: the length of the text prompt in SmolLM2's vocabulary, 235 in the
# synthetic model's merge-less one; 0 sends the text), EMBER_BENCH_MODELS (space-separated
# GGUF paths, instead of the two above), EMBER_BENCH_BUILD_DIR (build/engine),
# EMBER_BENCH_NO_BUILD=1 (use the ember already built there), EMBER_JOBS (build jobs, 2).
# The targets are informational: the script exits 0 whenever both servers could be measured.
set -euo pipefail
# shellcheck disable=SC2034  # read by common.sh
EMBER_SCRIPT=bench-serve
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$EMBER_ROOT"

QUICK=0 PEER_ONLY=0
for arg in "$@"; do
  case "$arg" in
    --quick) QUICK=1 ;;
    --peer-only) PEER_ONLY=1 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) ember_die "unknown argument '$arg' (try --help)" ;;
  esac
done

BUILD="${EMBER_BENCH_BUILD_DIR:-$EMBER_ROOT/build/engine}"
[[ "$BUILD" = /* ]] || BUILD="$EMBER_ROOT/$BUILD"
EMBER="$BUILD/app/cli/ember"
MODELS_DIR="${EMBER_BENCH_MODELS_DIR:-$HOME/.cache/ember/bench-models}"
SMOL="${EMBER_TEST_MODELS_DIR:-$HOME/.cache/ember/test-models}/SmolLM2-135M-Instruct.Q4_1.gguf"
SYNTH="$MODELS_DIR/llama-3.2-1b-Q4_0.gguf"
OUT="$EMBER_ROOT/build/bench"
mkdir -p "$OUT"
if (( QUICK )); then
  CLIENTS="${EMBER_BENCH_CLIENTS:-1,4,16}"; MAX_TOKENS="${EMBER_BENCH_MAX_TOKENS:-32}"; REPEAT="${EMBER_BENCH_REPEAT:-1}"
  MODELS="${EMBER_BENCH_MODELS:-$SMOL}"
else
  CLIENTS="${EMBER_BENCH_CLIENTS:-1,4,8,16,32}"; MAX_TOKENS="${EMBER_BENCH_MAX_TOKENS:-64}"; REPEAT="${EMBER_BENCH_REPEAT:-3}"
  MODELS="${EMBER_BENCH_MODELS:-$SMOL $SYNTH}"
fi

SERVERS=()
if (( ! PEER_ONLY )); then
  ember_step "build ember ($BUILD)"
  if [[ "${EMBER_BENCH_NO_BUILD:-0}" == 1 ]]; then
    ember_log "EMBER_BENCH_NO_BUILD=1: using $EMBER as it is"
  else
    cmake --preset engine -B "$BUILD" -DEMBER_BUILD_CUDA=OFF >"$OUT/serve-configure.log" 2>&1 \
      || { cat "$OUT/serve-configure.log" >&2; ember_die "cmake configure failed"; }
    cmake --build "$BUILD" -j "$EMBER_JOBS" --target ember || ember_die "build failed (see above)"
  fi
  [[ -x "$EMBER" ]] || ember_die "no $EMBER"
  SERVERS+=(--ember "$EMBER")
fi

ember_step "llama-server (scripts/llama-cpp-tools.sh)"
# the peer's native build (AVX-512 where the host has it): Ember picks its kernels at run time
LLAMA_BIN="$(EMBER_LLAMA_NATIVE="${EMBER_LLAMA_NATIVE:-1}" "$EMBER_ROOT/scripts/llama-cpp-tools.sh" llama-server | tail -1)" \
  || ember_die "scripts/llama-cpp-tools.sh llama-server failed"
SERVERS+=(--llama-server "$LLAMA_BIN/llama-server")

ember_step "models"
[[ -s "$SMOL" ]] || [[ " $MODELS " != *" $SMOL "* ]] \
  || ember_die "no $SMOL (scripts/fetch-test-models.sh fetches it)"
if [[ " $MODELS " == *" $SYNTH "* && ! -s "$SYNTH" ]]; then
  [[ -x "$EMBER" ]] || ember_die "no $SYNTH, and no ember to write it (ember synth)"
  mkdir -p "$MODELS_DIR"
  ember_log "writing $SYNTH"
  "$EMBER" synth --shape llama-3.2-1b --type Q4_0 -o "$SYNTH.tmp" >&2 \
    || { rm -f "$SYNTH.tmp"; ember_die "ember synth failed"; }
  mv -f "$SYNTH.tmp" "$SYNTH"
fi
MODEL_ARGS=()
for m in $MODELS; do MODEL_ARGS+=(--model "$m"); done

ember_step "benchmark"
read -r LOAD1 _ </proc/loadavg
if awk -v l="$LOAD1" 'BEGIN { exit !(l > 0.5) }'; then
  ember_log "WARNING: load average is $LOAD1: other work shares these cores, numbers will be noisy"
fi
"${PYTHON:-python3}" tests/bench/serve_bench.py "${MODEL_ARGS[@]}" "${SERVERS[@]}" \
  --parallel "${EMBER_BENCH_PARALLEL:-32}" --ctx "${EMBER_BENCH_CTX:-512}" \
  --threads "${EMBER_BENCH_THREADS:-2}" --clients "$CLIENTS" --max-tokens "$MAX_TOKENS" \
  --requests-per-client "${EMBER_BENCH_REQUESTS:-2}" --min-requests "${EMBER_BENCH_MIN_REQUESTS:-0}" --repeat "$REPEAT" --prompt-tokens "${EMBER_BENCH_PROMPT_TOKENS:-38}" --log-dir "$OUT" --json "$OUT/serve-bench.json"
ember_times
