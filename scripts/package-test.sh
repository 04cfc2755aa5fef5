#!/usr/bin/env bash
# The packages, checked the way a user meets them (issue #15). From a built tree (default
# build/ci; CI runs this after its build):
#   1. cpack: the .deb and the portable .tar.gz
#   2. the .deb's contents, its Depends against the QML modules ui/*.qml imports, the licence
#      notices (resources/licenses/notices.txt) against what the binaries link, lintian
#   3. the .tar.gz unpacked into a temporary folder: ember --version, ember info, and the CUDA
#      module looked for inside that folder
#   4. apt-get install ./ember_*.deb: ember --version, ember info on stories260K, the GGUF
#      file type, the app-menu entry's command started on a virtual display (window title,
#      stays up), a second launch handing over a model file, then apt-get purge and no
#      installed file left behind
# Needs root or password-less sudo (it installs and purges the package; the machine is left
# as it was) and the
# tools of scripts/install-deps.sh. Every failure is loud and stops the run.
#
#   scripts/package-test.sh [BUILD_DIR]
set -euo pipefail
EMBER_SCRIPT="package-test"
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# ---- helpers ------------------------------------------------------------------------------
# wait_for SECONDS COMMAND...: polls COMMAND (every 0.2 s) until it succeeds; false on timeout.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

has_line() { grep -qF -- "$2" "$1"; }

# expect_module_from PATH EMBER: `EMBER info --devices` dlopen()s the CUDA module from PATH
# (glibc's loader trace names every file it opens).
expect_module_from() {
  local loaded
  loaded="$(cd / && LD_DEBUG=files "$2" info --devices 2>&1 >/dev/null \
    | sed -n 's/.*file=\([^ ]*libember_cuda\.so\) .*/\1/p' | head -1)"
  [[ -n "$loaded" && "$(realpath "$loaded")" == "$1" ]] \
    || ember_die "$2 did not load the CUDA module from $1: ${loaded:-not loaded}"
}

