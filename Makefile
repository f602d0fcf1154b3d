# The README's commands. `make test` is what CI runs.
SHELL := /bin/bash
GO    ?= go

.PHONY: test fuzz lint services-up services-down build

FUZZTIME ?= 10s

# Real MySQL/MariaDB, Redis and ZooKeeper on loopback (installed if missing),
# the fuzzers for a bounded time, then every test with the race detector.
test: lint services-up fuzz
	eval "$$(scripts/services.sh env)" && $(GO) test -race -count=1 ./...

# Each fuzzer runs for FUZZTIME; a failing input lands in testdata/fuzz.
fuzz: services-up
	eval "$$(scripts/services.sh env)" && \
	$(GO) test -run '^$$' -fuzz '^FuzzParseKey$$' -fuzztime $(FUZZTIME) ./internal/idempotency && \
	$(GO) test -run '^$$' -fuzz '^FuzzOrderRequest$$' -fuzztime $(FUZZTIME) ./internal/httpapi

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

services-up:
	scripts/services.sh up

services-down:
	scripts/services.sh down

build:
	$(GO) build -o bin/shop ./cmd/shop
