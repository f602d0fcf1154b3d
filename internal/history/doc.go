// Package history records what the shop's clients asked and were told, one
// operation per line of JSON, so that a sale can be checked answer by
// answer against a model of the shop (internal/lincheck), not only by its
// totals once it is over.
//
// An operation is who sent it (Client), what it asked (Kind and its
// inputs), when it was sent and when its answer came (Call and Return, in
// nanoseconds of the recording clock), and the answer. The last line of a
// sale is its final state: each SKU's available stock and every order,
// read from the database once the sale is over (Op with Kind State). The
// format is documented in docs/linearizability.md.
package history
