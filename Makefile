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

.PHONY: all build joiner functions forwarder size test fuzz lint replay bench bench-karpenter bench-scale agree kube-assets clean

all: build

build: joiner functions forwarder

# joiner (plan, validate, catalog) and joiner-run (replay, invoke, record, sim),
# which joiner starts for those commands: see cmd/internal/cli.
joiner:
	$(GO) build -trimpath -o bin/ ./cmd/joiner ./cmd/joiner-run

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

# Each bootstrap must stay within 20 MB (decimal: 20,000,000 bytes), issue 5's target:
# a Lambda package is downloaded and paged in on every cold start. Checks what
# `make functions` built, that each links only its own handler (function names
# stay in a stripped Go binary's pclntab: handlers.runConsolidator in the provisioner
# would mean its main reached the other handlers), and that none links what made
# them too big before:
#   - a generated aws-sdk-go-v2 client used for one call: each service package
#     builds its whole API's shape schemas at init (package-level smithy.NewSchema
#     values the linker must keep): SSM ~0.92 MB, EKS ~0.33 MB, Secrets Manager
#     ~0.13 MB. Those calls go through shared/awsjson (the SDK's signer, retryer
#     and HTTP client, a hand-written awsJson1.1/restJson1 request);
#   - client-go's typed clientset (k8s.io/client-go/kubernetes: its scheme registers
#     every API group; a bootstrap holding it was 27.6 MB): shared/kube builds
#     only the clients it calls.
BOOTSTRAP_MAX_BYTES ?= 20000000
HANDLER_SYMBOLS := provisioner:runProvisioner interruption:runInterruption consolidator:runConsolidator
FORBIDDEN_PACKAGES := github.com/aws/aws-sdk-go-v2/service/ssm github.com/aws/aws-sdk-go-v2/service/eks \
	github.com/aws/aws-sdk-go-v2/service/secretsmanager k8s.io/client-go/kubernetes
size: functions
	@fail=0; for f in $(FUNCTIONS); do \
	  b=dist/$$f/bootstrap; [ -f $$b ] || continue; s=$$(stat -c %s $$b); \
	  if [ $$s -gt $(BOOTSTRAP_MAX_BYTES) ]; then echo "$$b: $$s bytes, over the $(BOOTSTRAP_MAX_BYTES)-byte limit"; fail=1; \
	  else echo "$$b: $$s bytes (limit $(BOOTSTRAP_MAX_BYTES))"; fi; \
	  for hs in $(HANDLER_SYMBOLS); do h=$${hs%%:*}; sym=$${hs#*:}; \
	    if [ $$h = $$f ]; then grep -qa "shared/handlers.$$sym" $$b || { echo "$$b: does not link its own handler ($$sym)"; fail=1; }; \
	    elif grep -qa "shared/handlers.$$sym" $$b; then echo "$$b: links the $$h handler ($$sym) too"; fail=1; fi; \
	  done; \
	  for p in $(FORBIDDEN_PACKAGES); do \
	    if grep -qaF "$$p." $$b; then echo "$$b: links $$p (see the comment above make size)"; fail=1; fi; \
	  done; \
	done; exit $$fail

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^infra/')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

kube-assets:
	bash scripts/kube-assets.sh build

# A real part a test needs (moto_server, the API server, the Lambda RIE) missing is a
# failure here, not a skip (JOINER_REQUIRE_REAL_PARTS); plain `go test` skips saying why.
test: lint kube-assets size node-tools
	JOINER_REQUIRE_REAL_PARTS=1 $(GO) test -timeout 45m ./...
	cd shared/nodeboot/nodeadmcheck && $(GO) vet ./... && $(GO) test ./...
	cd bench && $(GO) vet ./... && $(GO) test ./...
	$(MAKE) fuzz
	$(MAKE) test-infra

# Every decoder a user or an event reaches, fuzzed for FUZZTIME each (Go runs one
# fuzz target per invocation). `go test` alone replays each target's corpus, the
# inputs committed in its package's testdata/fuzz/<target>/, where a failing input
# found here is written too.
FUZZTIME ?= 3s
FUZZ_TARGETS := \
	./shared/manifest:FuzzDecode ./shared/manifest:FuzzFastYAML ./shared/manifest:FuzzAssign \
	./events:FuzzDecode ./shared/catalog:FuzzDecode ./shared/replay:FuzzParse \
	./shared/awssim:FuzzServeHTTP ./shared/awssim:FuzzSeed \
	./shared/packer/packertest:FuzzPlanFits ./cmd/joiner-run:FuzzParseEvent ./shared/facts:FuzzInstanceID
fuzz:
	@set -eo pipefail; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; fn=$${t##*:}; echo "fuzz $$fn in $$pkg for $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg | grep -v '^fuzz: elapsed'; \
	done

# Every scenario of testdata/scenarios replayed on the simulated AWS and an in-memory
# cluster, through the functions' handlers; REPLAY_ARGS="001-heavy-app --chart replay.svg" narrows it.
REPLAY_ARGS ?=
replay: joiner
	./bin/joiner replay $(REPLAY_ARGS)

# Go benchmarks of the engine, then the whole-process report against the targets.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./shared/packer/...
	$(GO) run ./cmd/packbench

# Karpenter's scheduler (sigs.k8s.io/karpenter v1.14.1, the newest release that builds
# with Go 1.26.8) and Joiner's packer on packbench's cases, side by side: pods/s,
# cost / bound and pods left unschedulable of both. bench/ is its own module so the
# main module never depends on Karpenter. BENCH_ARGS="-cases real- -runs 5" narrows it.
BENCH_ARGS ?=
bench-karpenter:
	cd bench && $(GO) run ./karpenter $(BENCH_ARGS)

# One provisioner and one consolidator invocation, each in a fresh process, against a
# real API server holding 10,000 nodes and 100,000 pods (issue 18; not in `make test`).
# The first run populates etcd (about a minute, straight into etcd) and caches it under
# ~/.cache/joiner/scale-etcd; each of the three runs then takes minutes (the API server
# warms its caches first). JOINER_SCALE_NODES=100 measures the 100-node cluster.
bench-scale: kube-assets
	$(GO) test ./shared/handlers -run XXX -bench BenchmarkInvocationsAtScale -benchtime 1x -timeout 120m -v

# Plans judged by the real kube-scheduler on 200 random clusters of the property
# generator (make test runs fewer; see TestPlansAgreeWithKubeScheduler).
AGREE_SEEDS ?= 200
agree: kube-assets
	JOINER_REQUIRE_REAL_PARTS=1 $(GO) test ./shared/packer/packertest -run TestPlansAgreeWithKubeScheduler -agree -agree.seeds $(AGREE_SEEDS) -timeout 60m -v

include infra/infra.mk

clean:
	rm -rf bin dist
