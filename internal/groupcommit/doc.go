// Package groupcommit commits orders in batches: an instance's buyers of
// one SKU share one transaction, which decides their stock, inserts their
// orders in one multi-row INSERT and answers each buyer once it has
// committed (writer.go, decide.go). Carts share batches of their own
// (carts.go). Batched is the strategy batched built on it. A caller that
// holds its buyers' units elsewhere before the database persists them
// through the same writer, in a Mode of its own, and the writer tries
// such a request again until a batch commits it (retry.go). See
// docs/strategies.md.
package groupcommit
