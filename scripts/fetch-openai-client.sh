#!/usr/bin/env bash
# The official `openai` Python client, from the package index, in a cached virtual environment
# for the server's compatibility test (tests/engine/server/openai_compat.py, ctest
# test_server_openai). Every package is pinned in tests/engine/server/openai-client-requirements.txt.
#
# Cache: ${EMBER_OPENAI_VENV:-$HOME/.cache/ember/openai-venv} (CMake's EMBER_OPENAI_VENV has the
# same default). Idempotent: a venv made from the same requirements file is kept as it is.
# Atomic: built beside the cache and renamed into place once `import openai` works.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${EMBER_OPENAI_VENV:-$HOME/.cache/ember/openai-venv}"
REQS="$ROOT/tests/engine/server/openai-client-requirements.txt"
PYTHON="${PYTHON:-python3}"

log() { printf '[fetch-openai-client] %s\n' "$*" >&2; }
die() { printf '[fetch-openai-client] ERROR: %s\n' "$*" >&2; exit 1; }

want="$(sha256sum "$REQS" | cut -d' ' -f1)"
if [[ -x "$VENV/bin/python" && "$(cat "$VENV/.requirements.sha256" 2>/dev/null)" == "$want" ]] \
   && "$VENV/bin/python" -c 'import openai' 2>/dev/null; then
  log "ok (cached): $VENV ($("$VENV/bin/python" -c 'import openai; print("openai", openai.__version__)'))"
  exit 0
fi
mkdir -p "$(dirname "$VENV")"
tmp="$VENV.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
rm -rf "$tmp"
"$PYTHON" -m venv "$tmp" || die "cannot make a virtual environment with $PYTHON (Debian: python3-venv)"
log "installing the pinned openai client into $VENV"
"$tmp/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --only-binary=:all: -r "$REQS" \
  || die "pip install failed (is the Python package index reachable?)"
"$tmp/bin/python" -c 'import openai' || die "the openai package does not import"
echo "$want" > "$tmp/.requirements.sha256"
rm -rf "$VENV"
mv "$tmp" "$VENV"
log "ok (installed): $VENV ($("$VENV/bin/python" -c 'import openai; print("openai", openai.__version__)'))"
