#!/usr/bin/env bash
# The test run of `make test`, once the services are up and their
# variables are in the environment (scripts/services.sh env):
#
#   - the fault tests (cmd/shop/internal/e2e/fault), the longest package,
#     built first and started at once, on their own;
#   - beside them, every other package, Go's default of one per CPU;
#   - beside both, at a lower priority, the fuzzers, for their budgets.
#
# Every test runs with the race detector and every vet check. The fault
# tests spend most of their time waiting for failovers, elections and
# restarts, and their sales take turns with the other process-level
# tests' (docs/tests.md#where-the-time-goes); in a single `go test ./...`
# they held one of its two slots for six minutes while the other packages
# queued for the other. Each part's output is printed as it ends; the run
# fails if any part fails.
set -uo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
flags=(-race -vet=all)
fault=./cmd/shop/internal/e2e/fault
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# Built first, so that the packages both parts need compile once.
"$GO" test "${flags[@]}" -c -o "$dir/fault.test" "$fault" || exit 1

(
	cd "$fault" || exit 1
	start=$SECONDS
	"$dir/fault.test" -test.count=1 -test.timeout=30m >"$dir/fault.log" 2>&1
	rc=$?
	verdict=ok
	((rc == 0)) || verdict=FAIL
	printf '%s\tgithub.com/stockguard/shop/cmd/shop/internal/e2e/fault\t%ds\n' "$verdict" $((SECONDS - start)) >>"$dir/fault.log"
	exit $rc
) &
faults=$!

nice -n 10 make --no-print-directory fuzz >"$dir/fuzz.log" 2>&1 &
fuzz=$!

mapfile -t others < <("$GO" list ./... | grep -vx 'github.com/stockguard/shop/cmd/shop/internal/e2e/fault')
"$GO" test "${flags[@]}" -count=1 -timeout 30m "${others[@]}"
tests=$?

wait $faults
faulted=$?
cat "$dir/fault.log"
wait $fuzz
fuzzed=$?
cat "$dir/fuzz.log"
((tests == 0 && faulted == 0 && fuzzed == 0))
