package lua

import (
	"github.com/stockguard/shop/internal/groupcommit"
	"github.com/stockguard/shop/internal/order"
)

// A reservation whose commit failed, as when the database is out for
// longer than its buyer waits, stays in the log. The process that holds
// it tries it again in its next batches until the database takes it
// (groupcommit.Request.Retry): no reservation waits for the claim timeout
// while a live process could persist it. The claim stays for those of
// dead processes (reconcile.go). See
// docs/strategies.md#through-a-database-outage.

// flight names a reservation being persisted: its bucket and its entry
// there.
type flight struct{ bucket, entry string }

// send puts a reservation that this process holds in the log through the
// writer as p, and waits for its answer as long as p.Ctx lasts. It
// persists each once: should p's batch not commit, the writer tries it
// again (Request.Retry), and a claim of it here waits for that request
// rather than sending another.
func (l *Lua) send(p *groupcommit.Request[reservation]) (order.Order, bool, error) {
	p.Retry = true
	f := flight{p.Meta.bucket, p.Meta.entry}
	l.flying.Lock()
	first, ok := l.flights[f]
	if ok {
		select {
		case <-first.Done():
			ok = false // answered, and never committed: its buyer asks anew
		default:
		}
	}
	if !ok {
		l.flights[f] = p
	}
	l.flying.Unlock()
	if ok {
		return first.Wait(p.Ctx)
	}
	return l.w.Submit(p)
}

// landed forgets the flights of a batch that has committed.
func (l *Lua) landed(batch []*groupcommit.Request[reservation]) {
	l.flying.Lock()
	defer l.flying.Unlock()
	for _, p := range batch {
		f := flight{p.Meta.bucket, p.Meta.entry}
		if l.flights[f] == p {
			delete(l.flights, f)
		}
	}
}
