#!/usr/bin/env bash
# The official `openai` client and `jsonschema`, from the package index, in a cached virtual
# environment for the structured-output acceptance test (tests/engine/grammar/structured_output.py,
# ctest test_structured_output). Every package is pinned in
# tests/engine/grammar/structured-output-requirements.txt. A venv of its own, so the openai
# client's venv (scripts/fetch-openai-client.sh) stays as the other tests pin it.
#
# Cache: ${EMBER_STRUCTURED_VENV:-$HOME/.cache/ember/structured-venv} (CMake's
# EMBER_STRUCTURED_VENV has the same default). Idempotent and atomic: scripts/fetch-python-venv.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${EMBER_STRUCTURED_VENV:-$HOME/.cache/ember/structured-venv}"
"$ROOT/scripts/fetch-python-venv.sh" "$VENV" "$ROOT/tests/engine/grammar/structured-output-requirements.txt" openai
exec "$VENV/bin/python" -c "import jsonschema"
