#!/usr/bin/env bash
# Installs Debian's chromium for the dashboard's browser tests (web/) when
# it is missing, so `make test` needs nothing preinstalled beyond Go, gcc,
# git and apt. $CHROMIUM names another browser binary and skips the install.
#
# It installs as root, or through sudo when sudo works without a password
# (sudo -n); it never waits at a password prompt. When it cannot install,
# it says what to do and fails, so `make test` stops before the browser
# tests rather than failing them one by one.
set -euo pipefail
if [[ -n "${CHROMIUM:-}" ]] || command -v chromium >/dev/null 2>&1; then
	exit 0
fi
log() { printf 'chromium: %s\n' "$*" >&2; }
cannot() {
	log "cannot install it: $*"
	log "install it yourself (sudo apt-get install -y chromium), or set CHROMIUM=/path/to/a/chromium, then run make test again"
	exit 1
}
if ! command -v apt-get >/dev/null 2>&1; then
	cannot "apt-get not found (kubegate's browser tests use Debian's chromium)"
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
log "not found; installing Debian's chromium for the dashboard's browser tests (about 2 min)..."
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo[@]}" apt-get update -qq || ! "${sudo[@]}" apt-get install -y -qq --no-install-recommends chromium >/dev/null; then
	cannot "apt-get failed (see above)"
fi
command -v chromium >/dev/null || cannot "apt-get installed chromium, but it is not on PATH"
log "installed $(chromium --version 2>/dev/null || echo chromium)"
