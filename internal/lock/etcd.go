package lock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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

// Etcd locks as etcd's concurrency.Mutex does: each contender puts a key
// under Prefix/<name>/, bound to a lease of its own that the client keeps
// alive, and holds the lock while its key has the lowest create revision.
// A waiter watches only the key just before its own, so a release wakes
// one waiter (no herd).
//
// The fencing token is the key's create revision plus the lock's offset,
// which Lease.Raise lifts past a fence after etcd lost its data. When the
// session's Done fires, the lease is lost; the client learns it a round
// trip after the server at best, and the fence covers that window. See
// docs/locks.md#etcd.
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
	e.locker = remote("etcd", e)
	return e, nil
}

// errSessionDone is why a wait ends when the waiter's lease does.
var errSessionDone = errors.New("etcd: session lease expired or no longer kept alive")

func (e *Etcd) grant(ctx context.Context, name string, wait bool) (grant, error) {
	s, err := e.session(ctx)
	if err != nil {
		return grant{}, err
	}
	esc := e.prefix + url.PathEscape(name)
	// The offset is no contender's key, nor another name's: PathEscape
	// leaves no "/" and no "#" in a name.
	pfx, offset := esc+"/", esc+"#offset"
	rev, base, err := e.enqueue(ctx, s, pfx, offset, wait)
	if err != nil {
		// The revocation deletes the contender's key; failing that, the key
		// goes when the abandoned lease runs out.
		_ = e.revoke(context.WithoutCancel(ctx), s)
		if errors.Is(err, ErrLocked) {
			return grant{}, ErrLocked
		}
		return grant{}, fmt.Errorf("etcd: %w", err)
	}
	key := contender(pfx, s)
	return grant{
		token: rev + base,
		raise: func(ctx context.Context, token int64) error {
			resp, err := e.client.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
				Then(clientv3.OpPut(offset, strconv.FormatInt(token-rev, 10))).
				Commit()
			if err == nil && !resp.Succeeded {
				err = ErrNotHeld
			}
			return err
		},
		release: func(ctx context.Context) error {
			err := e.revoke(ctx, s)
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return ErrNotHeld
			}
			return err
		},
		renew: func(ctx context.Context) error {
			select {
			case <-ctx.Done():
				return nil
			case <-s.Done():
				return errSessionDone
			}
		},
	}, nil
}

// contender is the key of session s under pfx.
func contender(pfx string, s *concurrency.Session) string {
	return fmt.Sprintf("%s%x", pfx, s.Lease())
}

// enqueue puts the session's key under pfx, as concurrency.Mutex does, and
// returns its create revision once it is the oldest key there, with the
// lock's token offset, read from the key offset in the same step. It
// returns ErrLocked, without waiting, if it is not and wait is false; a
// waiter stops when ctx ends or the session's lease is lost.
func (e *Etcd) enqueue(ctx context.Context, s *concurrency.Session, pfx, offset string, wait bool) (rev, base int64, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(s.Ctx(), func() { cancel(errSessionDone) })
	defer stop()
	cause := func(err error) error {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return err
	}

	key := contender(pfx, s)
	if rev, err = e.put(ctx, s, key); err != nil {
		return 0, 0, cause(err)
	}
	for waited := false; ; waited = true {
		// The youngest key older than ours, the one to wait for; ours,
		// which the server deletes if it expires the lease meanwhile; and
		// the offset, which only the holder changes.
		var resp *clientv3.TxnResponse
		err := e.call(ctx, func(ctx context.Context) (err error) {
			resp, err = e.client.Txn(ctx).Then(
				clientv3.OpGet(pfx, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))...),
				clientv3.OpGet(key, clientv3.WithCountOnly()),
				clientv3.OpGet(offset)).Commit()
			return err
		})
		if err != nil {
			return 0, 0, cause(err)
		}
		before := resp.Responses[0].GetResponseRange()
		if waited && resp.Responses[1].GetResponseRange().Count == 0 {
			return 0, 0, errSessionDone
		}
		if len(before.Kvs) == 0 {
			if kvs := resp.Responses[2].GetResponseRange().Kvs; len(kvs) > 0 {
				if base, err = strconv.ParseInt(string(kvs[0].Value), 10, 64); err != nil {
					return 0, 0, fmt.Errorf("token offset %s: %w", offset, err)
				}
			}
			return rev, base, nil
		}
		if !wait {
			return 0, 0, ErrLocked
		}
		err = e.awaitDelete(ctx, string(before.Kvs[0].Key))
		if err != nil && (ctx.Err() != nil || !etcdTransient(err)) {
			return 0, 0, cause(err)
		}
	}
}

