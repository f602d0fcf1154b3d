package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/db"
)

const auditUsage = `usage: shop audit SKU... [--mysql DSN]

Audits each SKU from the database: available + the units of live orders must
equal the sum of its movements, and nothing be oversold. It fails on a broken
invariant. The columns (docs/quickstart.md#auditing-a-sku):
  RECEIVED   units put on sale: the sum of the SKU's stock movements (its
             initial stock, restocks, corrections)
  AVAILABLE  units left to sell
  SOLD       units of live orders: created, pending payment or paid
  PENDING    of SOLD, the units of orders waiting for payment, held until
             paid or cancelled
  DRIFT      AVAILABLE + SOLD - RECEIVED: units that no movement or order
             explains; 0 unless stock was lost or made up
  OVERSOLD   units sold beyond what was received; 0 unless oversold
  AUDIT      ok, or FAIL with the invariants broken listed below

`

// auditCmd audits SKUs from the database, as the demo and the bench audit
// their runs: each SKU's figures, with every unit explained by its
// movements and orders, and the invariants it breaks. It fails when any
// is broken, so that a script can tell.
func auditCmd(ctx context.Context, args []string, getenv config.Getenv, stdout, stderr io.Writer) error {
	fs := newFlags("audit", auditUsage, stderr)
	read := config.Flags(fs, getenv, nil, config.ForDB)
	skus, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(skus) == 0 {
		usageLine(stderr, auditUsage)
		return errors.New("name at least one SKU")
	}
	cfg, err := read()
	if err != nil {
		return err
	}
	if cfg.MySQLDSN == "" {
		return errors.New("shop audit reads the database named by SHOP_MYSQL_DSN (or --mysql), which is not set")
	}
	gdb, err := openDB(ctx, cfg.MySQLDSN)
	if err != nil {
		return err
	}
	defer db.Close(gdb)
	_, each, err := audit.SKUs(ctx, gdb, skus, nil, nil)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SKU\tRECEIVED\tAVAILABLE\tSOLD\tPENDING\tDRIFT\tOVERSOLD\tAUDIT")
	var broken []string
	for _, a := range each {
		v := a.Violations()
		verdict := map[bool]string{true: "ok", false: "FAIL"}[len(v) == 0]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", a.SKU, a.Received, a.Available, a.Sold, a.Pending, a.Drift, a.Oversold, verdict)
		for _, s := range v {
			broken = append(broken, a.SKU+": "+s)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range broken {
		fmt.Fprintln(stdout, "  "+s)
	}
	if len(broken) > 0 {
		return fmt.Errorf("%d invariants broken", len(broken))
	}
	return nil
}
