#!/usr/bin/env bash
# Installs promtool (Debian's prometheus package) for the tests of the
# alerting rules in deploy/monitoring when it is missing, so `make test` needs nothing preinstalled beyond Go, gcc,
# git and apt. $PROMTOOL names another promtool binary and skips the install.
#
# It installs as root, or through sudo when sudo works without a password
# (sudo -n); it never waits at a password prompt. When it cannot install,
# it says what to do and fails, so `make test` stops before the rule
# tests rather than failing them.
set -euo pipefail
if [[ -n "${PROMTOOL:-}" ]] || command -v promtool >/dev/null 2>&1; then
	exit 0
fi
log() { printf 'promtool: %s\n' "$*" >&2; }
cannot() {
	log "cannot install it: $*"
	log "install it yourself (sudo apt-get install -y --no-install-recommends prometheus), or set PROMTOOL=/path/to/promtool, then run make test again"
	exit 1
}
if ! command -v apt-get >/dev/null 2>&1; then
	cannot "apt-get not found (kubegate's rule tests use promtool from Debian's prometheus package)"
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
log "not found; installing Debian's prometheus package for promtool..."
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo[@]}" apt-get update -qq || ! "${sudo[@]}" apt-get install -y -qq --no-install-recommends prometheus >/dev/null; then
	cannot "apt-get failed (see above)"
fi
command -v promtool >/dev/null || cannot "apt-get installed prometheus, but promtool is not on PATH"
log "installed $(promtool --version 2>&1 | head -1)"
