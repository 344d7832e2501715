#!/usr/bin/env bash
# Installs Debian's chromium for the dashboard's browser tests (web/) when
# it is missing, so `make test` needs nothing preinstalled beyond Go, gcc,
# git and apt. $CHROMIUM names another browser binary and skips the install.
set -euo pipefail
if [[ -n "${CHROMIUM:-}" ]] || command -v chromium >/dev/null 2>&1; then
	exit 0
fi
echo "chromium: not found; installing Debian's chromium (for the dashboard's browser tests)" >&2
sudo=""
if [[ $(id -u) -ne 0 ]]; then
	sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
command -v chromium >/dev/null
