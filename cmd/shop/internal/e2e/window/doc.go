// Package window holds TestWindow: the payment window on every strategy,
// on three `shop serve` processes whose expiry and relay jobs it kills and
// pauses mid-run, each phase's history checked against the shop's model.
// It has no code but its tests; docs/tests.md describes them.
package window
