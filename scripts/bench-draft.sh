#!/usr/bin/env bash
# Draft-model speculation (issue #38): `ember run` greedy with and without `--draft`, back to
# back on the same files and prompts (scripts/spec-prompts.sh: a code edit and an open-ended
# one), beside llama.cpp's llama-server with and without `-md` (its draft decoding) on the same
# files. Prints a markdown table last: median decode tok/s of each, speedup, the share of
# proposed tokens accepted, whether Ember's two outputs were byte-identical (greedy: they must
# be). docs/BENCHMARKS.md ("Speculative decoding: draft models") records it.
#
# The pairs (each target with a draft of its vocabulary), made once in EMBER_BENCH_DRAFT_DIR:
#   - llama-3.2-1b Q4_0, a random-weight 1B shape (`ember synth`, seed 42), drafted by its
#     own first 2 layers (`ember synth --layers 2`, same seed and type: the very same bytes for
#     the embeddings, which are the tied output head, and those layers). Random weights make
#     the next token depend mostly on the current one, so this draft agrees unusually often:
#     the row shows the machinery's cost and gain at the 1B shape, not a real draft's quality.
#   - SmolLM2-135M-Instruct Q4_1 (the test model), drafted by a Q4_0 copy of itself (`ember
#     quantize --allow-requantize`): the package index has no other SmolLM2 size.
#
#   scripts/bench-draft.sh                     # 3 pairs of runs each, 1 thread
#   EMBER_BENCH_PEER=0 scripts/bench-draft.sh  # without llama-server
#
# One thread by default: on a loaded machine llama-server's 2 threads spin on each other (one
# 1B completion ran at 0.3 tok/s at load 18; 3.4 tok/s with 1 thread).
#
# Knobs: EMBER_BENCH_REPS (3), EMBER_BENCH_THREADS (1), EMBER_BENCH_TOKENS (64),
# EMBER_BENCH_DRAFT_MAX (8), EMBER_BENCH_PEER (1), EMBER_BENCH_BUILD_DIR (build/engine),
# EMBER_TEST_MODELS_DIR (~/.cache/ember/test-models), EMBER_BENCH_DRAFT_DIR
# (~/.cache/ember/draft-bench), EMBER_BENCH_PAIRS (synth smol).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

REPS="${EMBER_BENCH_REPS:-3}"
THREADS="${EMBER_BENCH_THREADS:-1}"
TOKENS="${EMBER_BENCH_TOKENS:-64}"
DMAX="${EMBER_BENCH_DRAFT_MAX:-8}"
PEER="${EMBER_BENCH_PEER:-1}"
EMBER="${EMBER_BENCH_BUILD_DIR:-build/engine}/app/cli/ember"
MODELS="${EMBER_TEST_MODELS_DIR:-$HOME/.cache/ember/test-models}"
DIR="${EMBER_BENCH_DRAFT_DIR:-$HOME/.cache/ember/draft-bench}"
PAIRS="${EMBER_BENCH_PAIRS:-synth smol}"
[[ -x "$EMBER" ]] || { echo "bench-draft: $EMBER is not built" >&2; exit 1; }
mkdir -p "$DIR"
source scripts/spec-prompts.sh

# The files of a pair: "target draft family" on stdout, made when missing.
pair_files() {
    case "$1" in
        synth)
            [[ -f "$DIR/llama-3.2-1b-Q4_0.gguf" ]] ||
                "$EMBER" synth --shape llama-3.2-1b --type Q4_0 -o "$DIR/llama-3.2-1b-Q4_0.gguf" >&2
            [[ -f "$DIR/llama-3.2-1b-L2-Q4_0.gguf" ]] ||
                "$EMBER" synth --shape llama-3.2-1b --type Q4_0 --layers 2 -o "$DIR/llama-3.2-1b-L2-Q4_0.gguf" >&2
            echo "$DIR/llama-3.2-1b-Q4_0.gguf $DIR/llama-3.2-1b-L2-Q4_0.gguf raw" ;;
        smol)
            local t="$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf"
            [[ -f "$t" ]] || { echo "bench-draft: $t is missing (scripts/fetch-test-models.sh)" >&2; exit 1; }
            [[ -f "$DIR/SmolLM2-135M-Instruct.Q4_0.gguf" ]] ||
                "$EMBER" quantize "$t" "$DIR/SmolLM2-135M-Instruct.Q4_0.gguf" Q4_0 --allow-requantize --quiet >&2
            echo "$t $DIR/SmolLM2-135M-Instruct.Q4_0.gguf chatml" ;;
        *) echo "bench-draft: unknown pair $1" >&2; exit 1 ;;
    esac
}

