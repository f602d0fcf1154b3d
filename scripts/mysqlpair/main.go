// Command mysqlpair starts MariaDB servers of its own on loopback, from
// Debian's binaries, for `shop bench` against a replicated database
// (docs/benchmark.md): a primary and its replica, semi-synchronous
// (AFTER_SYNC) or asynchronous, or one server alone with the same
// settings. It prints the shop's DSN on the primary, as SHOP_MYSQL_DSN=…,
// and keeps the servers until it is interrupted; then it prints the
// primary's commit and semi-sync counters.
//
//	go run ./scripts/mysqlpair -mode semisync
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/stockguard/shop/internal/mariadb"
)

func main() {
	mode := flag.String("mode", "semisync", "semisync, async, or single: the primary alone, its binary log on")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *mode); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, mode string) error {
	if mode != "semisync" && mode != "async" && mode != "single" {
		return fmt.Errorf("mysqlpair: -mode %q: want semisync, async or single", mode)
	}
	dir, err := os.MkdirTemp("", "stockguard-mysqlpair-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	start, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	p, err := mariadb.StartPair(start, dir)
	defer p.Close()
	if err != nil {
		return err
	}
	switch mode {
	case "semisync":
		err = mariadb.SemiSync(start, p.Admin[0], true, 10*time.Second)
		if err == nil {
			err = mariadb.AwaitSemiSync(start, p.Admin[0])
		}
	case "single":
		p.Procs[1].Kill()
	}
	if err != nil {
		return err
	}
	if _, err := p.Admin[0].ExecContext(start, "CREATE DATABASE shop"); err != nil {
		return err
	}
	fmt.Printf("SHOP_MYSQL_DSN=%s\n", p.Nodes[0].DSN(mariadb.Shop, "shop"))
	fmt.Fprintf(os.Stderr, "mysqlpair: %s on %s; ^C stops it\n", mode, p.Nodes[0].Addr)
	<-ctx.Done()
	return printStatus(p.Admin[0])
}

// printStatus prints what the primary counted: its commits, and under
// semi-sync those a replica acknowledged and how long they waited for it
// on average (µs).
func printStatus(primary *sql.DB) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := primary.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Binlog_commits', 'Binlog_group_commits', "+
		"'Rpl_semi_sync_master_yes_tx', 'Rpl_semi_sync_master_no_tx', 'Rpl_semi_sync_master_tx_avg_wait_time', 'Rpl_semi_sync_master_net_avg_wait_time')")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return err
		}
		fmt.Printf("%s=%s\n", name, value)
	}
	return rows.Err()
}
