// Package lincheck checks a sale's history (internal/history) against a
// sequential model of the shop: some order of its operations, each taken
// at one point between its call and its return, explains every answer.
//
// It works in two steps. First, each Idempotency-Key is checked alone:
// a key's first final answer is kept and replayed, so every final answer
// of one key must agree, and agree with the final state (a key with an
// order was never told sold out, and no replay names another order).
// Each key then becomes one step of the model, the decision its answers
// share, between the first call that could have made it and the first
// answer that told it. Second, porcupine searches for an order of those
// steps in which every answer is true of the stock: what is available per
// SKU and the status of each order. One SKU is one partition, and a cart
// joins its SKUs'. docs/linearizability.md describes the model.
package lincheck
