#!/usr/bin/env bash
# Checks that every C++/CUDA source git tracks is formatted by .clang-format (clang-format 14,
# Debian 12). CI runs it (scripts/test.sh); exit status 1 and the offending files when not.
#   scripts/check-format.sh         check only
#   scripts/check-format.sh --fix   reformat the files in place
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

CLANG_FORMAT="${CLANG_FORMAT:-$(command -v clang-format-14 || command -v clang-format || true)}"
[[ -n "$CLANG_FORMAT" ]] || { echo "[check-format] clang-format not found (apt-get install clang-format)" >&2; exit 2; }

mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' '*.inc')
if [[ "${1:-}" == "--fix" ]]; then
  "$CLANG_FORMAT" -i --style=file "${files[@]}"
  echo "[check-format] formatted ${#files[@]} files"
  exit 0
fi

bad=()
for f in "${files[@]}"; do
  "$CLANG_FORMAT" --style=file --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  echo "[check-format] ${#bad[@]} of ${#files[@]} files are not formatted (run scripts/check-format.sh --fix):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "[check-format] ${#files[@]} files formatted"
