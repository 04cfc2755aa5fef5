#!/usr/bin/env bash
# Prompt lookup speculation (issue #38): `ember run` greedy, with and without --lookup, back to
# back on the same file and prompt, on a code-editing prompt (the model rewrites a function
# with a rename: the answer repeats the prompt) and an open-ended one. Prints a markdown table
# last: median decode tok/s of each, the speedup, the share of guessed tokens accepted, and
# whether the two outputs were byte-identical (greedy: they must be). docs/BENCHMARKS.md
# ("Speculative decoding") records it.
#
#   scripts/bench-lookup.sh                    # gemma3-270m and SmolLM2, 3 pairs each, 1 thread
#   EMBER_BENCH_REPS=5 EMBER_BENCH_THREADS=2 scripts/bench-lookup.sh
#
# Knobs: EMBER_BENCH_REPS (3), EMBER_BENCH_THREADS (1), EMBER_BENCH_TOKENS (160),
# EMBER_BENCH_BUILD_DIR (build/engine; `ember` must be built), EMBER_TEST_MODELS_DIR
# (~/.cache/ember/test-models: scripts/fetch-test-models.sh).
# Beside llama-server's n-gram speculation and with 16 streams: tests/bench/lookup_peer.py.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

REPS="${EMBER_BENCH_REPS:-3}"
THREADS="${EMBER_BENCH_THREADS:-1}"
TOKENS="${EMBER_BENCH_TOKENS:-160}"
EMBER="${EMBER_BENCH_BUILD_DIR:-build/engine}/app/cli/ember"
MODELS="${EMBER_TEST_MODELS_DIR:-$HOME/.cache/ember/test-models}"
[[ -x "$EMBER" ]] || { echo "bench-lookup: $EMBER is not built" >&2; exit 1; }

# The code-editing and open-ended prompts, and prompt(): shared with bench-draft.sh.
source scripts/spec-prompts.sh

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
rows=()
# One run: decode tok/s on stdout; text in $tmp/out.$tag, stats in $tmp/err.$tag.
one() {  # model prompt tag [--lookup]
    "$EMBER" run "$1" -p "$2" --parse-special -n "$TOKENS" --temp 0 --threads "$THREADS" ${4:-} \
        >"$tmp/out.$3" 2>"$tmp/err.$3"
    grep -o 'decode [0-9.]* tok/s' "$tmp/err.$3" | awk '{print $2}'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

for entry in "gemma:gemma-3-270m-q4_k_m.gguf" "chatml:SmolLM2-135M-Instruct.Q4_1.gguf"; do
    family="${entry%%:*}" file="$MODELS/${entry#*:}"
    [[ -f "$file" ]] || { echo "bench-lookup: $file is missing (scripts/fetch-test-models.sh)" >&2; exit 1; }
    for kind in code open; do
        text="$EDIT"
        [[ "$kind" == open ]] && text="$OPEN"
        p="$(prompt "$family" "$text")"
        : >"$tmp/plain" && : >"$tmp/lookup"
        same=yes
        for ((r = 0; r < REPS; ++r)); do
            one "$file" "$p" plain >>"$tmp/plain"
            one "$file" "$p" lookup --lookup >>"$tmp/lookup"
            cmp -s "$tmp/out.plain" "$tmp/out.lookup" || same=NO
        done
        plain="$(median <"$tmp/plain")" lookup="$(median <"$tmp/lookup")"
        accept="$(grep -o '([0-9]*%)' "$tmp/err.lookup" | tr -d '()')"
        generated="$(grep -o '[0-9]* generated' "$tmp/err.lookup" | awk '{print $1}')"
        speedup="$(awk -v a="$lookup" -v b="$plain" 'BEGIN {printf "%.2f", a / b}')"
        rows+=("| ${entry#*:} | $kind | $generated | $plain | $lookup | ${speedup}x | $accept | $same |")
        echo "${entry#*:} $kind: plain $(tr '\n' ' ' <"$tmp/plain")/ lookup $(tr '\n' ' ' <"$tmp/lookup")" >&2
    done
done
echo "| model | prompt | tokens | decode tok/s | with --lookup | speedup | accepted | same text |"
echo "|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
