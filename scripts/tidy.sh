#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy: a few high-value bug checks) over the engine, kernels and app
# sources of a configured build folder (default build/ci; its compile_commands.json is made
# by CMAKE_EXPORT_COMPILE_COMMANDS, which the top CMakeLists.txt turns on).
#   scripts/tidy.sh [BUILD_DIR] [PATH_REGEX]     e.g. scripts/tidy.sh build/ci 'engine/'
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="${1:-build/ci}"
filter="${2:-^(engine|kernels|app)/}"
[[ -f "$build/compile_commands.json" ]] || { echo "[tidy] no $build/compile_commands.json: configure first" >&2; exit 2; }
TIDY="${CLANG_TIDY:-$(command -v clang-tidy-14 || command -v clang-tidy || true)}"
[[ -n "$TIDY" ]] || { echo "[tidy] clang-tidy not found (apt-get install clang-tidy)" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.cpp' | grep -E "$filter" | grep -v '^kernels/cuda/')
echo "[tidy] ${#files[@]} files" >&2
status=0
for f in "${files[@]}"; do "$TIDY" -p "$build" --quiet "$f" 2>/dev/null || status=1; done
exit $status
