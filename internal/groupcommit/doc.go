// Package groupcommit commits orders in batches: an instance's buyers of
// one SKU share one transaction, which decides their stock, inserts their
// orders in one multi-row INSERT and answers each buyer once it has
// committed (writer.go, decide.go). Carts share batches of their own
// (carts.go). Batched is the strategy batched built on it; the fast path
// of internal/lua persists its reservations through the same writer.
// See docs/strategies.md.
package groupcommit