tmp="$(mktemp -d)"
# peer_start runs in a command substitution: the server's pid goes through a file.
cleanup() { [[ -f "$tmp/server.pid" ]] && kill "$(cat "$tmp/server.pid")" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# One ember run: decode tok/s on stdout; text in $tmp/out.$tag, stats in $tmp/err.$tag.
one() {  # target prompt tag [--draft FILE]
    "$EMBER" run "$1" -p "$2" --parse-special -n "$TOKENS" --temp 0 --threads "$THREADS" --device cpu \
        ${4:+$4 "$5" --draft-max "$DMAX"} >"$tmp/out.$3" 2>"$tmp/err.$3"
    grep -o 'decode [0-9.]* tok/s' "$tmp/err.$3" | awk '{print $2}'
}

# llama-server on `target` (with `-md draft` when given), one slot; prints its port.
peer_start() {  # target [draft]
    local bin server_pid port=$((20000 + RANDOM % 20000))
    bin="$(scripts/llama-cpp-tools.sh llama-server | tail -1)"
    "$bin/llama-server" -m "$1" ${2:+-md "$2" --spec-type draft-simple --spec-draft-n-max "$DMAX" --spec-draft-n-min 0} -t "$THREADS" -tb "$THREADS" \
        -c 2048 -np 1 --port "$port" --host 127.0.0.1 >"$tmp/server.log" 2>&1 &
    server_pid=$!
    echo "$server_pid" >"$tmp/server.pid"
    for _ in $(seq 600); do
        curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && { echo "$port"; return; }
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.5
    done
    echo "bench-draft: llama-server did not start:" >&2
    tail -5 "$tmp/server.log" >&2
    exit 1
}
peer_stop() {
    local pid
    pid="$(cat "$tmp/server.pid")"
    kill "$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
    rm -f "$tmp/server.pid"
}

# One greedy completion on the peer: "tok/s drafted accepted".
peer_one() {  # port prompt
    python3 - "$1" "$2" "$TOKENS" <<'PY'
import json, sys, urllib.request
port, prompt, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
body = {"prompt": prompt, "n_predict": n, "temperature": 0, "top_k": 1, "cache_prompt": False}
req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", json.dumps(body).encode(),
                             {"Content-Type": "application/json"})
t = json.load(urllib.request.urlopen(req, timeout=600))["timings"]
print(f"{t['predicted_per_second']:.2f} {t.get('draft_n', 0)} {t.get('draft_n_accepted', 0)}")
PY
}

rows=()
for name in $PAIRS; do
    read -r target draft family <<<"$(pair_files "$name")"
    for kind in code open; do
        text="$EDIT"
        [[ "$kind" == open ]] && text="$OPEN"
        p="$(prompt "$family" "$text")"
        : >"$tmp/plain" && : >"$tmp/draft"
        same=yes
        for ((r = 0; r < REPS; ++r)); do
            one "$target" "$p" plain >>"$tmp/plain"
            one "$target" "$p" draft --draft "$draft" >>"$tmp/draft"
            cmp -s "$tmp/out.plain" "$tmp/out.draft" || same=NO
        done
        plain="$(median <"$tmp/plain")" spec="$(median <"$tmp/draft")"
        accept="$(grep -o '([0-9]*%)' "$tmp/err.draft" | tr -d '()')"
        generated="$(grep -o '[0-9]* generated' "$tmp/err.draft" | awk '{print $1}')"
        speedup="$(awk -v a="$spec" -v b="$plain" 'BEGIN {printf "%.2f", a / b}')"
        rows+=("| ember | $(basename "$target") + $(basename "$draft") | $kind | $generated | $plain | $spec | ${speedup}x | $accept | $same |")
        echo "ember $name $kind: plain $(tr '\n' ' ' <"$tmp/plain")/ draft $(tr '\n' ' ' <"$tmp/draft")" >&2
    done
    [[ "$PEER" == 1 ]] || continue
    for with in plain draft; do
        port="$(peer_start "$target" "$([[ "$with" == draft ]] && echo "$draft")")"
        for kind in code open; do
            text="$EDIT"
            [[ "$kind" == open ]] && text="$OPEN"
            p="$(prompt "$family" "$text")"
            : >"$tmp/peer.$with.$kind"
            for ((r = 0; r < REPS; ++r)); do peer_one "$port" "$p" >>"$tmp/peer.$with.$kind"; done
        done
        peer_stop
    done
    for kind in code open; do
        plain="$(awk '{print $1}' "$tmp/peer.plain.$kind" | median)"
        spec="$(awk '{print $1}' "$tmp/peer.draft.$kind" | median)"
        accept="$(tail -1 "$tmp/peer.draft.$kind" | awk '{printf "%.0f%%", $2 ? 100 * $3 / $2 : 0}')"
        speedup="$(awk -v a="$spec" -v b="$plain" 'BEGIN {printf "%.2f", a / b}')"
        rows+=("| llama-server -md | $(basename "$target") + $(basename "$draft") | $kind | $TOKENS | $plain | $spec | ${speedup}x | $accept | - |")
        echo "peer $name $kind: plain $(awk '{print $1}' "$tmp/peer.plain.$kind" | tr '\n' ' ')/ draft $(awk '{print $1}' "$tmp/peer.draft.$kind" | tr '\n' ' ')" >&2
    done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| engine | target + draft | prompt | tokens | decode tok/s | with the draft | speedup | accepted | same text |"
echo "|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
