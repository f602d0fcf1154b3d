package lock

import "context"

// AwaitDelete exposes awaitDelete to the package's tests.
func (e *Etcd) AwaitDelete(ctx context.Context, key string) error { return e.awaitDelete(ctx, key) }
