#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kubectl and helm from the Go module proxy into the
# assets directory (default ${XDG_CACHE_HOME:-$HOME/.cache}/kubegate/k8s-<version>,
# or $KUBEGATE_ASSETS) and prints that directory on the last line of stdout.
# Binaries already there are kept, so later runs return at once.
#
# The tool modules under tools/ exist because k8s.io/kubernetes and
# go.etcd.io/etcd/server/v3 carry replace directives that `go install`
# refuses; each tool module pins those modules to published versions.
# helm.sh/helm/v4 has no replace directives, so it is built with a plain
# `go install module@version` and needs no tool module.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
k8s_version="v1.37.2"
helm_version="v4.3.1"
assets="${KUBEGATE_ASSETS:-${XDG_CACHE_HOME:-$HOME/.cache}/kubegate/k8s-${k8s_version}}"
mkdir -p "$assets"

log() { printf 'controlplane: %s\n' "$*" >&2; }

# The version kube-apiserver and kubectl report (a module build has no git
# metadata, so it is stamped the way Kubernetes' own release build does).
k8s_minor="${k8s_version#v1.}"; k8s_minor="${k8s_minor%%.*}"
k8s_ldflags=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	k8s_ldflags+=" -X $p.gitVersion=$k8s_version -X $p.gitMajor=1 -X $p.gitMinor=$k8s_minor -X $p.gitTreeState=clean"
done

# build <module dir | -> <package[@version]> <binary> <expected minutes> [extra ldflags]
# A module dir names a tool module under tools/ to build the package in; "-"
# installs package@version on its own (for modules without replace directives).
build() {
	local dir="$1" pkg="$2" bin="$3" minutes="$4" extra="${5:-}"
	if [[ -x "$assets/$bin" ]]; then
		log "$bin: cached in $assets"
		return
	fi
	log "$bin: building $pkg from the Go module proxy (first time takes about $minutes min)..."
	local start=$SECONDS tmp="$assets/.$bin.tmp.$$"
	mkdir -p "$tmp"
	# A heartbeat so a long build never looks hung.
	( while sleep 30; do log "$bin: still building ($((SECONDS - start))s)"; done ) &
	local beat=$!
	local rc=0
	if [[ "$dir" == "-" ]]; then
		(cd "$tmp" && CGO_ENABLED=0 GOBIN="$tmp" go install -trimpath -ldflags="-s -w$extra" "$pkg") || rc=$?
	else
		(cd "$here/tools/$dir" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w$extra" -o "$tmp/$bin" "$pkg") || rc=$?
	fi
	kill "$beat" 2>/dev/null || true
	wait "$beat" 2>/dev/null || true
	if [[ $rc -ne 0 ]]; then
		rm -rf "$tmp"
		log "$bin: build FAILED (exit $rc). Check network access to the Go module proxy (GOPROXY=$(go env GOPROXY)) and free disk space in $(go env GOCACHE), then re-run."
		exit "$rc"
	fi
	mv -f "$tmp/$bin" "$assets/$bin"
	rm -rf "$tmp"
	log "$bin: built in $((SECONDS - start))s"
}

build etcd go.etcd.io/etcd/server/v3 etcd 2
build k8s k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver 8 "$k8s_ldflags"
build k8s k8s.io/kubernetes/cmd/kubectl kubectl 3 "$k8s_ldflags"
# helm reports the version it was stamped with (its release build does the same).
build - "helm.sh/helm/v4/cmd/helm@$helm_version" helm 2 " -X helm.sh/helm/v4/internal/version.version=$helm_version -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
echo "$assets"
