#!/usr/bin/env bash
# Fuzzes the GGUF parser for a bounded time (default 60 s) with libFuzzer + ASan + UBSan.
# Seeds: small generated files and the stories260K model. Usage: scripts/fuzz-gguf.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target fuzz_gguf
corpus=build/fuzz/corpus-gguf
mkdir -p "$corpus"
testdata="${EMBER_TESTDATA_DIR:-$(pwd)/../shared/testdata}"
if [ -f "$testdata/models/stories260K.gguf" ]; then
  head -c 65536 "$testdata/models/stories260K.gguf" > "$corpus/stories-head.gguf"
fi
for f in "$testdata"/tokenizer/ggml-vocab-llama-spm.gguf; do
  [ -f "$f" ] && head -c 32768 "$f" > "$corpus/vocab-head.gguf"
done
build/fuzz/tests/fuzz/fuzz_gguf "$corpus" -max_total_time="$seconds" -max_len=70000 -rss_limit_mb=2048 \
  -timeout=10 -print_final_stats=1
