package db_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/stockguard/shop/internal/testinfra"
)

// TestSlowOpeningServesNextCaller: when opening a connection takes
// longer than any caller has left, as after a failover on a loaded
// machine, callers that come one after another, each giving up in turn
// as the buyers at the head of a SKU's queue do, are answered once the
// first connection has opened: it went on opening after its caller left,
// and served the next one. Each caller that gives up is answered its
// deadline's error, which a request answers busy. Were each opening to
// end with its caller, none would be answered.
func TestSlowOpeningServesNextCaller(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "it delays the connections to MySQL through a proxy")
	cfg, err := mysql.ParseDSN(testinfra.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	endpoint := testinfra.StartProxy(t, cfg.Addr)
	cfg.Addr = endpoint.Addr()
	shop := testinfra.OpenDB(t, cfg.FormatDSN())

	// The endpoint drops what it carried, as in a failover, and each
	// connection takes a second to open, five callers' deadlines.
	const opening, deadline, callers = time.Second, 200 * time.Millisecond, 20
	endpoint.Delay(opening)
	endpoint.Drop()
	answered := 0
	for i := range callers {
		ctx, cancel := context.WithTimeout(t.Context(), deadline)
		err := shop.WithContext(ctx).Exec("SELECT 1").Error
		cancel()
		switch {
		case err == nil:
			answered++
		case !errors.Is(err, context.DeadlineExceeded):
			t.Errorf("caller %d: %v, want its deadline's error", i, err)
		}
	}
	t.Logf("%d of %d callers answered, each with %v, while a connection took %v to open", answered, callers, deadline, opening)
	if answered == 0 {
		t.Errorf("no caller was answered: each connection's opening ended with its caller")
	}
}