# ---- inside the virtual display (re-entered by step 4 through xvfb-run) ---------------------
# desktop_session EXEC MODEL LOG: starts EXEC (the .desktop entry's command, %F = MODEL),
# waits for its window, checks that it stays up, hands a second launch's file over, quits it.
desktop_session() {
  local exec_line="$1" model="$2" log="$3"
  local cmd=${exec_line//%F/$model}
  # shellcheck disable=SC2086 # the Exec line is a command line: split it as a launcher does
  $cmd >"$log" 2>&1 &
  local pid=$!
  # The main window: title "<chat> — Ember", WM_CLASS ("ember-app" "ember") (StartupWMClass).
  local window_re='"([^"]* — )?Ember": \("ember-app" "ember"\)'
  window_up() { xwininfo -root -tree 2>/dev/null | grep -Eq "$window_re"; }
  up_or_gone() { window_up || ! kill -0 "$pid" 2>/dev/null; }
  if ! { wait_for 60 up_or_gone && window_up; }; then
    cat "$log"
    xwininfo -root -tree
    ember_die "no window titled Ember (class ember-app) appeared"
  fi
  ember_log "window up: $(xwininfo -root -tree | grep -E "$window_re" | head -1 | sed 's/^ *//')"
  # "Stays up": still running, window still mapped, over three seconds of polling.
  local until=$((SECONDS + 3))
  while ((SECONDS < until)); do
    kill -0 "$pid" 2>/dev/null || { cat "$log"; ember_die "ember-app exited right after start"; }
    window_up || ember_die "the Ember window went away"
    sleep 0.2
  done
  wait_for 60 has_line "$log" "Opening the model file $model" || { cat "$log"; ember_die "the app did not open $model"; }
  # A second launch with a relative path, from the model's folder: handed over, absolute.
  local second
  second=$(cd "$(dirname "$model")" && ember-app "$(basename "$model")" 2>&1) \
    || ember_die "the second launch failed: $second"
  [[ "$second" == *"already running"* ]] || ember_die "the second launch did not hand over: $second"
  wait_for 30 has_line "$log" "A second launch handed over its command line: --model $model" \
    || { cat "$log"; ember_die "the running app did not receive the second launch's file"; }
  kill -0 "$pid" 2>/dev/null || ember_die "ember-app exited after the second launch"
  kill -TERM "$pid"
  wait "$pid" || true
}
if [[ "${1:-}" == --desktop-session ]]; then
  desktop_session "$2" "$3" "$4"
  exit 0
fi

# ---- setup --------------------------------------------------------------------------------
cd "$EMBER_ROOT"
BUILD="$(realpath "${1:-build/ci}")"
MODEL="$(realpath "${EMBER_TESTDATA_DIR:-$EMBER_ROOT/../shared/testdata}")/models/stories260K.gguf"
[[ -f "$BUILD/CPackConfig.cmake" ]] || ember_die "$BUILD/CPackConfig.cmake not found: configure and build first (cmake --preset ci)"
[[ -f "$MODEL" ]] || ember_die "test model $MODEL not found (shared test data)"
# apt-get as root: directly, or through sudo without a password prompt (like install-deps.sh).
SUDO=()
if [[ "$(id -u)" != 0 ]]; then
  sudo -n true 2>/dev/null || ember_die "needs root (or sudo without a password): it installs the .deb with apt-get and purges it afterwards"
  SUDO=(sudo -n)
fi
for tool in cpack dpkg-deb lintian xvfb-run xwininfo readelf gio desktop-file-validate apt-get; do
  command -v "$tool" >/dev/null || ember_die "$tool not found (scripts/install-deps.sh installs it)"
done
if dpkg-query -W -f='${db:Status-Status}' ember 2>/dev/null | grep -q installed; then
  ember_die "a package named ember is already installed; this test would replace and purge it"
fi
WORK="$(mktemp -d /tmp/ember-package-test.XXXXXX)"
cleanup() {
  if dpkg-query -W -f='${db:Status-Status}' ember 2>/dev/null | grep -q installed; then
    ember_log "purging ember (restoring the machine)"
    "${SUDO[@]}" apt-get purge -y -q ember >/dev/null 2>&1 || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
with_cuda=0
grep -q '^EMBER_BUILD_CUDA:BOOL=ON' "$BUILD/CMakeCache.txt" && with_cuda=1
version="$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$BUILD/CMakeCache.txt")"

# ---- 1. packages --------------------------------------------------------------------------
ember_step "cpack"
rm -rf "$BUILD/packages"
cpack --config "$BUILD/CPackConfig.cmake" -B "$BUILD/packages" >"$WORK/cpack.log" 2>&1 \
  || { cat "$WORK/cpack.log"; ember_die "cpack failed"; }
DEB="$(ls "$BUILD"/packages/ember_*.deb)"
TGZ="$(ls "$BUILD"/packages/ember-*-linux-x86_64.tar.gz)"
ember_log "$(basename "$DEB") ($(du -h "$DEB" | cut -f1)), $(basename "$TGZ") ($(du -h "$TGZ" | cut -f1))"

# ---- 2. the .deb's contents, dependencies, licences, lintian --------------------------------
ember_step "deb: contents"
dpkg-deb -x "$DEB" "$WORK/deb"
expected=(usr/bin/ember usr/bin/ember-app usr/share/applications/ember.desktop
  usr/share/icons/hicolor/scalable/apps/ember.svg usr/share/mime/packages/ember.xml
  usr/share/metainfo/ember.metainfo.xml usr/share/doc/ember/copyright usr/share/doc/ember/changelog.gz
  usr/share/doc/ember/licenses/notices.txt)
for size in 16 22 24 32 48 64 128 256 512; do expected+=("usr/share/icons/hicolor/${size}x${size}/apps/ember.png"); done
((with_cuda)) && expected+=(usr/lib/ember/libember_cuda.so)
for f in "${expected[@]}"; do [[ -f "$WORK/deb/$f" ]] || ember_die "the .deb lacks /$f"; done
desktop-file-validate "$WORK/deb/usr/share/applications/ember.desktop" || ember_die "ember.desktop is not valid"

ember_step "deb: Depends"
depends="$(dpkg-deb -f "$DEB" Depends)"
ember_log "Depends: $depends"
[[ "$depends" == *libqt6core6* && "$depends" == *libspdlog* ]] \
  || ember_die "Depends lacks the libraries dpkg-shlibdeps should have found: $depends"
# Every QML module the UI imports (plus the Fusion style main.cpp sets) must come from a
# package the .deb depends on: Qt finds them at run time, dpkg-shlibdeps cannot see them.
qmldir_root="$(qtpaths6 --query QT_INSTALL_QML 2>/dev/null || echo /usr/lib/x86_64-linux-gnu/qt6/qml)"
mapfile -t modules < <({ sed -n 's/^import \(Qt[A-Za-z.]*\).*/\1/p' ui/*.qml; echo QtQuick.Controls.Fusion; } | sort -u)
for m in "${modules[@]}"; do
  qmldir="$qmldir_root/${m//.//}/qmldir"
  pkg="$(dpkg-query -S "$qmldir" 2>/dev/null | cut -d: -f1)" || true
  [[ -n "$pkg" ]] || ember_die "QML module $m ($qmldir) is not from any installed package"
  [[ ", $depends," == *", $pkg"[\ ,]* ]] || ember_die "ui/ imports $m (package $pkg), which Depends does not list"
done
ember_log "QML imports covered: ${modules[*]}"

ember_step "deb: licence notices"
# The sonames column of notices.txt against what the binaries really link (NEEDED).
# ("-": compiled in, or loaded by a QML plugin, so no NEEDED entry names it.)
mapfile -t patterns < <(awk -F' [|] ' '!/^#/ && NF == 5 && $4 != "-" { print $4 }' resources/licenses/notices.txt)
needed="$(find "$WORK/deb" -type f \( -perm -u+x -o -name '*.so' \) -exec readelf -d {} + 2>/dev/null \
  | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u)"
while read -r lib; do
  hit=0
  for p in "${patterns[@]}"; do [[ "$lib" =~ $p ]] && hit=1; done
  ((hit)) || ember_die "the binaries link $lib, which no line of resources/licenses/notices.txt covers (add its notice)"
done <<<"$needed"
for p in "${patterns[@]}"; do
  grep -Eq -- "$p" <<<"$needed" || ember_die "notices.txt lists '$p', which no installed binary links (remove the line)"
done
ember_log "linked: $(tr '\n' ' ' <<<"$needed")"

ember_step "deb: lintian"
lintian --fail-on error --tag-display-limit 0 "$DEB" | tee "$WORK/lintian.txt" || ember_die "lintian found errors (above)"
ember_log "lintian: no errors, $(grep -c '^W:' "$WORK/lintian.txt" || true) warning(s) (installer/README.md says why)"

# ---- 3. the portable archive, from a folder of its own --------------------------------------
ember_step "tar.gz: run from a temporary folder"
mkdir "$WORK/portable"
tar -xzf "$TGZ" -C "$WORK/portable"
top="$WORK/portable/ember-$version-linux-x86_64"
[[ -x "$top/bin/ember" ]] || ember_die "the archive has no ember-$version-linux-x86_64/bin/ember"
out="$(cd / && "$top/bin/ember" --version)"
[[ "$out" == "ember $version (commit "* ]] || ember_die "archive: ember --version printed '$out'"
info="$(cd / && "$top/bin/ember" info "$MODEL")" || ember_die "archive: ember info failed: $info"
[[ "$info" == *"architecture:    llama"* ]] || ember_die "archive: ember info does not describe the llama model: $info"
# The CUDA module must be the archive's own copy (found relative to bin/, not the build tree).
((with_cuda)) && expect_module_from "$top/lib/ember/libember_cuda.so" "$top/bin/ember"
ember_log "archive: $out"

# ---- 4. install, use, purge ---------------------------------------------------------------
ember_step "deb: apt-get install"
"${SUDO[@]}" apt-get install -y -q "$DEB" >"$WORK/apt.log" 2>&1 || { cat "$WORK/apt.log"; ember_die "apt-get install failed"; }
dpkg-query -L ember | sort >"$WORK/files.txt"
out="$(ember --version)"
[[ "$(command -v ember)" == /usr/bin/ember && "$out" == "ember $version (commit "* ]] \
  || ember_die "installed ember --version printed '$out'"
info="$(ember info "$MODEL")" || ember_die "installed ember info failed: $info"
[[ "$info" == *"architecture:    llama"* ]] || ember_die "installed ember info does not describe the llama model: $info"
((with_cuda)) && expect_module_from /usr/lib/ember/libember_cuda.so /usr/bin/ember
# The GGUF type: by name, and by the "GGUF" magic for a file that is not named .gguf.
cp "$MODEL" "$WORK/renamed-model.bin"
for f in "$MODEL" "$WORK/renamed-model.bin"; do
  type="$(gio info -a standard::content-type "$f" | sed -n 's/.*standard::content-type: //p')"
  [[ "$type" == application/x-gguf ]] || ember_die "$f has MIME type '$type', not application/x-gguf"
done

ember_step "deb: desktop app on a virtual display"
exec_line="$(sed -n 's/^Exec=//p' /usr/share/applications/ember.desktop)"
home="$WORK/home"
mkdir -p "$home"
# A user of its own: data, settings and logs in $home, not the machine's.
env -i PATH=/usr/bin:/bin HOME="$home" XDG_RUNTIME_DIR="$home/run" EMBER_DATA_DIR="$home/data" \
  XDG_CONFIG_HOME="$home/config" XDG_STATE_HOME="$home/state" LANG=C.UTF-8 \
  xvfb-run -a -s "-screen 0 1280x1024x24" bash "$EMBER_ROOT/scripts/package-test.sh" --desktop-session \
  "$exec_line" "$MODEL" "$WORK/app.log" || ember_die "the desktop session failed (above)"
ember_log "window titled Ember stayed up; the second launch handed over $MODEL"

ember_step "deb: apt-get purge"
"${SUDO[@]}" apt-get purge -y -q ember >"$WORK/apt.log" 2>&1 || { cat "$WORK/apt.log"; ember_die "apt-get purge failed"; }
left=()
while read -r path; do
  [[ -e "$path" ]] || continue
  # A folder may stay if another package owns it too (/usr/bin, the icon theme's folders).
  if [[ -d "$path" ]] && dpkg-query -S "$path" >/dev/null 2>&1; then continue; fi
  left+=("$path")
done <"$WORK/files.txt"
[[ -e /usr/share/mime/application/x-gguf.xml ]] && left+=(/usr/share/mime/application/x-gguf.xml)
((${#left[@]} == 0)) || ember_die "left behind after apt-get purge: ${left[*]}"
ember_log "purged: none of the $(wc -l <"$WORK/files.txt") installed paths is left"
ember_times
