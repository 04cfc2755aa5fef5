#!/usr/bin/env bash
# MoE benchmark: Ember vs llama.cpp's llama-bench on a synthetic Qwen3-30B-A3B-layout file
# (qwen3-30b-a3b-mini: the real model's layers, 128 experts of 768, 8 used, 8 of its 48
# layers; 3.45 GB in Q4_K_M), prefill pp512 and decode tg128, back to back, same threads.
# Prints a markdown table last; docs/BENCHMARKS.md ("Mixture of experts") records it.
#
#   scripts/bench-moe.sh                      # Q4_K_M, 2 threads, 1 repetition (+ 1 warm-up each)
#   EMBER_BENCH_REPS=3 scripts/bench-moe.sh
#
# Knobs: EMBER_BENCH_SHAPE (qwen3-30b-a3b-mini), EMBER_BENCH_TYPE (Q4_K_M), EMBER_BENCH_THREADS
# (2), EMBER_BENCH_REPS (1), EMBER_BENCH_BUILD_DIR (build/engine; `ember` must be built),
# EMBER_BENCH_MODELS_DIR (~/.cache/ember/bench-models), EMBER_LLAMA_BIN (llama-bench's folder,
# skipping the build script's check). llama-bench is the peer built for this
# CPU (EMBER_LLAMA_NATIVE=1 scripts/llama-cpp-tools.sh llama-bench, cached), as in
# scripts/bench-cpu.sh. Each run waits up to EMBER_BENCH_WAIT_QUIET s (60) for quiet cores;
# "other load" is the share of the cores that other processes used during each run
# (/proc/stat minus the run's own CPU time): above ~10 % a row is not a result.
set -euo pipefail
# shellcheck disable=SC2034  # read by common.sh
EMBER_SCRIPT=bench-moe
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$EMBER_ROOT"

SHAPE="${EMBER_BENCH_SHAPE:-qwen3-30b-a3b-mini}"
TYPE="${EMBER_BENCH_TYPE:-Q4_K_M}"
THREADS="${EMBER_BENCH_THREADS:-2}"
REPS="${EMBER_BENCH_REPS:-1}"
BUILD="${EMBER_BENCH_BUILD_DIR:-build/engine}"
MODELS="${EMBER_BENCH_MODELS_DIR:-$HOME/.cache/ember/bench-models}"
EMBER="$BUILD/app/cli/ember"
[[ -x "$EMBER" ]] || ember_die "$EMBER is missing: cmake --build $BUILD --target ember"
LLAMA_BIN="${EMBER_LLAMA_BIN:-$(EMBER_LLAMA_NATIVE=1 scripts/llama-cpp-tools.sh llama-bench | tail -1)}"
MODEL="$MODELS/$SHAPE-$TYPE.gguf"
mkdir -p "$MODELS"
[[ -f "$MODEL" ]] || "$EMBER" synth --shape "$SHAPE" --type "$TYPE" -o "$MODEL" >&2

# run_measured OUT CMD...: after wait_quiet (common.sh), runs CMD with stdout to OUT; prints
# the other processes' share of the cores during the run, in percent.
run_measured() {
  local out="$1" b0 b1
  shift
  wait_quiet
  read -r b0 _ < <(cpu_jiffies)
  /usr/bin/time -f "%e %U %S" -o "$out.time" "$@" >"$out"
  read -r b1 _ < <(cpu_jiffies)
  awk -v b=$((b1 - b0)) -v hz="$(getconf CLK_TCK)" -v c="$(nproc)" \
    '{ v = (b / hz - ($2 + $3)) / ($1 * c) * 100; if (v < 0) v = 0; printf "%.0f", v }' "$out.time"
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
ember_log "ember bench $MODEL"
load_e="$(run_measured "$tmp/ember.json" "$EMBER" bench "$MODEL" --pp 512 --tg 128 -r "$REPS" --threads "$THREADS" --json)"
ember_log "llama-bench $MODEL"
load_l="$(run_measured "$tmp/llama.json" "$LLAMA_BIN/llama-bench" -m "$MODEL" -p 512 -n 128 -r "$REPS" -t "$THREADS" -o json)"

python3 - "$tmp/ember.json" "$tmp/llama.json" "$load_e" "$load_l" "$SHAPE" "$TYPE" "$THREADS" <<'EOF'
import json, sys
ember_path, llama_path, load_e, load_l, shape, qtype, threads = sys.argv[1:]
ember = {r["test"]: r for r in json.load(open(ember_path))["results"]}
llama = {}
for r in json.load(open(llama_path)):
    test = f"pp{r['n_prompt']}" if r["n_gen"] == 0 else f"tg{r['n_gen']}"
    llama[test] = {"tok_s": r["avg_ts"], "stddev": r["stddev_ts"]}
print(f"| model | test | ember tok/s | llama.cpp tok/s | ratio | other load (ember / llama.cpp) |")
print("|---|---|--:|--:|--:|--:|")
for test in ("pp512", "tg128"):
    e, l = ember[test], llama[test]
    print(f"| {shape} {qtype}, {threads} threads | {test} | {e['tok_s']:.2f} ± {e['stddev']:.2f} | "
          f"{l['tok_s']:.2f} ± {l['stddev']:.2f} | {e['tok_s'] / l['tok_s']:.2f}x | {load_e}% / {load_l}% |")
EOF
