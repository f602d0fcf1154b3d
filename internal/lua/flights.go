package lua

import (
	"github.com/stockguard/shop/internal/groupcommit"
	"github.com/stockguard/shop/internal/order"
)

// A reservation whose commit failed, as when the database is out for
// longer than its buyer waits, stays in the log. The process that holds
// it tries it again in its next batches until the database takes it
// (groupcommit.Request.Retry), and a buyer's retry, at any shop, commits
// it too, or waits for it: no reservation waits for the claim timeout
// while a live process could persist it. The claim stays for those of
// dead processes (reconcile.go). See
// docs/strategies.md#through-a-database-outage.

// flight names a reservation being persisted: its bucket and its entry
// there.
type flight struct{ bucket, entry string }

// send puts a reservation through the writer as p, and waits for its
// answer as long as p.Ctx lasts. One this process holds in the log, it
// persists once: should p's batch not commit, the writer tries it again
// (Request.Retry), and a retry of its buyer here waits for that request
// rather than sending another. One that another process holds
// (reservation.foreign) is sent all the same, for a buyer's retry: the
// database's unique key on the buyer's key keeps it from a second order,
// and settle ends it here only once this request has made that order.
func (l *Lua) send(p *groupcommit.Request[reservation]) (order.Order, bool, error) {
	p.Retry = !p.Meta.foreign
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
	if !ok && p.Retry {
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

// settlers says which requests of a committed batch end their
// reservations in Redis: one per reservation, the one that made its order
// if one did. A reservation may come twice in one batch, its holder's
// request and a buyer's retry of it, and the second is a replay of the
// first's order: ended as a replay, its units would come back in Redis
// though the first's commit took them. A foreign reservation's request
// that did not make its order leaves it to the process that holds it,
// whose own batch may have just made it, or to the claim, for the same
// reason.
func settlers(batch []*groupcommit.Request[reservation], answers []order.Answer) []bool {
	made := make(map[flight]int, len(batch))
	for i, p := range batch {
		if a := answers[i]; a.Err == nil && !a.Replayed {
			made[flight{p.Meta.bucket, p.Meta.entry}] = i
		}
	}
	settles := make([]bool, len(batch))
	for i, p := range batch {
		f := flight{p.Meta.bucket, p.Meta.entry}
		first, ok := made[f]
		switch {
		case ok:
			settles[i] = first == i
		case p.Meta.foreign:
		default:
			made[f] = i
			settles[i] = true
		}
	}
	return settles
}
