GO ?= go
BIN := bin/nodewatch

.PHONY: all build cross release release-check release-test release-tools generate test test-under-load lint demo bench bench-instructions bench-compare etcd-bin fuzz soak faults recipes-snapshot proto clean

all: build

## build: bin/nodewatch, and bin/nodewatch-etcd beside it (the etcd that serve --dev runs):
## static, trimmed, stamped with the version, commit and date (scripts/version.sh).
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$$(bash scripts/version.sh -ldflags)" -o bin/ ./cmd/nodewatch ./cmd/nodewatch-etcd

## cross: build both binaries for each platform a release ships (linux, darwin and windows on
## amd64 and arm64, CGO_ENABLED=0), and for 32-bit linux/386.
PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64
cross:
	@set -e; for p in $(PLATFORMS); do \
		echo "cross: $$p"; \
		GOOS=$${p%/*} GOARCH=$${p#*/} CGO_ENABLED=0 $(GO) build -trimpath -o /dev/null ./cmd/nodewatch ./cmd/nodewatch-etcd; \
	done
	GOARCH=386 CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/nodewatch ./cmd/nodewatch-etcd

## release: every artifact of a release into DIST (default dist/): static binaries for the six
## platforms in .tar.gz/.zip archives with the docs and completions, an SBOM per binary, .deb and
## .rpm packages, serve's OCI image layout, and SHA256SUMS; reproducible from one commit
## (tools/release says how). About 2 minutes on 2 cores once the build cache is warm.
DIST ?= dist
release: release-tools
	.bin/release -root . -dist $(DIST) -cyclonedx .bin/cyclonedx-gomod

## release-check: check what make release left in DIST as a user would find it (dpkg-deb from Debian).
release-check: release-tools
	.bin/release -check -dist $(DIST)

## release-test: make release twice into two directories, which must give byte-identical
## SHA256SUMS, then release-check on one of them (what CI runs).
release-test: release-tools
	cd tools && NODEWATCH_RELEASE_TEST=1 $(GO) test -count=1 -v -timeout 30m ./release

release-tools:
	cd tools && $(GO) build -o ../.bin/ ./release github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod

## generate: the man page, from the command-line definition
## (make test fails while a checked-in copy is stale).
generate:
	mkdir -p completions
	$(GO) run ./cmd/nodewatch man > docs/nodewatch.1

## test: the whole suite, with the race detector (what CI runs): about 8 minutes on 2 busy
## cores. A line per package as it ends, every 30 s the tests still running, and the whole
## output of whatever failed (internal/testkit/testprogress reads go test -json).
test:
	@echo "make test: go test -race -count=1 ./... (about 8 minutes on 2 busy cores; cmd/nodewatch is the longest)"
	bash -o pipefail -c '$(GO) test -race -count=1 -json ./... | $(GO) run ./internal/testkit/testprogress'
	@echo "make test: the CLI suite, the model tests and the fast paths' own comparison again, with every fast path off (NODEWATCH_FAST=off)"
	bash -o pipefail -c 'NODEWATCH_FAST=off $(GO) test -race -count=1 -json -run "^TestCLI$$|Model|^TestFastOffIdentical$$" ./cmd/nodewatch ./internal/... | $(GO) run ./internal/testkit/testprogress'

## test-under-load: `make test` RUNS times (default 5) on a fresh clone while a second
## `go test -race ./...` loops beside it (minutes).
test-under-load:
	bash scripts/test-under-load.sh

## lint: go vet, tests included, for each platform a release ships, and staticcheck (pinned in
## tools/go.mod, built into .bin/) for linux, darwin and windows. What CI runs.
lint:
	@set -e; for p in $(PLATFORMS); do \
		echo "lint: go vet, $$p"; \
		GOOS=$${p%/*} GOARCH=$${p#*/} CGO_ENABLED=0 $(GO) vet ./...; \
	done
	cd tools && $(GO) build -o ../.bin/ honnef.co/go/tools/cmd/staticcheck
	@set -e; for os in linux darwin windows; do \
		echo "lint: staticcheck, $$os"; \
		GOOS=$$os CGO_ENABLED=0 .bin/staticcheck ./...; \
	done

## demo: serve --dev (embedded etcd + simulated fleet), and nodewatch nodes -o text following it once it serves.
demo: build
	bash scripts/demo.sh $(BIN)

## bench: follower cost at 1k vs 100k ids, hand-off memory under a stalled reader, encoder and jq costs,
## serve fan-out, a 100k-key listing end to end.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./internal/... ./cmd/...

## bench-instructions: instructions per operation of the per-change benchmarks (the watcher's decode,
## the Differ, the whole follower), counted by valgrind (installed with apt-get if missing) rather
## than timed, so that small changes show on a shared machine; REV=<commit> puts that commit's
## counts beside them.
bench-instructions:
	bash scripts/instructions.sh $(REV)

