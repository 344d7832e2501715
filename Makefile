# kubegate developer targets. `make help` lists them.
#
# Two commands do all the setup on a fresh machine:
#   make run    local control plane + demo workload + gateway (+ dashboard URL)
#   make test   every test, including integration tests against a real kube-apiserver

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO      ?= go
LISTEN  ?= 127.0.0.1:8080
# Extra flags for the gateway in `make run`, e.g. GATEWAY_FLAGS="--log-level=debug".
GATEWAY_FLAGS ?=
# Extra flags for go test, e.g. TESTFLAGS="-run TestWatch -v".
TESTFLAGS ?=
# Where the etcd, kube-apiserver and kubectl binaries are cached (outside the tree).
KUBEGATE_ASSETS ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kubegate/k8s-v1.37.2
export KUBEGATE_ASSETS

.PHONY: help
help: ## Show this help
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z_-]+:.*## /{printf "  \033[1m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: bins
bins: ## Build etcd, kube-apiserver, kubectl and helm from the Go module proxy (cached; first time ~12 min)
	@hack/controlplane/build.sh >/dev/null

.PHONY: build
build: ## Build the gateway into bin/
	$(GO) build -trimpath -o bin/gateway ./cmd/gateway

.PHONY: cluster
cluster: bins ## Start a local etcd + kube-apiserver (detached) and write .local/kubeconfig
	$(GO) run ./hack/devcluster up

.PHONY: cluster-down
cluster-down: ## Stop the local control plane and remove its data
	$(GO) run ./hack/devcluster down

.PHONY: run
run: bins build ## Control plane + demo workload + gateway; prints the URLs; Ctrl-C stops all
	$(GO) build -o bin/devcluster ./hack/devcluster
	bin/devcluster -listen $(LISTEN) -gateway bin/gateway run -- $(GATEWAY_FLAGS)

.PHONY: chromium
chromium: ## Install Debian's chromium for the dashboard's browser tests, if missing
	@hack/debian-tool.sh chromium chromium CHROMIUM "the dashboard's browser tests"

.PHONY: promtool
promtool: ## Install Debian's prometheus package for promtool (tests of deploy/monitoring), if missing
	@hack/debian-tool.sh promtool prometheus PROMTOOL "the tests of deploy/monitoring"

.PHONY: node
node: ## Install Debian's nodejs and node-ws for the JavaScript client's tests (clients/js), if missing
	@hack/debian-tool.sh node nodejs NODE "the JavaScript client's tests"
	@hack/debian-tool.sh /usr/share/nodejs/ws/package.json node-ws NODE_WS "the JavaScript client's tests"

.PHONY: test
test: bins chromium promtool node ## Run every test with the race detector (integration tests start real control planes)
	$(GO) test -race -count=1 -timeout 30m $(TESTFLAGS) ./...

# Time per fuzz target in `make fuzz`.
FUZZTIME ?= 10s

.PHONY: fuzz
fuzz: ## Run every go test -fuzz target for FUZZTIME (default 10s) each
	FUZZTIME=$(FUZZTIME) GO=$(GO) hack/fuzz.sh

.PHONY: test-short
test-short: ## Unit tests only: no etcd or kube-apiserver starts (integration tests skip)
	$(GO) test -race -short $(TESTFLAGS) ./...

.PHONY: vet
vet: ## go vet (for Linux, macOS and Windows) and a gofmt check
	$(GO) vet ./...
	GOOS=darwin $(GO) vet ./...
	GOOS=windows $(GO) vet ./...
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: fmt
fmt: ## gofmt every Go file
	gofmt -w $$(git ls-files '*.go')

IMAGE ?= kubegate:dev
DOCKER ?= docker

.PHONY: image
image: ## Build the container image $(IMAGE) (needs Docker)
	@if ! command -v $(DOCKER) >/dev/null 2>&1; then \
		echo "make image: '$(DOCKER)' not found; install Docker (or set DOCKER=podman) to build the image $(IMAGE)" >&2; exit 1; fi
	@if ! $(DOCKER) info >/dev/null 2>&1; then \
		echo "make image: '$(DOCKER)' is installed but no engine answers ('$(DOCKER) info' fails); start the Docker daemon to build $(IMAGE)" >&2; exit 1; fi
	$(DOCKER) build -t $(IMAGE) .

.PHONY: manifests-check
manifests-check: bins ## Render deploy/ and apply it to a test apiserver (server-side dry-run)
	$(GO) test -race -count=1 $(TESTFLAGS) ./deploy/

.PHONY: clean
clean: ## Remove build output (not the cached control-plane binaries)
	rm -rf bin

# Load duration for `make soak`; RACE=1 runs the driver and the gateway
# with the race detector (slower, and the gateway's memory figures then
# include the detector's).
DURATION ?= 30m
RACE ?=

.PHONY: soak
soak: bins ## Mixed-load soak for DURATION (default 30m): report in .local/soak/, fails on growth or lost state
	SOAK_DURATION=$(DURATION) SOAK_RACE=$(RACE) $(GO) test $(if $(RACE),-race) -count=1 -timeout 0 -run '^TestSoak$$' -v $(TESTFLAGS) ./internal/soak/

# Micro-benchmark repetitions and time per benchmark for `make bench-micro`.
BENCHCOUNT ?= 6
BENCHTIME  ?= 300ms
# Flags for the load tool in `make bench`, e.g. BENCHFLAGS="-scenarios=broad -broad=2000" or "-full".
BENCHFLAGS ?=
# Where `make bench` and `make bench-micro` write their results (gitignored).
BENCHDIR ?= .local/bench

.PHONY: bench
bench: bins build ## Load tool, default scenarios: gateway vs kube-apiserver, table + $(BENCHDIR)/load.json (not part of make test)
	mkdir -p $(BENCHDIR)
	$(GO) run ./cmd/kubegate-bench -gateway bin/gateway -json $(BENCHDIR)/load.json $(BENCHFLAGS) | tee $(BENCHDIR)/load.txt

.PHONY: bench-report
bench-report: ## Regenerate docs/benchmarks.md's goals and docs/benchmarks-figures.md's tables from $(BENCHDIR)/load.json (a make bench run)
	$(GO) run ./cmd/kubegate-bench -report $(BENCHDIR)/load.json -doc docs/benchmarks.md -figures docs/benchmarks-figures.md

.PHONY: bench-micro
bench-micro: ## Go micro-benchmarks of the hot paths, BENCHCOUNT runs each, into $(BENCHDIR)/micro.txt (compare with benchstat)
	mkdir -p $(BENCHDIR)
	{ $(GO) test -run '^$$' -p 1 -bench 'Fanout|Pop|List|Decode|AppendEvent|UpstreamUpdate|PassThroughWrite' -benchmem -count $(BENCHCOUNT) -benchtime $(BENCHTIME) ./internal/informer/ ./internal/http/ ./internal/ws/ && \
	  $(GO) test -run '^$$' -p 1 -timeout 30m -bench 'Change|Scroll|Open|FirstWindow|NewViewUnderChurn|WindowUpdates|TableBuild' -benchmem -count $(BENCHCOUNT) -benchtime $(BENCHTIME) ./internal/livequery/ ./internal/livequery/wire/ && \
	  $(GO) test -run '^$$' -p 1 -bench 'IdleSocket|CacheMemory|TableMemory' -benchmem -count $(BENCHCOUNT) -benchtime 1x ./internal/ws/ ./internal/informer/ ./internal/livequery/wire/ ; } | tee $(BENCHDIR)/micro.txt
