#!/usr/bin/env bash
# The official `openai` Python client, from the package index, in a cached virtual environment
# for the server's compatibility test (tests/engine/server/openai_compat.py, ctest
# test_server_openai). Every package is pinned in tests/engine/server/openai-client-requirements.txt.
#
# Cache: ${EMBER_OPENAI_VENV:-$HOME/.cache/ember/openai-venv} (CMake's EMBER_OPENAI_VENV has the
# same default). Idempotent and atomic: see scripts/fetch-python-venv.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec "$ROOT/scripts/fetch-python-venv.sh" "${EMBER_OPENAI_VENV:-$HOME/.cache/ember/openai-venv}" \
  "$ROOT/tests/engine/server/openai-client-requirements.txt" openai
