# The README's commands. `make test` is what CI runs.
SHELL := /bin/bash
GO    ?= go

.PHONY: test fuzz lint fmt services-up services-down build bench

# Budgets are counts of inputs, not durations: go1.26's fuzz coordinator can
# fail a run with a bare "context deadline exceeded" when a duration ends while
# a worker is busy (go.dev/issue/75804, fixed in go1.27). Roughly 10 s each.
FUZZ_KEY_RUNS   ?= 30000x
FUZZ_ORDER_RUNS ?= 3000x

# Real MySQL/MariaDB, Redis, ZooKeeper and etcd on loopback (installed if
# missing, while the packages compile), then every test with the race
# detector and every vet check, and beside them, niced, the fuzzers for a
# fixed number of inputs each: their output is printed once the tests end.
# The `shop serve` children of the process-level tests (cmd/shop and the
# packages of cmd/shop/internal/e2e) run one binary, built without the race
# detector once for the sources as they are: the first test package that
# needs it builds it into the user's cache directory while the others wait
# (cmd/shop/internal/shoptest), and SHOP_TEST_BIN names a prebuilt one
# instead. Go's defaults are kept: a test package per CPU, and in each a
# test per CPU; the fault tests' CPU-bound bursts take turns across the
# test processes, one per CPU (docs/tests.md). `go test -short ./...` is
# the fast run, with no server.
test:
	scripts/services.sh up & up=$$!; \
	$(GO) build -race ./... >/dev/null 2>&1 & warm=$$!; \
	$(MAKE) --no-print-directory fmt; fmt=$$?; wait $$up; up=$$?; kill $$warm 2>/dev/null; wait $$warm; \
	[ $$fmt -eq 0 ] && [ $$up -eq 0 ]
	eval "$$(scripts/services.sh env)" && log=$$(mktemp) && \
	{ nice -n 10 $(MAKE) --no-print-directory fuzz >"$$log" 2>&1 & fuzz=$$!; } && \
	{ $(GO) test -race -vet=all -count=1 -timeout 30m ./...; tests=$$?; \
	  wait $$fuzz; fuzzed=$$?; cat "$$log"; rm -f "$$log"; [ $$tests -eq 0 ] && [ $$fuzzed -eq 0 ]; }

# Each fuzzer runs its budget of inputs; a failing input lands in testdata/fuzz.
fuzz: services-up
	eval "$$(scripts/services.sh env)" && \
	$(GO) test -run '^$$' -fuzz '^FuzzParseKey$$' -fuzztime $(FUZZ_KEY_RUNS) ./internal/idempotency && \
	$(GO) test -run '^$$' -fuzz '^FuzzOrderRequest$$' -fuzztime $(FUZZ_ORDER_RUNS) ./internal/httpapi

# gofmt and every vet check; `make test` runs the same checks.
lint: fmt
	$(GO) vet ./...

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

services-up:
	scripts/services.sh up

services-down:
	scripts/services.sh down

build:
	$(GO) build -o bin/shop ./cmd/shop

# The Go benchmarks, then `shop bench` against the same services, and three
# throwaway redis-servers on REDLOCK_PORTS as Redlock's independent masters.
# Figures and reports land in reports/ (git-ignored): go-bench.txt,
# bench.txt, bench.json and bench.html. BENCHFLAGS go to shop bench.
BENCHFLAGS    ?= --rate 200 --duration 10s --closed 10s
REDLOCK_PORTS ?= 6380 6381 6382
bench: services-up build
	mkdir -p reports
	set -eo pipefail; eval "$$(scripts/services.sh env)"; \
	dir=$$(mktemp -d); addrs=; \
	trap 'for p in $(REDLOCK_PORTS); do redis-cli -p $$p shutdown nosave >/dev/null 2>&1 || true; done; rm -rf "$$dir"' EXIT; \
	for p in $(REDLOCK_PORTS); do \
		redis-server --bind 127.0.0.1 --port $$p --save '' --appendonly no --dir "$$dir" --daemonize yes --pidfile "$$dir/$$p.pid" >/dev/null; \
		addrs=$$addrs$${addrs:+,}127.0.0.1:$$p; \
	done; \
	$(GO) test -run '^$$' -bench . -benchtime 2s ./... | tee reports/go-bench.txt; \
	bin/shop bench --redlock "$$addrs" $(BENCHFLAGS) --json reports/bench.json --html reports/bench.html | tee reports/bench.txt
