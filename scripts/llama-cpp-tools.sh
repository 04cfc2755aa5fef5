#!/usr/bin/env bash
# Build llama.cpp's command-line tools (the peer of `ember quantize` / `ember perplexity`) from
# the llama.cpp tree vendored in the llama-cpp-python source package on the package index.
# Test/benchmark tooling only: never part of the product.
#
#   scripts/llama-cpp-tools.sh                       # prints the bin directory (last line)
#   scripts/llama-cpp-tools.sh llama-perplexity      # only these targets (CI: the peer test)
#   scripts/llama-cpp-tools.sh llama-server          # the serving peer (scripts/bench-serve.sh)
#   BIN="$(scripts/llama-cpp-tools.sh llama-quantize llama-perplexity | tail -1)"
#   scripts/llama-cpp-tools.sh --src                 # builds nothing: prints the vendored
#                                                    # llama.cpp tree (its models/templates and
#                                                    # models/ggml-vocab-* test vectors)
#
# Why from llama-cpp-python's sdist: no git host is reachable from our machines, only the
# package index; `pip download --no-binary :all:` fetches the sdist (a tarball) without building
# it, and its vendor/llama.cpp is a complete llama.cpp tree.
#
# Kept small for CI: only the requested targets, static libraries, no tests/examples, no
# OpenSSL/curl, no OpenMP, and GGML_NATIVE=OFF with the x86-64-v3 instructions named
# explicitly (AVX2/FMA/F16C/BMI2, no AVX-512/AMX), so a cached build runs on any CPU of that
# level, not only the one that built it (a native build died with SIGILL on another host).
# The server target is configured without its web UI (no npm, no prebuilt-asset download:
# only the HTTP API is needed). The build is cached in ${EMBER_LLAMA_TOOLS_DIR:-~/.cache/ember/llama-tools}
# keyed by version; a second run with the same targets does nothing but check they exist.
#
# EMBER_LLAMA_NATIVE=1 builds for this machine's CPU instead (GGML_NATIVE=ON: AVX-512 where
# there is one), into its own cache directory: benchmarks against Ember, which picks its
# kernels at run time, compare with the peer's best build for the host, not the portable one.
#
# EMBER_LLAMA_CUDA=1 builds llama.cpp's CUDA backend for sm_90 (H100/H200; the CUDA toolkit
# in /usr/local/cuda, no GPU needed to build) into its own cache directory, for the peer on a
# lent GPU (scripts/gpu-stage.sh stages its llama-bench; scripts/gpu-run.sh runs it beside
# `ember bench`). EMBER_LLAMA_CUDA_ARCHS overrides the architectures (default 90). The
# binaries need the toolkit's libcudart/libcublas at run time (found through their RUNPATH,
# or LD_LIBRARY_PATH=/usr/local/cuda/lib64).
set -euo pipefail

VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
CACHE="${EMBER_LLAMA_TOOLS_DIR:-$HOME/.cache/ember/llama-tools}"
JOBS="${EMBER_JOBS:-2}"
PYTHON="${PYTHON:-python3}"
SRC_ONLY=0
[[ "${1:-}" == --src ]] && { SRC_ONLY=1; shift; }
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=(llama-quantize llama-perplexity)

log() { printf '[llama-cpp-tools] %s\n' "$*" >&2; }
die() { printf '[llama-cpp-tools] ERROR: %s\n' "$*" >&2; exit 1; }

SRC_ROOT="$CACHE/src-$VERSION"
NATIVE="${EMBER_LLAMA_NATIVE:-0}"
BUILD="$CACHE/build-$VERSION"
# keyed by the CPU's flags: a cached native build must never run on a CPU that lacks some of them
[[ "$NATIVE" == 1 ]] && BUILD="$CACHE/build-$VERSION-native-$(grep -m1 '^flags' /proc/cpuinfo | md5sum | cut -c1-12)"
CUDA="${EMBER_LLAMA_CUDA:-0}"
CUDA_ARCHS="${EMBER_LLAMA_CUDA_ARCHS:-90}"
[[ "$CUDA" == 1 ]] && BUILD="$CACHE/build-$VERSION-cuda-sm${CUDA_ARCHS//;/-}"
BIN="$BUILD/bin"

