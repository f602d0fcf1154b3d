package idempotency

import "errors"

// The answers a key can give other than its first request's: every
// package that keeps keys answers with these, or with an error of its own
// that Named makes one of them, so that errors.Is finds them wherever the
// key was kept.
var (
	// ErrInProgress means the first request with this key is still being
	// decided.
	ErrInProgress = errors.New("idempotency: a request with this key is in progress")
	// ErrKeyReused means the key was first used with a different request.
	ErrKeyReused = errors.New("idempotency: key reused with a different request")
)

// Named returns an error that reads as text and is, for errors.Is, one of
// this package's errors (of): a package's own name for it, in its own
// words.
func Named(of error, text string) error { return &named{of: of, text: text} }

type named struct {
	of   error
	text string
}

func (e *named) Error() string { return e.text }

func (e *named) Unwrap() error { return e.of }
