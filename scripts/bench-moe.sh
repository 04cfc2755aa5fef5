#!/usr/bin/env bash
# MoE benchmark: Ember vs llama.cpp's llama-bench on synthetic files of real layouts (by
# default qwen3-30b-a3b-mini: Qwen3-30B-A3B's layers, 128 experts of 768, 8 used, 8 of its 48
# layers; 3.45 GB in Q4_K_M), prefill pp512 and decode tg128, back to back, same threads.
# Prints a markdown table last (one row per shape and test); docs/BENCHMARKS.md ("Mixture of
# experts", "Qwen3.5") records it. scripts/bench-qwen35.sh runs it on the Qwen3.5 layouts.
#
#   scripts/bench-moe.sh                      # Q4_K_M, 2 threads, 1 repetition (+ 1 warm-up each)
#   EMBER_BENCH_REPS=3 scripts/bench-moe.sh
#   EMBER_BENCH_SHAPE="qwen3.5-4b qwen3.5-35b-a3b-mini" EMBER_BENCH_TG=64 EMBER_BENCH_JSON=out.json scripts/bench-moe.sh
#
# Knobs: EMBER_BENCH_SHAPE (qwen3-30b-a3b-mini; several, space-separated, run in turn),
# EMBER_BENCH_TYPE (Q4_K_M), EMBER_BENCH_THREADS (2), EMBER_BENCH_REPS (1), EMBER_BENCH_PP
# (512), EMBER_BENCH_TG (128), EMBER_BENCH_JSON (also write the rows there, with the load
# average before each run), EMBER_BENCH_BUILD_DIR (build/engine; `ember` must be built),
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

SHAPES="${EMBER_BENCH_SHAPE:-qwen3-30b-a3b-mini}"
TYPE="${EMBER_BENCH_TYPE:-Q4_K_M}"
THREADS="${EMBER_BENCH_THREADS:-2}"
REPS="${EMBER_BENCH_REPS:-1}"
PP="${EMBER_BENCH_PP:-512}"
TG="${EMBER_BENCH_TG:-128}"
BUILD="${EMBER_BENCH_BUILD_DIR:-build/engine}"
MODELS="${EMBER_BENCH_MODELS_DIR:-$HOME/.cache/ember/bench-models}"
EMBER="$BUILD/app/cli/ember"
[[ -x "$EMBER" ]] || ember_die "$EMBER is missing: cmake --build $BUILD --target ember"
LLAMA_BIN="${EMBER_LLAMA_BIN:-$(EMBER_LLAMA_NATIVE=1 scripts/llama-cpp-tools.sh llama-bench | tail -1)}"
mkdir -p "$MODELS"

# run_measured OUT CMD...: after wait_quiet (common.sh), runs CMD with stdout to OUT; prints
# the other processes' share of the cores during the run, in percent, and the 1-minute load
# average just before it.
run_measured() {
  local out="$1" b0 b1 load
  shift
  wait_quiet
  read -r load _ </proc/loadavg
  read -r b0 _ < <(cpu_jiffies)
  /usr/bin/time -f "%e %U %S" -o "$out.time" "$@" >"$out"
  read -r b1 _ < <(cpu_jiffies)
  awk -v b=$((b1 - b0)) -v hz="$(getconf CLK_TCK)" -v c="$(nproc)" -v load="$load" \
    '{ v = (b / hz - ($2 + $3)) / ($1 * c) * 100; if (v < 0) v = 0; printf "%.0f %s\n", v, load }' "$out.time"
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for SHAPE in $SHAPES; do
  MODEL="$MODELS/$SHAPE-$TYPE.gguf"
  [[ -f "$MODEL" ]] || "$EMBER" synth --shape "$SHAPE" --type "$TYPE" -o "$MODEL" >&2
  ember_log "ember bench $MODEL"
  read -r load_e avg_e < <(run_measured "$tmp/$SHAPE.ember.json" "$EMBER" bench "$MODEL" --pp "$PP" --tg "$TG" \
    -r "$REPS" --threads "$THREADS" --json)
  ember_log "llama-bench $MODEL"
  read -r load_l avg_l < <(run_measured "$tmp/$SHAPE.llama.json" "$LLAMA_BIN/llama-bench" -m "$MODEL" -p "$PP" \
    -n "$TG" -r "$REPS" -t "$THREADS" -o json)
  echo "$SHAPE $load_e $load_l $avg_e $avg_l" >>"$tmp/runs"
done

python3 - "$tmp" "$TYPE" "$THREADS" "$PP" "$TG" "${EMBER_BENCH_JSON:-}" <<'PY'
import json, sys
tmp, qtype, threads, pp, tg, json_out = sys.argv[1:]
rows = []
for line in open(f"{tmp}/runs"):
    shape, load_e, load_l, avg_e, avg_l = line.split()
    ember = {r["test"]: r for r in json.load(open(f"{tmp}/{shape}.ember.json"))["results"]}
    llama = {}
    for r in json.load(open(f"{tmp}/{shape}.llama.json")):
        test = f"pp{r['n_prompt']}" if r["n_gen"] == 0 else f"tg{r['n_gen']}"
        llama[test] = {"tok_s": r["avg_ts"], "stddev": r["stddev_ts"]}
    for test in (f"pp{pp}", f"tg{tg}"):
        e, l = ember[test], llama[test]
        rows.append({"model": shape, "type": qtype, "threads": int(threads), "test": test,
                     "ember_tok_s": e["tok_s"], "ember_stddev": e["stddev"],
                     "llama_tok_s": l["tok_s"], "llama_stddev": l["stddev"],
                     "ratio": e["tok_s"] / l["tok_s"], "other_load_pct": [int(load_e), int(load_l)],
                     "loadavg_before": [float(avg_e), float(avg_l)]})
print("| model | test | ember tok/s | llama.cpp tok/s | ratio | other load (ember / llama.cpp) | load average before |")
print("|---|---|--:|--:|--:|--:|--:|")
for r in rows:
    print(f"| {r['model']} {r['type']}, {r['threads']} threads | {r['test']} | {r['ember_tok_s']:.2f} ± "
          f"{r['ember_stddev']:.2f} | {r['llama_tok_s']:.2f} ± {r['llama_stddev']:.2f} | {r['ratio']:.2f}x | "
          f"{r['other_load_pct'][0]}% / {r['other_load_pct'][1]}% | {r['loadavg_before'][0]:.2f} / "
          f"{r['loadavg_before'][1]:.2f} |")
if json_out:
    with open(json_out, "w") as f:
        json.dump({"rows": rows}, f, indent=1)
PY
