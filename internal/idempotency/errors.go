package idempotency

import "errors"

// The answers a key can give other than its first request's. Every
// package that keeps keys answers with these, wrapped with what it knows
// of the request, so that errors.Is finds them wherever the key was kept.
var (
	// ErrInProgress means the first request with this key is still being
	// decided.
	ErrInProgress = errors.New("idempotency: a request with this key is in progress")
	// ErrKeyReused means the key was first used with a different request.
	ErrKeyReused = errors.New("idempotency: key reused with a different request")
)
