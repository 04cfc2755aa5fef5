#!/usr/bin/env bash
# Fuzzes everything that reads untrusted input, each target for a bounded time, with
# libFuzzer + ASan + UBSan (clang, `fuzz` preset):
#   fuzz_gguf       the GGUF parser (model files)
#   fuzz_jinja      chat templates: lexer, parser, interpreter (templates come from model files)
#   fuzz_tool_json  the tool definitions, tool-call arguments and extra variables a request hands a template
#   fuzz_tokenizer  encode/decode of arbitrary bytes with every test vocabulary
#   fuzz_gguf_prefix  the header-only parse of a file's first bytes, and the fit planner on it
#   fuzz_hub        the model hub's JSON answers, Content-Range and remote file names
#   fuzz_logits_file  saved base runs of `ember perplexity --kl-divergence` (llama.cpp's format)
#   fuzz_server_request  the HTTP server's request bodies, OpenAI's and Ollama's (JSON -> EngineRequest)
#   fuzz_kv_block   the prefix cache's block files on disk, parsed and read back through the store
#   fuzz_tool_calls the tool-call parser on model output (every family's form)
#   fuzz_grammar    GBNF grammars and JSON schemas from requests, then bytes through the matcher
#   fuzz_remote     a remote server's event stream, chunks, model lists and error bodies (engine/remote)
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (default: 60 s each, every target; EMBER_JOBS
# targets at a time, default: one per core)
#
# Seeds: the head of stories260K and a vocab GGUF; the upstream chat templates and
# jinja_cases.json; the vocab test texts (tests/fuzz/make_seeds.py). Inputs kept under
# tests/fuzz/corpus/TARGET (regressions of bugs found) run first, every time. A crash, a
# sanitizer report, a leak or a timeout fails the script (after all targets ran); the input
# that caused it is kept as build/fuzz/artifacts/TARGET-*.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(fuzz_gguf fuzz_jinja fuzz_tool_json fuzz_tokenizer fuzz_gguf_prefix fuzz_hub fuzz_logits_file fuzz_server_request fuzz_kv_block fuzz_reasoning fuzz_tool_calls fuzz_grammar fuzz_remote)
testdata="${EMBER_TESTDATA_DIR:-$(pwd)/../shared/testdata}"
export EMBER_TESTDATA_DIR="$testdata"

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target "${targets[@]}"

out=build/fuzz
rm -rf "$out/seeds"
mkdir -p "$out/seeds/gguf" "$out/artifacts" "$out/logs"
python3 tests/fuzz/make_seeds.py "$(pwd)" "$testdata" "$out/seeds"
[[ -f "$testdata/models/stories260K.gguf" ]] || { echo "missing $testdata/models/stories260K.gguf" >&2; exit 1; }
head -c 65536 "$testdata/models/stories260K.gguf" > "$out/seeds/gguf/stories-head.gguf"
head -c 32768 "$testdata/tokenizer/ggml-vocab-llama-spm.gguf" > "$out/seeds/gguf/vocab-head.gguf"
cp -r "$out/seeds/gguf" "$out/seeds/gguf_prefix"  # the same heads, read as prefixes
# A valid saved-logits file: n_ctx 4, n_vocab 3, 1 chunk, tokens, one record (scale, min, q[3], pad).
mkdir -p "$out/seeds/logits_file"
python3 -c 'import struct,sys; sys.stdout.buffer.write(b"_logits_" + struct.pack("<3i4i2f4H", 4, 3, 1, 1, 2, 0, 1, 0.0002, -16.5, 65535, 100, 0, 0))' \
  > "$out/seeds/logits_file/small.kld"

# fuzz_one TARGET: one target for $seconds; prints its summary line, or its log's end on a failure.
fuzz_one() {
  local t="$1" name="${1#fuzz_}"
  local args=(-max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 -print_final_stats=1
              -artifact_prefix="$out/artifacts/$t-")
  case "$name" in
    gguf | gguf_prefix) args+=(-max_len=70000) ;;
    jinja) args+=(-max_len=16384 -dict=tests/fuzz/jinja.dict) ;;
    tool_json) args+=(-max_len=4096 -dict=tests/fuzz/server_request.dict) ;;
    tokenizer) args+=(-max_len=4096) ;;
    hub) args+=(-max_len=8192) ;;
    logits_file) args+=(-max_len=8192) ;;
    kv_block) args+=(-max_len=4096) ;;
    reasoning) args+=(-max_len=4096) ;;
    grammar) args+=(-max_len=8192 -dict=tests/fuzz/grammar.dict) ;;
    server_request) args+=(-max_len=16384 -dict=tests/fuzz/server_request.dict) ;;
  esac
  local corpora=("$out/corpus-$name")
  # Generated seeds and the kept corpus, where the target has them (fuzz_hub: corpus only).
  [[ -d "$out/seeds/$name" ]] && corpora+=("$out/seeds/$name")
  [[ -d "tests/fuzz/corpus/$name" ]] && corpora+=("tests/fuzz/corpus/$name")
  mkdir -p "$out/corpus-$name"
  local log="$out/logs/$t.log"
  if "$out/tests/fuzz/$t" "${args[@]}" "${corpora[@]}" >"$log" 2>&1; then
    echo "==> $t: ${seconds}s: $({ grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ +DONE)' "$log" || true; } | tr '\n' ' ')"
  else
    echo "FAILED: $t (exit $?); the end of its log ($log):"
    tail -n 60 "$log"
    return 1
  fi
}

# EMBER_JOBS targets at a time (each fuzzer is one process on one core).
jobs="${EMBER_JOBS:-$(nproc)}"
echo "==> ${#targets[@]} targets, ${seconds}s each, $jobs at a time (logs: $out/logs)"
failed=()
declare -A running=()  # pid -> target
reap() {  # waits for one running target; records it when it failed
  local pid
  wait -n -p pid "${!running[@]}" || failed+=("${running[$pid]}")
  unset "running[$pid]"
}
for t in "${targets[@]}"; do
  while [[ ${#running[@]} -ge $jobs ]]; do reap; done
  fuzz_one "$t" &
  running[$!]="$t"
done
while [[ ${#running[@]} -gt 0 ]]; do reap; done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzzing found problems in: ${failed[*]} (inputs in $out/artifacts)" >&2
  exit 1
fi
echo "fuzzing: ${targets[*]}: no crash, no sanitizer report in ${seconds}s each"
