// Package lua is the fast path, the strategy lua: one Lua script in Redis
// decides each order and logs its reservation (internal/lua/redisstock),
// and the group-commit writer (internal/groupcommit) records the
// reservations in the database in batches. The log is the recovery log:
// a reservation whose commit failed is tried again by its process, and a
// buyer's retry persists it at any instance (flights.go); Reconcile claims
// what dead processes left and brings Redis back in step with the
// database (reconcile.go). Carts take their lines in one script,
// or one per line in a saga (luacart.go). See docs/strategies.md.
package lua
