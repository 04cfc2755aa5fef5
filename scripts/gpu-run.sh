#!/usr/bin/env bash
# Runs on a lent GPU machine, over binaries that scripts/gpu-stage.sh built and staged here in
# .gpu-data/ (carried with the working tree): no compiler time on the device. Each step is its
# own process with its own time limit, so a kernel fault that kills one CUDA context cannot
# hide the results of the others:
#   ops       ember-gpu-check --only ops (every op vs float64 / the CPU backend); when it
#             fails with a CUDA error, each op row again alone, to name the one that broke
#             the context
#   models    ember-gpu-check --only models (stories260K: logits, greedy tokens, graphs)
#   tests     test_cuda_gpu: the kernel tests CI runs under the emulator, on the GPU
#   fit       ember-gpu-check --only fit: the fit planner's bytes against loads on the GPU
#             (per kind and the card's free-memory drop; stories260K, 1B Q4_0, 8B Q4_K_M at
#             2048 and 8192 tokens, and 8 of the 8B's 32 layers on the GPU)
#   bench     ember-gpu-check --only bench: copy bandwidth, single ops at 8B shapes (GB/s,
#             TFLOP/s), decode of synthetic Llama-3.2-1B (Q4_0, Q8_0) and Llama-3-8B
#             (Q4_K_M), prefill 2048 vs cuBLAS GEMM alone
#   cli       the `ember` CLI on the GPU: text from stories260K, perplexity GPU vs CPU,
#             `ember bench` single stream and 16 parallel requests (the serving scheduler)
#   peer      llama.cpp's llama-bench (CUDA, staged in .gpu-data/peer) beside `ember bench` on
#             the same synthetic files: 1B Q4_0 and 8B Q4_K_M, pp512 + tg128, all layers on
#             the GPU; JSON in $OUT/peer-*.json
#   sanitize  test_cuda_gpu under compute-sanitizer memcheck
# A table of the steps is printed last; logs and JSON are written to $OUT.
#
# usage (on the device): scripts/gpu-run.sh [STEP...]     (default: every step, in that order)
# env: OUT (results; default build/gpu-run), EMBER_SYNTH_DIR (default /tmp/ember-synth),
#      GPU_RUN_BUDGET_S (seconds for the whole run: each step's limit is cut to what is left,
#      and a step with under 20 s left is skipped, so the table is always printed; default 3600)
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STAGE=$ROOT/.gpu-data
OUT=${OUT:-$ROOT/build/gpu-run}
SYNTH=${EMBER_SYNTH_DIR:-/tmp/ember-synth}
START=$(date +%s)
DEADLINE=$((START + ${GPU_RUN_BUDGET_S:-3600}))
mkdir -p "$OUT" "$SYNTH"
LOG=$OUT/run.log
: >"$LOG"
SUMMARY=()

say() { echo "== [$(($(date +%s) - START)) s] $*" | tee -a "$LOG"; }
# step NAME LIMIT_S CMD...: runs CMD under `timeout`, its output into the log and the reply.
step() {
  local name=$1 limit=$2 t0 rc
  shift 2
  t0=$(date +%s)
  if [ $((DEADLINE - t0)) -lt 20 ]; then
    SUMMARY+=("$(printf '%-34s SKIPPED (out of time)' "$name")")
    return 124
  fi
  [ "$limit" -gt $((DEADLINE - t0 - 10)) ] && limit=$((DEADLINE - t0 - 10))
  say "$name: $*"
  timeout -k 5 "$limit" "$@" 2>&1 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  SUMMARY+=("$(printf '%-34s exit %-4s %4d s' "$name" "$rc" $(($(date +%s) - t0)))")
  return "$rc"
}

# ---- the machine, and where its cuBLAS is ------------------------------------------------------
say "machine"
{
  uname -srm
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  lscpu | grep -E 'Model name|^CPU\(s\)'
  ls /usr/local/cuda/bin/compute-sanitizer 2>&1
} 2>&1 | tee -a "$LOG"
CUBLAS=$(ldconfig -p | awk '/libcublas\.so\.13 /{print $NF; exit}')
[ -z "$CUBLAS" ] && CUBLAS=$(find /usr/local/cuda/ /usr/local/cuda*/ /usr/lib /opt -name 'libcublas.so.13' 2>/dev/null | head -1)
say "libcublas.so.13: ${CUBLAS:-not found}"
export LD_LIBRARY_PATH="${CUBLAS:+$(dirname "$CUBLAS"):}$STAGE/syslib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if ! "$STAGE/bin/ember-gpu-check" --list-ops >/dev/null 2>&1; then
  say "the staged binaries do not start with this machine's libstdc++: using the staged one"
  export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$STAGE/stdlib"
  "$STAGE/bin/ember-gpu-check" --list-ops 2>&1 | tail -3 | tee -a "$LOG"
fi
export EMBER_CUDA_MODULE=$STAGE/lib/libember_cuda.so
ln -sfn "$STAGE/testdata" /tmp/ember-testdata
mkdir -p /tmp/ember-test-models
CHECK=$STAGE/bin/ember-gpu-check
EMBER=$STAGE/bin/ember
STORIES=$STAGE/testdata/models/stories260K.gguf

run_tests() { step "test_cuda_gpu" 150 "$STAGE/bin/test_cuda_gpu"; }

run_ops() {
  step "gpu-check ops" 90 "$CHECK" --only ops --json "$OUT/ops.json" && return 0
  # A fault that poisons the CUDA context fails every later row: name the row that did it.
  tail -200 "$LOG" | grep -qiE 'illegal|launch fail|unspecified|cudaError|misaligned|timeout|abort' || return 1
  local op
  for op in $("$CHECK" --list-ops | awk '{print $1}'); do
    step "gpu-check ops: $op alone" 45 "$CHECK" --only ops --op "$op" >/dev/null
  done
}

