#!/usr/bin/env bash
# The official `ollama` Python client, from the package index, in a cached virtual environment
# for the server's Ollama-API test (tests/engine/server/ollama_compat.py, ctest
# test_server_ollama). Every package is pinned in tests/engine/server/ollama-client-requirements.txt.
#
# Cache: ${EMBER_OLLAMA_VENV:-$HOME/.cache/ember/ollama-venv} (CMake's EMBER_OLLAMA_VENV has the
# same default). Idempotent and atomic: see scripts/fetch-python-venv.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec "$ROOT/scripts/fetch-python-venv.sh" "${EMBER_OLLAMA_VENV:-$HOME/.cache/ember/ollama-venv}" \
  "$ROOT/tests/engine/server/ollama-client-requirements.txt" ollama
