package sale

import (
	"context"
	"strconv"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/loadtest"
)

// connectionsEvery is how often a surge reads the database's connections.
const connectionsEvery = 100 * time.Millisecond

// connectionsSource says what watchConnections reads. Max_used_connections
// would give the true peak, but only FLUSH STATUS resets it, for every
// client of the server; Threads_connected is read instead, and a peak
// shorter than the interval can fall between two reads.
var connectionsSource = "SHOW GLOBAL STATUS LIKE 'Threads_connected', read every " + connectionsEvery.String() +
	" during the surge: every client of the server, this run's own reader among them"

// watchConnections reads how many connections the MySQL server gdb talks
// to has open, once now and then every connectionsEvery, until stop is
// called, which returns the reading before and the peak. With no database,
// or an SQLite one, it reads nothing, and stop returns nil.
func watchConnections(ctx context.Context, gdb *gorm.DB) (stop func() *loadtest.Connections) {
	if gdb == nil || db.IsSQLite(gdb) {
		return func() *loadtest.Connections { return nil }
	}
	read := func() (int, bool) {
		var name, value string
		if gdb.WithContext(ctx).Raw(`SHOW GLOBAL STATUS LIKE 'Threads_connected'`).Row().Scan(&name, &value) != nil {
			return 0, false
		}
		n, err := strconv.Atoi(value)
		return n, err == nil
	}
	c := &loadtest.Connections{Source: connectionsSource}
	before, ok := read()
	if !ok {
		return func() *loadtest.Connections { return nil }
	}
	c.Before, c.Peak, c.Samples = before, before, 1
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(connectionsEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				if n, ok := read(); ok {
					c.Peak, c.Samples = max(c.Peak, n), c.Samples+1
				}
			}
		}
	})
	return func() *loadtest.Connections {
		close(done)
		wg.Wait()
		return c
	}
}