// put puts the session's key, bound to its lease, unless it is there
// already, and returns its create revision: an attempt that an election
// cut short may have put it.
func (e *Etcd) put(ctx context.Context, s *concurrency.Session, key string) (rev int64, err error) {
	err = e.call(ctx, func(ctx context.Context) error {
		resp, err := e.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, "", clientv3.WithLease(s.Lease()))).
			Else(clientv3.OpGet(key)).
			Commit()
		switch {
		case err != nil:
			return err
		case resp.Succeeded:
			rev = resp.Header.Revision
		case len(resp.Responses[0].GetResponseRange().Kvs) == 0:
			return fmt.Errorf("key %s vanished while it was put", key)
		default:
			rev = resp.Responses[0].GetResponseRange().Kvs[0].CreateRevision
		}
		return nil
	})
	return rev, err
}

// etcdAttempt bounds one request of a lock's to etcd. A request whose
// proposal was lost with a killed leader is answered only at the server's
// request timeout, seven seconds with the default election timeout: past
// a buyer's deadline. Sent again, it reaches the new leader.
const etcdAttempt = time.Second

// call runs op, each attempt bounded by etcdAttempt, again and again
// through an election (throughElection). op must be safe to repeat.
func (e *Etcd) call(ctx context.Context, op func(context.Context) error) error {
	return throughElection(ctx, etcdTransient, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, etcdAttempt)
		defer cancel()
		return op(ctx)
	})
}

// etcdTransient reports whether err says that etcd could not serve a
// request for now: no leader, a leader change, a member gone, or an
// attempt out of time. The client retries only the requests that change
// nothing by itself.
func etcdTransient(err error) bool {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable
	}
	code := status.Code(err)
	return code == codes.Unavailable || code == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded)
}

// awaitDelete waits until key is deleted. A watch from a revision the
// store has passed is served from its history, on a timer of up to 100ms;
// concurrency.Mutex watches from the revision it read, which by then other
// contenders' writes have often passed. So the watch starts at the current
// revision, which the server serves as writes happen, and once it is in
// place a read says whether the key is already gone: a delete after that
// read comes through the watch.
func (e *Etcd) awaitDelete(ctx context.Context, key string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wr clientv3.WatchResponse
	for wr = range e.client.Watch(ctx, key, clientv3.WithCreatedNotify()) {
		if wr.Created {
			var resp *clientv3.GetResponse
			err := e.call(ctx, func(ctx context.Context) (err error) {
				resp, err = e.client.Get(ctx, key, clientv3.WithCountOnly())
				return err
			})
			if err != nil {
				return err
			}
			if resp.Count == 0 {
				return nil
			}
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return nil
			}
		}
	}
	return cmp.Or(wr.Err(), ctx.Err(), errors.New("watch closed"))
}

// session grants a lease of TTL under ctx, and keeps it alive until it is
// revoked. concurrency.NewSession would grant it under the client's ctx,
// which an unreachable etcd could hold up forever.
func (e *Etcd) session(ctx context.Context) (*concurrency.Session, error) {
	secs := int64(e.ttl / time.Second)
	// A lease granted by an attempt cut short holds no key, and expires.
	var lease *clientv3.LeaseGrantResponse
	err := e.call(ctx, func(ctx context.Context) (err error) {
		lease, err = e.client.Grant(ctx, secs)
		return err
	})
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
	attempts := 0
	err := e.call(ctx, func(ctx context.Context) error {
		attempts++
		_, err := e.client.Revoke(ctx, s.Lease())
		if attempts > 1 && errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return nil // an attempt cut short revoked it
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("etcd: revoke lease: %w", err)
	}
	return nil
}
