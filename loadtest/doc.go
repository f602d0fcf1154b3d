// Package loadtest is the shop's load generator: it fires buyers at one or
// more shop instances over HTTP, as a burst through a start gate, at a
// steady rate, in closed loops, or as a surge of arrivals past capacity
// (an open loop), each buyer ordering one SKU or, with a
// cart mix, a cart of several; classifies their answers, keeps their
// latencies in HDR histograms, and renders what a run measured as text,
// JSON and one offline HTML page. It knows the shop only by its HTTP API,
// through which it can audit a load too (Shop.Audit); what was sold is
// read from the database by package audit. See docs/benchmark.md.
package loadtest
