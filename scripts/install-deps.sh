#!/usr/bin/env bash
# Install the Debian 12 packages Ember's build and tests need.
#
# Idempotent and non-interactive: if every package is already installed, apt is not touched
# at all; otherwise only the missing ones are installed. Runs apt through sudo when not root.
# The CUDA toolkit is NOT installed here: the CUDA build uses /usr/local/cuda when present.
set -euo pipefail

log() { printf '[install-deps] %s\n' "$*" >&2; }
die() { printf '[install-deps] ERROR: %s\n' "$*" >&2; exit 1; }

PACKAGES=(
  # toolchain (clang is for the libFuzzer preset)
  build-essential cmake ninja-build clang
  # compiler cache: the three builds of scripts/test.sh recompile only what changed between runs
  ccache
  # formatting check (scripts/check-format.sh, run by scripts/test.sh)
  clang-format
  # engine and kernel tests (header-only: doctest here, nlohmann-json3-dev under libraries)
  doctest-dev
  # python + unzip: scripts/fetch-test-models.sh uses `pip download` and `unzip`
  python3 python3-pip unzip
  # scripts/fetch-openai-client.sh, fetch-ollama-client.sh: the openai and ollama clients for the
  # server's compatibility tests, in venvs
  python3-venv
  # Qt 6 / Qt Quick / Qt Test / Qt Charts
  qt6-base-dev qt6-declarative-dev
  qml6-module-qtquick qml6-module-qtquick-controls qml6-module-qtquick-layouts
  qml6-module-qtquick-window qml6-module-qtqml-workerscript qml6-module-qtquick-templates
  qml6-module-qttest qml6-module-qtqml qt6-charts-dev qml6-module-qtcharts
  # the model manager's "Import a model" file dialog (ui/LibraryView.qml: QtQuick.Dialogs)
  qml6-module-qtquick-dialogs
  # libraries
  libspdlog-dev libsqlite3-dev libcurl4-openssl-dev nlohmann-json3-dev libcpp-httplib-dev
  # headless GUI tests and screenshots
  xvfb xauth imagemagick
  # remote endpoints' API keys in the system keyring (app/remote, issue #41); the keyring test
  # runs its own GNOME Keyring under dbus-run-session (dbus-daemon comes with it)
  qtkeychain-qt6-dev gnome-keyring
  # scripts/package-test.sh (issue #15): lintian checks the .deb; xwininfo (x11-utils) finds
  # the installed app's window; desktop-file-validate checks the menu entry; gio
  # (libglib2.0-bin) asks shared-mime-info for a .gguf file's type
  lintian x11-utils desktop-file-utils libglib2.0-bin shared-mime-info
)

command -v dpkg-query >/dev/null 2>&1 || die "dpkg-query not found: this script supports Debian 12 (apt) only"

missing=()
for p in "${PACKAGES[@]}"; do
  if [[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)" != "installed" ]]; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  log "all ${#PACKAGES[@]} packages already installed"
else
  log "installing ${#missing[@]} missing package(s): ${missing[*]}"
  SUDO=()
  if [[ "$(id -u)" != 0 ]]; then
    command -v sudo >/dev/null 2>&1 || die "not root and sudo not found; install as root: apt-get install ${missing[*]}"
    SUDO=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -q || die "apt-get update failed"
  "${SUDO[@]}" apt-get install -y -q "${missing[@]}" || die "apt-get install failed for: ${missing[*]}"
  # Verify: apt can succeed yet leave something unconfigured.
  for p in "${missing[@]}"; do
    [[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)" == "installed" ]] \
      || die "package $p is still not installed after apt-get install"
  done
  log "done"
fi

if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  log "CUDA toolkit: /usr/local/cuda ($(/usr/local/cuda/bin/nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
else
  log "CUDA toolkit: not found at /usr/local/cuda (the CUDA backend will not be built; CPU only)"
fi
