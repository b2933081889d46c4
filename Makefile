# Joiner's build. `make replay` runs the main job on the embedded default;
# `make test` runs every test (it builds the real kube-apiserver + etcd first
# when they are not cached yet).
SHELL := /bin/bash
GO ?= go
export KAPI_PREFIX ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/joiner/kapi
export KUBEBUILDER_ASSETS ?= $(KAPI_PREFIX)/bin
FUNCTIONS := provisioner interruption consolidator
LAMBDA_ARCH ?= arm64
LDFLAGS := -s -w

.PHONY: all build joiner functions forwarder test lint replay bench kube-assets clean

all: build

build: joiner functions forwarder

joiner:
	$(GO) build -trimpath -o bin/joiner ./cmd/joiner

# The in-cluster forwarder (linux, static; the image's architecture is yours to pick).
forwarder:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(or $(FORWARDER_ARCH),amd64) $(GO) build -trimpath -ldflags='$(LDFLAGS)' -o bin/forwarder ./cmd/forwarder

# Lambda bootstraps: linux/arm64, no RPC shim (provided.al2023 runtime).
functions:
	@for f in $(FUNCTIONS); do \
	  if [ -d functions/$$f ]; then \
	    echo "build dist/$$f/bootstrap"; \
	    CGO_ENABLED=0 GOOS=linux GOARCH=$(LAMBDA_ARCH) $(GO) build -tags lambda.norpc -trimpath -ldflags='$(LDFLAGS)' -o dist/$$f/bootstrap ./functions/$$f || exit 1; \
	  fi; \
	done

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^infra/')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

kube-assets:
	bash scripts/kube-assets.sh build

test: lint kube-assets
	$(GO) test -timeout 30m ./...
	$(MAKE) test-infra

# Until scenario replay lands, the main job is planning the seed scenarios.
REPLAY_SCENARIOS ?= testdata/seeds/001-heavy-app-fixed testdata/seeds/002-kubean-filled "testdata/seeds/004-fargate-filled -f testdata/scenarios/004-nodeless"
replay: joiner
	@for d in $(REPLAY_SCENARIOS); do echo "== $$d"; ./bin/joiner plan -f $$d --explain || exit 1; echo; done

# Go benchmarks of the engine, then the whole-process report against the targets.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./shared/packer/...
	$(GO) run ./cmd/packbench

include infra/infra.mk

clean:
	rm -rf bin dist