tree="$SRC_ROOT/llama_cpp_python-$VERSION/vendor/llama.cpp"
missing=()
for t in "${TARGETS[@]}"; do [[ -x "$BIN/$t" ]] || missing+=("$t"); done
if [[ "$SRC_ONLY" == 1 && -f "$tree/CMakeLists.txt" ]]; then
  printf '%s\n' "$tree"
  exit 0
fi
if [[ "$SRC_ONLY" == 0 && ${#missing[@]} -eq 0 ]]; then
  printf '%s\n' "$BIN"
  exit 0
fi

mkdir -p "$CACHE"
# One unpack at a time per cache, one build at a time per build folder (ctest and a bench may
# both ask; the CUDA build's hour must not hold up a CPU target).
exec 9>"$CACHE/.lock"
flock 9

if [[ ! -f "$tree/CMakeLists.txt" ]]; then
  sdist="$CACHE/llama_cpp_python-$VERSION.tar.gz"
  if [[ ! -f "$sdist" ]]; then
    log "fetching the llama-cpp-python==$VERSION source package from the package index"
    tmp="$(mktemp -d "$CACHE/dl.XXXXXX")"
    "$PYTHON" -m pip download --quiet --no-deps --no-binary :all: --no-build-isolation \
      -d "$tmp" "llama-cpp-python==$VERSION" >&2 ||
      "$PYTHON" -m pip download --quiet --no-deps --no-binary :all: -d "$tmp" \
        "llama-cpp-python==$VERSION" >&2 || die "pip download llama-cpp-python==$VERSION failed"
    mv "$tmp/llama_cpp_python-$VERSION.tar.gz" "$sdist" || die "no sdist in $tmp"
    rm -rf "$tmp"
  fi
  log "unpacking $sdist"
  rm -rf "$SRC_ROOT" && mkdir -p "$SRC_ROOT"
  tar -xzf "$sdist" -C "$SRC_ROOT" || die "unpacking $sdist failed"
  [[ -f "$tree/CMakeLists.txt" ]] || die "$sdist has no vendor/llama.cpp"
fi
if [[ "$SRC_ONLY" == 1 ]]; then
  printf '%s\n' "$tree"
  exit 0
fi
exec 8>"$BUILD.lock"
flock 8
flock -u 9

ISA_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON)
# Native, but no AMX: ggml's AMX matmul died with SIGSEGV on our Sapphire Rapids VMs (the guest
# does not grant the tile state), and Ember has no AMX kernels to compare with. GCC keeps explicit
# -mno-* flags over what -march=native implies, whatever their order.
no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
[[ "$NATIVE" == 1 ]] && ISA_FLAGS=(-DGGML_NATIVE=ON "-DCMAKE_C_FLAGS=$no_amx" "-DCMAKE_CXX_FLAGS=$no_amx")
CUDA_FLAGS=()
if [[ "$CUDA" == 1 ]]; then
  nvcc="${CUDACXX:-/usr/local/cuda/bin/nvcc}"
  [[ -x "$nvcc" ]] || die "EMBER_LLAMA_CUDA=1 needs the CUDA toolkit ($nvcc not found)"
  CUDA_FLAGS=(-DGGML_CUDA=ON "-DCMAKE_CUDA_COMPILER=$nvcc" "-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCHS"
    -DCMAKE_CUDA_COMPILER_LAUNCHER=)
fi
t0=$SECONDS
log "building ${missing[*]} (-j$JOBS; the first build takes minutes)"
cmake -S "$tree" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_OPENMP=OFF \
  "${ISA_FLAGS[@]}" ${CUDA_FLAGS[@]+"${CUDA_FLAGS[@]}"} \
  -DCMAKE_C_COMPILER_LAUNCHER= -DCMAKE_CXX_COMPILER_LAUNCHER= >&2 ||
  die "configuring llama.cpp failed (see above)"
cmake --build "$BUILD" --parallel "$JOBS" --target "${missing[@]}" >&2 ||
  die "building ${missing[*]} failed (see above)"
for t in "${missing[@]}"; do [[ -x "$BIN/$t" ]] || die "$BIN/$t was not built"; done
log "built ${missing[*]} in $((SECONDS - t0))s"
printf '%s\n' "$BIN"
