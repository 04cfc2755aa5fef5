#!/bin/sh
# Runs a test (its arguments) with a GNOME Keyring of its own: run it under `dbus-run-session`,
# which gives it a private D-Bus session; this script starts gnome-keyring-daemon's Secret
# Service on that bus with a new "login" keyring in a throw-away folder, unlocked with a test
# password. That is what QtKeychain (app/remote/key_store.h) talks to on a Linux desktop; the
# user's own keyring is never touched. The daemon ends with the session bus.
set -eu
[ -n "${DBUS_SESSION_BUS_ADDRESS:-}" ] || { echo "keyring-session.sh: run me under dbus-run-session" >&2; exit 2; }
command -v gnome-keyring-daemon >/dev/null || { echo "keyring-session.sh: gnome-keyring-daemon is missing (scripts/install-deps.sh installs gnome-keyring)" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -m 700 "$dir/run"
export XDG_DATA_HOME="$dir/data" XDG_RUNTIME_DIR="$dir/run"
printf 'ember-test-keyring' | gnome-keyring-daemon --daemonize --unlock --components=secrets >/dev/null
status=0
"$@" || status=$?
exit "$status"
