// Package serve holds the tests of `shop serve` through its API, as a
// child process (shoptest.Start): Idempotency-Keys, stock, metrics,
// traces, tokens, events and reconcile. It has no code but its tests;
// docs/tests.md lists them.
package serve