run_models() { step "gpu-check models" 60 "$CHECK" --only models --models "$STAGE/testdata" --json "$OUT/models.json"; }

synth() {  # shape type -> path
  local f="$SYNTH/$1-$2.gguf"
  [ -s "$f" ] || "$CHECK" --synth "$1" "$2" "$f" >>"$LOG" 2>&1 || return 1
  echo "$f"
}

run_fit() {
  local m1 m8
  m1=$(synth llama-3.2-1b Q4_0) && m8=$(synth llama-3-8b Q4_K_M) || { say "!!! synthetic models not written"; return 1; }
  step "gpu-check fit" 120 "$CHECK" --only fit --models "$STAGE/testdata" --bench-model "$m1" --bench-model "$m8" \
    --json "$OUT/fit.json"
}

run_bench() {
  local m1 m2 m8
  m1=$(synth llama-3.2-1b Q4_0) && m2=$(synth llama-3.2-1b Q8_0) && m8=$(synth llama-3-8b Q4_K_M) ||
    { say "!!! synthetic models not written"; return 1; }
  step "gpu-check bench" 200 "$CHECK" --only bench --bench-model "$m1" --bench-model "$m2" --bench-model "$m8" \
    --prefill-model "$m8" --json "$OUT/bench.json"
}

run_cli() {
  local m1 m8
  step "ember run stories260K (cuda)" 30 "$EMBER" run "$STORIES" -p "Once upon a time" -n 48 --device cuda
  step "ember perplexity (cuda)" 30 "$EMBER" perplexity "$STORIES" -f "$STAGE/text/GPL-3" --ctx 128 --chunks 8 --device cuda
  step "ember perplexity (cpu)" 30 "$EMBER" perplexity "$STORIES" -f "$STAGE/text/GPL-3" --ctx 128 --chunks 8 --device cpu
  m1=$(synth llama-3.2-1b Q4_0) || return 1
  step "ember bench 1B Q4_0 (cuda)" 90 "$EMBER" bench "$m1" --device cuda --pp 512 --tg 128 -r 3
  step "ember bench 1B Q4_0 --parallel 16" 120 "$EMBER" bench "$m1" --device cuda --pp 128 --tg 128 -r 2 --parallel 16
  # CUDA graphs off: on 2026-12-04 gpu-check's decode was faster without them (1B and 8B).
  step "ember bench 1B Q4_0 (cuda, no graphs)" 90 env EMBER_CUDA_GRAPHS=0 "$EMBER" bench "$m1" --device cuda --pp 0 --tg 128 -r 3
  m8=$(synth llama-3-8b Q4_K_M) || return 1
  step "ember bench 8B Q4_K_M (cuda)" 120 "$EMBER" bench "$m8" --device cuda --pp 512 --tg 128 -r 2
  step "ember bench 8B Q4_K_M (cuda, no graphs)" 90 env EMBER_CUDA_GRAPHS=0 "$EMBER" bench "$m8" --device cuda --pp 0 --tg 128 -r 2
}

run_peer() {
  local bench=$STAGE/peer/llama-bench m name
  [ -x "$bench" ] || { say "!!! no llama-bench in $STAGE/peer (gpu-stage.sh stages it when built)"; return 1; }
  for name in "1B Q4_0" "8B Q4_K_M"; do
    case $name in
      1B*) m=$(synth llama-3.2-1b Q4_0) || return 1 ;;
      8B*) m=$(synth llama-3-8b Q4_K_M) || return 1 ;;
    esac
    # JSON to files (step's own lines go to stdout), then into the log.
    # shellcheck disable=SC2016  # $1 and $@ are the inner shell's
    step "ember bench $name (cuda, peer's files)" 120 sh -c 'f=$1; shift; exec "$@" >"$f"' sh \
      "$OUT/peer-ember-${name%% *}.json" "$EMBER" bench "$m" --device cuda --pp 512 --tg 128 -r 3 --json
    # shellcheck disable=SC2016
    step "llama-bench $name (cuda)" 120 sh -c 'f=$1; shift; exec "$@" >"$f"' sh \
      "$OUT/peer-llama-${name%% *}.json" "$bench" -m "$m" -p 512 -n 128 -r 3 -ngl 99 -o json
    cat "$OUT/peer-ember-${name%% *}.json" "$OUT/peer-llama-${name%% *}.json" 2>/dev/null | tee -a "$LOG"
  done
}

run_sanitize() {
  local san=/usr/local/cuda/bin/compute-sanitizer
  command -v compute-sanitizer >/dev/null && san=$(command -v compute-sanitizer)
  [ -x "$san" ] || { say "!!! compute-sanitizer not found"; return 1; }
  step "test_cuda_gpu under memcheck" 240 "$san" --tool memcheck --error-exitcode 3 "$STAGE/bin/test_cuda_gpu"
}

STEPS=("$@")
[ ${#STEPS[@]} -eq 0 ] && STEPS=(ops models tests fit bench cli peer sanitize)
for s in "${STEPS[@]}"; do
  case $s in
    ops | models | tests | fit | bench | cli | peer | sanitize) "run_$s" ;;
    *) say "unknown step $s (ops models tests fit bench cli peer sanitize)" ;;
  esac
done

nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader 2>&1 | tee -a "$LOG"
echo
echo "==================== gpu-run: $(($(date +%s) - START)) s ===================="
printf '%s\n' "${SUMMARY[@]}" | tee -a "$LOG"
