#!/usr/bin/env bash
# Python's jinja2 (the reference for Ember's template interpreter), from the package index, in
# a cached virtual environment for ctest test_template_jinja2 (tests/engine/template/
# render_jinja2.py renders the models' real chat templates the way transformers does; the test
# compares Ember's bytes with its). Pinned in tests/engine/template/jinja2-requirements.txt.
#
# Cache: ${EMBER_JINJA2_VENV:-$HOME/.cache/ember/jinja2-venv} (CMake's EMBER_JINJA2_VENV has
# the same default). Idempotent and atomic: see scripts/fetch-python-venv.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec "$ROOT/scripts/fetch-python-venv.sh" "${EMBER_JINJA2_VENV:-$HOME/.cache/ember/jinja2-venv}" \
  "$ROOT/tests/engine/template/jinja2-requirements.txt" jinja2
