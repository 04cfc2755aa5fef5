#!/usr/bin/env bash
# Copies the header-only dependencies of the engine and kernel tests (doctest, nlohmann-json)
# from this machine's /usr/include into build/carried-include, an ignored folder that CMake
# searches after the system folders (tests/CMakeLists.txt). A bare CUDA machine has no Debian
# packages: carry build/carried-include there with the working tree and the `engine` and `gpu`
# presets build and run the tests as here.
#
# usage: scripts/carry-headers.sh [DEST]   (default <repo>/build/carried-include)
# needs: doctest-dev and nlohmann-json3-dev installed here (scripts/install-deps.sh).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEST=${1:-$ROOT/build/carried-include}
# folder under /usr/include -> the header CMake looks for in it
HEADERS=(doctest/doctest.h nlohmann/json.hpp)

mkdir -p "$DEST"
for h in "${HEADERS[@]}"; do
  dir=${h%%/*}
  if [ ! -f "/usr/include/$h" ]; then
    echo "carry-headers: /usr/include/$h not found (apt-get install doctest-dev nlohmann-json3-dev)" >&2
    exit 1
  fi
  rm -rf "${DEST:?}/$dir"
  cp -r "/usr/include/$dir" "$DEST/$dir"
done
echo "carry-headers: $(du -sh "$DEST" | cut -f1) in $DEST (${HEADERS[*]})"