## bench-compare: nodewatch side by side with etcdctl (pinned, built from the module proxy) on the
## same data, alternated, as a table of medians and ratios, for each shape of records: the
## simulator's, and records of 200 B, 600 B and 4 KiB, changed by single puts and by transactions
## of 50, serve with 1,000 and 10,000 streams and 100 streams over a 100,000-node backlog, and
## one record read into a pipe (~15 minutes on 2 cores). BENCHFLAGS passes flags: BENCHFLAGS=-quick (600 B records, fewer of
## them, no 10,000 streams, ~2 minutes), BENCHFLAGS='-rows 3 -shapes 600,4k -modes txns -profile
## prof', BENCHFLAGS='-rows 6,9,10' (serve's rows alone).
bench-compare: build etcd-bin
	$(GO) run ./bench/compare -nodewatch $(BIN) -etcd .bin/etcd -etcdctl .bin/etcdctl $(BENCHFLAGS)

## etcd-bin: etcd and etcdctl at the version bench/tools/go.mod pins, in .bin/.
etcd-bin:
	cd bench/tools && $(GO) build -o ../../.bin/etcd go.etcd.io/etcd/server/v3 && $(GO) build -o ../../.bin/etcdctl go.etcd.io/etcd/etcdctl/v3

## fuzz: each fuzz target for FUZZTIME (default 30s), and the hand-off model for MODELSEEDS
## random cases; `make test` runs the seed corpora and 5,000 model cases.
FUZZTIME ?= 30s
MODELSEEDS ?= 1000000
# FUZZTARGETS are the fuzz targets, each as PACKAGE:TARGET.
FUZZTARGETS := ./internal/handoff:FuzzQueueModel ./internal/etcdkv:FuzzDecodeValueAuto \
	./internal/etcdwire:FuzzWatchCodec ./internal/etcdwire:FuzzRangeCodec \
	./internal/curator:FuzzDecodeRecord ./internal/curator:FuzzNodeJSON ./internal/curator:FuzzObjectOfWire \
	./internal/curator/client:FuzzWireEvent \
	./internal/jsondoc:FuzzDecode ./internal/jsondoc:FuzzDiff ./internal/jsondoc:FuzzAppendCompact ./internal/jsondoc:FuzzCompactFrom \
	./internal/jq:FuzzFast ./internal/gobjson:FuzzDecode ./internal/stream:FuzzEncodeKey ./internal/view:FuzzFollower
fuzz:
	NODEWATCH_MODEL_SEEDS=$(MODELSEEDS) $(GO) test -count=1 -run '^TestQueueModel$$' -timeout 0 ./internal/handoff
	@set -e; for t in $(FUZZTARGETS); do \
		echo "fuzz: $$t"; \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) $${t%%:*}; \
	done

## soak: sim at full speed, serve, nodes behind a slow reader, for SOAKTIME (default 2m):
## heap over time, then the replayed stream must equal etcd.
SOAKTIME ?= 2m
soak:
	NODEWATCH_SOAK=$(SOAKTIME) $(GO) test -count=1 -run '^TestSoak$$' -v -timeout 0 ./cmd/nodewatch

## faults: FAULTRUNS randomized runs (default 20) against a 3-member etcd cluster of processes,
## two serve replicas and every kind of stream, each run injecting one fault of each of the twelve
## kinds in a random order; every printed line is checked and every stream must end equal to etcd;
## prints a summary with each kind's time to recover, nodewatch beside the pinned etcdctl (hence
## etcd-bin). FAULTSEED sets the first run's seed (a failing run prints the command that runs it again).
FAULTRUNS ?= 20
FAULTSEED ?=
faults: etcd-bin
	NODEWATCH_FAULTS=1 NODEWATCH_FAULTS_RUNS=$(FAULTRUNS) NODEWATCH_FAULTS_SEED=$(FAULTSEED) $(GO) test -count=1 -run '^TestFaults$$' -v -timeout 0 ./cmd/nodewatch

## recipes-snapshot: what the binary of this tree prints, recorded into OUT (default
## .recipes/COMMIT): every README recipe against real etcd (etcd-bin) and serve, adapted to end
## by itself; --help, version, completion, man; output formats; usage errors; the golden files.
## Normalized so that two runs of one tree are identical: diff -r two OUTs to show a change
## (a restructure) changes no output.
OUT ?= .recipes/$(shell git rev-parse --short HEAD 2>/dev/null || echo tree)
recipes-snapshot:
	bash scripts/recipes-snapshot.sh $(OUT)

## proto: regenerate the Curator wire code (protoc from Debian, pinned Go plugins).
proto:
	bash scripts/genproto.sh

clean:
	rm -rf bin .bin dist
