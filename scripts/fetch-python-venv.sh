#!/usr/bin/env bash
# A cached virtual environment holding exactly the pinned packages of one requirements file,
# from the package index, for tests that drive a Python reference (the openai client, jinja2).
#
#   scripts/fetch-python-venv.sh VENV REQUIREMENTS MODULE
#
# Idempotent: a venv made from the same requirements file (sha256 in VENV/.requirements.sha256)
# whose MODULE imports is kept as it is. Atomic: built beside VENV and renamed into place once
# `import MODULE` works, so a half-made venv is never used.
set -euo pipefail
[[ $# -eq 3 ]] || { echo "usage: $0 VENV REQUIREMENTS MODULE" >&2; exit 2; }
VENV="$1"
REQS="$2"
MODULE="$3"
PYTHON="${PYTHON:-python3}"
TAG="fetch-venv $MODULE"

log() { printf '[%s] %s\n' "$TAG" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "$TAG" "$*" >&2; exit 1; }
version() { "$1/bin/python" -c "import $MODULE as m; print('$MODULE', getattr(m, '__version__', '?'))"; }

[[ -f "$REQS" ]] || die "no requirements file $REQS"
want="$(sha256sum "$REQS" | cut -d' ' -f1)"
if [[ -x "$VENV/bin/python" && "$(cat "$VENV/.requirements.sha256" 2>/dev/null)" == "$want" ]] \
   && "$VENV/bin/python" -c "import $MODULE" 2>/dev/null; then
  log "ok (cached): $VENV ($(version "$VENV"))"
  exit 0
fi
mkdir -p "$(dirname "$VENV")"
tmp="$VENV.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
rm -rf "$tmp"
"$PYTHON" -m venv "$tmp" || die "cannot make a virtual environment with $PYTHON (Debian: python3-venv)"
log "installing $(basename "$REQS") into $VENV"
"$tmp/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --only-binary=:all: -r "$REQS" \
  || die "pip install failed (is the Python package index reachable?)"
"$tmp/bin/python" -c "import $MODULE" || die "the $MODULE package does not import"
echo "$want" > "$tmp/.requirements.sha256"
rm -rf "$VENV"
mv "$tmp" "$VENV"
log "ok (installed): $VENV ($(version "$VENV"))"
