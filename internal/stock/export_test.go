package stock

// InQueue is how many buyers of sku are in q's queue: at the guard or
// waiting for their turn.
func (q *Queued) InQueue(sku string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if l := q.skus[sku]; l != nil {
		return l.refs
	}
	return 0
}
