#!/usr/bin/env bash
# A Python environment with llama-cpp-python (llama.cpp, CPU) for reference outputs and
# side-by-side benchmarks. Test/benchmark tooling only: never part of the product.
#
#   scripts/llama-cpp-env.sh          # prints the venv's python path on stdout (last line)
#   "$(scripts/llama-cpp-env.sh | tail -1)" tests/reference/make_reference.py
#
# The wheel is built from source once (several minutes on 2 cores) and cached in
# ${EMBER_WHEELS_DIR:-~/.cache/ember/wheels}, together with its dependencies, so later runs
# and other sessions install offline in seconds. The venv lives in
# ${EMBER_LLAMA_VENV:-~/.cache/ember/venv-llama-cpp}.
# Note: the wheel is built with -DGGML_NATIVE=ON, i.e. for this machine's CPU; a wheel built
# on another CPU may not run here (delete it to rebuild).
set -euo pipefail

VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
WHEELS="${EMBER_WHEELS_DIR:-$HOME/.cache/ember/wheels}"
VENV="${EMBER_LLAMA_VENV:-$HOME/.cache/ember/venv-llama-cpp}"
PYTHON="${PYTHON:-python3}"

log() { printf '[llama-cpp-env] %s\n' "$*" >&2; }
die() { printf '[llama-cpp-env] ERROR: %s\n' "$*" >&2; exit 1; }

mkdir -p "$WHEELS"
if ! compgen -G "$WHEELS/llama_cpp_python-$VERSION-*.whl" >/dev/null; then
  log "building llama-cpp-python==$VERSION from source (CPU, GGML_NATIVE=ON; takes minutes)"
  t0=$SECONDS
  CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=ON}" CMAKE_BUILD_PARALLEL_LEVEL="${EMBER_JOBS:-2}" \
    "$PYTHON" -m pip wheel --no-cache-dir -w "$WHEELS" "llama-cpp-python==$VERSION" >&2 \
    || die "building the llama-cpp-python wheel failed"
  log "built in $((SECONDS - t0))s"
fi

if ! "$VENV/bin/python" -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$VERSION')" 2>/dev/null; then
  log "creating $VENV"
  "$PYTHON" -m venv "$VENV" || die "python3 -m venv failed"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-index \
      --find-links "$WHEELS" "llama-cpp-python==$VERSION" >&2 \
    || die "installing llama-cpp-python==$VERSION from $WHEELS failed"
fi
"$VENV/bin/python" -c "import llama_cpp; print('llama-cpp-python', llama_cpp.__version__)" >&2 \
  || die "llama_cpp does not import in $VENV"
printf '%s\n' "$VENV/bin/python"
