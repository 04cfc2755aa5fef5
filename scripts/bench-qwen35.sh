#!/usr/bin/env bash
# Qwen3.5 benchmark (issue #40): Ember vs llama-bench, same run, on synthetic files of the
# Qwen3.5-4B layout (qwen35: 3 of 4 layers Gated DeltaNet) and of a scaled Qwen3.5-35B-A3B
# (qwen35moe: 8 of its 40 layers, 256 experts of 512, 8 used, a shared expert), Q4_K_M,
# prefill pp512 and decode tg64. scripts/bench-moe.sh does the work (its knobs apply; this
# sets only the shapes and the decode length); docs/BENCHMARKS.md ("Qwen3.5") records it.
#
#   scripts/bench-qwen35.sh                          # the table on stdout
#   EMBER_BENCH_JSON=/tmp/q35.json scripts/bench-qwen35.sh
set -euo pipefail
export EMBER_BENCH_SHAPE="${EMBER_BENCH_SHAPE:-qwen3.5-4b qwen3.5-35b-a3b-mini}"
export EMBER_BENCH_TG="${EMBER_BENCH_TG:-64}"
exec "$(dirname "${BASH_SOURCE[0]}")/bench-moe.sh" "$@"
