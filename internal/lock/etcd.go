package lock

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// EtcdOptions configures Etcd. A nil *EtcdOptions is valid.
type EtcdOptions struct {
	// TTL is the lease: how long a lock outlives a holder that stops
	// keeping its lease alive. etcd counts in whole seconds, so it is
	// rounded up; the server raises a TTL below its minimum (2s with the
	// default election timeout). Default 10s.
	TTL time.Duration
	// Prefix starts every key. Default "stockguard/locks/".
	Prefix string
}

func (o *EtcdOptions) ttl() time.Duration {
	if o == nil || o.TTL <= 0 {
		return 10 * time.Second
	}
	return o.TTL
}

func (o *EtcdOptions) prefix() string {
	if o == nil || o.Prefix == "" {
		return "stockguard/locks/"
	}
	return o.Prefix
}

// Etcd locks with etcd's concurrency.Mutex: each contender puts a key under
// Prefix/<name>/, bound to its lease, and holds the lock while its key has
// the lowest create revision. A waiter watches only the key just before its
// own, so a release wakes one waiter (no herd).
//
// Every acquisition has a session of its own, a lease of TTL that the
// client keeps alive while the lock is held. That costs a LeaseGrant per
// acquisition, and buys three things: each acquisition writes a fresh key,
// so its token is new even after a release that failed (a shared session
// would find its old key and hold the lock again under the old revision);
// the loss of one lease loses one lock, not every lock of the process; and
// the release is the revocation of the lease, which deletes the key with it.
//
// The fencing token is the key's create revision: etcd's revision counts
// every write to the cluster, and a contender's key is created after the
// keys of everyone it queues behind, so the tokens of one name increase
// with every acquisition. When the session's Done fires, the lease is lost:
// the server expired it, or the client got no answer to its keep-alives
// for a TTL. The client learns it a round trip after the server at best;
// fencing covers that window. A release that cannot reach etcd leaves the
// key to go with the lease, which is no longer kept alive, a TTL later.
type Etcd struct {
	locker
	client *clientv3.Client
	ttl    time.Duration // whole seconds
	prefix string
}

var _ Locker = (*Etcd)(nil)

// NewEtcd returns a Locker on an etcd client.
func NewEtcd(client *clientv3.Client, opts *EtcdOptions) (*Etcd, error) {
	if client == nil {
		return nil, errors.New("lock: etcd: nil client")
	}
	e := &Etcd{client: client, ttl: (opts.ttl() + time.Second - 1).Truncate(time.Second), prefix: opts.prefix()}
	e.locker = remote(e)
	return e, nil
}

// errSessionDone is why a wait ends when the waiter's lease does.
var errSessionDone = errors.New("etcd: session lease expired or no longer kept alive")

func (e *Etcd) grant(ctx context.Context, name string, wait bool) (grant, error) {
	s, err := e.session(ctx)
	if err != nil {
		return grant{}, err
	}
	m := concurrency.NewMutex(s, e.prefix+url.PathEscape(name))
	if wait {
		err = lockMutex(ctx, s, m)
	} else {
		err = m.TryLock(ctx)
	}
	if err != nil {
		// The revocation deletes the contender's key, if the mutex has not;
		// failing that, the key goes when the abandoned lease runs out.
		_ = e.revoke(context.WithoutCancel(ctx), s)
		if errors.Is(err, concurrency.ErrLocked) {
			return grant{}, ErrLocked
		}
		return grant{}, fmt.Errorf("etcd: %w", err)
	}
	owner := m.IsOwner() // compares the key's create revision with ours
	return grant{
		token: (*pb.Compare)(&owner).GetCreateRevision(),
		release: func(ctx context.Context) error {
			err := e.revoke(ctx, s)
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return ErrNotHeld
			}
			return err
		},
		keep: func(ctx context.Context) error {
			select {
			case <-ctx.Done():
				return nil
			case <-s.Done():
				return errSessionDone
			}
		},
	}, nil
}

// session grants a lease of TTL under ctx, and keeps it alive until it is
// revoked. concurrency.NewSession would grant it under the client's ctx,
// which an unreachable etcd could hold up forever.
func (e *Etcd) session(ctx context.Context) (*concurrency.Session, error) {
	secs := int64(e.ttl / time.Second)
	lease, err := e.client.Grant(ctx, secs)
	if err != nil {
		return nil, fmt.Errorf("etcd: grant lease: %w", err)
	}
	s, err := concurrency.NewSession(e.client, concurrency.WithLease(lease.ID), concurrency.WithTTL(int(secs)))
	if err != nil {
		_, _ = e.client.Revoke(context.WithoutCancel(ctx), lease.ID)
		return nil, fmt.Errorf("etcd: session: %w", err)
	}
	return s, nil
}

// revoke stops keeping the session's lease alive and revokes it, which
// deletes its keys. Like Session.Close, it gives up after a TTL: by then
// the lease has expired anyway.
func (e *Etcd) revoke(ctx context.Context, s *concurrency.Session) error {
	s.Orphan()
	ctx, cancel := context.WithTimeout(ctx, e.ttl)
	defer cancel()
	if _, err := e.client.Revoke(ctx, s.Lease()); err != nil {
		return fmt.Errorf("etcd: revoke lease: %w", err)
	}
	return nil
}

// lockMutex waits for m until ctx ends or the session's lease is lost.
// After a cancelled wait, Mutex.Lock deletes its key under the client's own
// ctx, which an unreachable etcd holds up; lockMutex returns without
// waiting for that, and the caller revokes the lease instead.
func lockMutex(ctx context.Context, s *concurrency.Session, m *concurrency.Mutex) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(s.Ctx(), func() { cancel(errSessionDone) })
	defer stop()
	done := make(chan error, 1)
	go func() { done <- m.Lock(ctx) }()
	select {
	case err := <-done:
		if err != nil && ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
