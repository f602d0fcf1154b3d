package lock

import (
	"context"
	"sync"
)

// Local locks with a mutex per name inside this process: seed 002's
// single-machine lock. It is correct while one process serves a SKU and
// wrong as soon as several do, because each process has its own mutexes and
// its own token counter. Its tokens increase within the process only, so
// its leases do not fence (Lease.Fences): across instances it oversells,
// as a single-machine lock does. Its leases never expire.
type Local struct {
	locker

	mu    sync.Mutex
	locks map[string]*localLock
	next  int64 // the last token handed out, for every name
}

var _ Locker = (*Local)(nil)

// localLock is one name's mutex, kept while anyone holds or awaits it.
type localLock struct {
	sem   chan struct{} // holds one value while the lock is held
	token int64         // the holder's token; 0 when free
	refs  int           // holders and waiters
}

// NewLocal returns a Locker for one process.
func NewLocal() *Local {
	l := &Local{locks: make(map[string]*localLock)}
	l.locker = newLocker("local", l, nil, false)
	return l
}

func (l *Local) grant(ctx context.Context, name string, wait bool) (grant, error) {
	l.mu.Lock()
	e := l.locks[name]
	if e == nil {
		e = &localLock{sem: make(chan struct{}, 1)}
		l.locks[name] = e
	}
	e.refs++
	l.mu.Unlock()

	select {
	case e.sem <- struct{}{}:
	default:
		if !wait {
			l.unref(name, e)
			return grant{}, ErrLocked
		}
		select {
		case e.sem <- struct{}{}:
		case <-ctx.Done():
			l.unref(name, e)
			return grant{}, context.Cause(ctx)
		}
	}

	l.mu.Lock()
	l.next++
	token := l.next
	e.token = token
	l.mu.Unlock()
	return grant{token: token, release: func(context.Context) error {
		l.mu.Lock()
		if e.token != token {
			l.mu.Unlock()
			return ErrNotHeld
		}
		e.token = 0
		l.mu.Unlock()
		<-e.sem
		l.unref(name, e)
		return nil
	}}, nil
}

// unref forgets the mutex of name once nobody holds or awaits it.
func (l *Local) unref(name string, e *localLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.refs--; e.refs == 0 {
		delete(l.locks, name)
	}
}
