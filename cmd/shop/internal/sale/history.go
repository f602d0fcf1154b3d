package sale

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/history"
	"github.com/stockguard/shop/internal/lincheck"
)

// checkFor bounds the search of one history's check: a burst's, of
// thousands of buyers, takes well under a second where no unit comes
// back (internal/lincheck's exact check).
const checkFor = time.Minute

// checkHistory reads the final state of skus into rec, when the runner
// has the database, checks the history, and writes it with its page into
// the plan's HistoryDir, as <name>.jsonl and <name>.html.
func (r runner) checkHistory(ctx context.Context, rec *history.Recorder, name string, skus []string) (*lincheck.Result, error) {
	if r.db != nil {
		call := rec.Now()
		final, err := audit.Final(ctx, r.db, skus, rec.Now)
		if err != nil {
			return nil, err
		}
		rec.AddFinal(call, final)
	}
	ops := rec.Ops()
	res := lincheck.Check(ops, checkFor)
	if r.plan.HistoryDir == "" {
		return &res, nil
	}
	path := filepath.Join(r.plan.HistoryDir, name)
	if err := history.WriteFile(path+".jsonl", ops); err != nil {
		return nil, err
	}
	if err := res.VisualizePath(path + ".html"); err != nil {
		return nil, fmt.Errorf("sale: the history's page: %w", err)
	}
	return &res, nil
}
