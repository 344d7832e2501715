#!/usr/bin/env bash
# Usage: hack/debian-tool.sh COMMAND PACKAGE VAR PURPOSE
#
# Installs Debian's PACKAGE when COMMAND is missing, so that `make test`
# needs nothing preinstalled beyond Go, gcc, git and apt: chromium for the
# dashboard's browser tests, promtool (package prometheus) for the tests of
# deploy/monitoring, node and its ws module (packages nodejs and node-ws)
# for the JavaScript client's tests. A COMMAND with a slash is a file
# (such as a module's package.json) that must exist rather than a command
# on PATH. $VAR, when set, names another binary (or directory) and skips
# the install.
#
# It installs as root, or through sudo when sudo works without a password
# (sudo -n); it never waits at a password prompt. When it cannot install,
# it says what to do and fails, so `make test` stops before the tests that
# need COMMAND rather than failing them one by one.
set -euo pipefail
if [[ $# -ne 4 ]]; then
	echo "usage: $0 COMMAND PACKAGE VAR PURPOSE" >&2
	exit 2
fi
cmd="$1" pkg="$2" var="$3" purpose="$4"
present() {
	if [[ $cmd == */* ]]; then
		[[ -e $cmd ]]
	else
		command -v "$cmd" >/dev/null 2>&1
	fi
}
if [[ -n "${!var:-}" ]] || present; then
	exit 0
fi
log() { printf '%s: %s\n' "$cmd" "$*" >&2; }
other="/path/to/$cmd"
if [[ $cmd == */* ]]; then
	dir="${cmd%/*}"
	other="/path/to/another/${dir##*/}"
fi
cannot() {
	log "cannot install it: $*"
	log "install it yourself (sudo apt-get install -y --no-install-recommends $pkg), or set $var=$other, then run make test again"
	exit 1
}
if ! command -v apt-get >/dev/null 2>&1; then
	cannot "apt-get not found ($purpose use Debian's $pkg)"
fi
sudo=()
if [[ $(id -u) -ne 0 ]]; then
	if ! command -v sudo >/dev/null 2>&1; then
		cannot "not root, and sudo is not installed"
	fi
	if ! sudo -n true 2>/dev/null; then
		cannot "not root, and sudo needs a password"
	fi
	sudo=(sudo -n)
fi
log "not found; installing Debian's $pkg for $purpose..."
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo[@]}" apt-get update -qq || ! "${sudo[@]}" apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null; then
	cannot "apt-get failed (see above)"
fi
if [[ $cmd == */* ]]; then
	present || cannot "apt-get installed $pkg, but $cmd does not exist"
	log "installed $pkg"
	exit 0
fi
present || cannot "apt-get installed $pkg, but $cmd is not on PATH"
version="$("$cmd" --version 2>&1 || true)"
log "installed ${version%%$'\n'*}"
