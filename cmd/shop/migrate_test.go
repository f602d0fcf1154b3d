package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
	"github.com/stockguard/shop/internal/db"
	"github.com/stockguard/shop/internal/testinfra"
)

// shopEnv is the environment of a shop on dsn and a Redis of its own.
func shopEnv(t *testing.T, dsn string, env ...string) []string {
	t.Helper()
	r := testinfra.Redis(t)
	return append([]string{"SHOP_MYSQL_DSN=" + dsn, "SHOP_REDIS_ADDR=" + r.Addr, "SHOP_REDIS_PREFIX=" + r.Prefix, "SHOP_ADMIN_TOKEN=secret"}, env...)
}

// loadLegacy fills the database dsn with internal/db/testdata's dump of a
// database made before versioned migrations.
func loadLegacy(t *testing.T, dsn string) {
	t.Helper()
	dump, err := os.ReadFile("../../internal/db/testdata/legacy-mysql.sql")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MultiStatements = true
	sdb, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	if _, err := sdb.ExecContext(t.Context(), string(dump)); err != nil {
		t.Fatalf("loading the legacy dump: %v", err)
	}
}

// legacyTables are the fixture's tables with rows, and how they are read.
var legacyTables = []string{"stock_items", "orders", "payments", "order_events", "user_purchases"}

func counts(t *testing.T, gdb *gorm.DB) map[string]int64 {
	t.Helper()
	n := map[string]int64{}
	for _, table := range legacyTables {
		var c int64
		if err := gdb.Table(table).Count(&c).Error; err != nil {
			t.Fatal(err)
		}
		n[table] = c
	}
	return n
}

// TestServeAdoptsLegacyDatabase: the new `shop serve`, with no step by
// hand, serves a database that the release before versioned migrations
// made, with orders, carts, payments and events in it: adopted at version
// 1, every row still there, and every order served by the API as it is
// stored.
func TestServeAdoptsLegacyDatabase(t *testing.T) {
	t.Parallel()
	testinfra.NeedsRealServers(t, "the fixture is a MariaDB dump")
	dsn := testinfra.MySQL(t)
	loadLegacy(t, dsn)
	gdb := testinfra.OpenDB(t, dsn)
	before := counts(t, gdb)
	if before["orders"] < 8 || before["payments"] < 2 || before["order_events"] < 10 {
		t.Fatalf("the fixture holds %v, fewer rows than it was made with", before)
	}
	var unpublished []string
	if err := gdb.Raw(`SELECT id FROM order_events WHERE published_at IS NULL ORDER BY id`).Scan(&unpublished).Error; err != nil || len(unpublished) == 0 {
		t.Fatalf("the fixture's unpublished events: %v, %v; want one at least", unpublished, err)
	}
	env := shopEnv(t, dsn, "SHOP_PAYMENT_WINDOW=15m", "SHOP_EVENTS_RETENTION=87600h")
	base, _ := shoptest.Start(t, env...)

	if st, err := db.ReadStatus(t.Context(), gdb); err != nil || st.Version != st.Latest() || st.Dirty {
		t.Errorf("after serve: %+v, %v; want the latest version, clean", st, err)
	}
	if after := counts(t, gdb); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("rows before %v, after %v", before, after)
	}
	var heads []struct {
		ID     int64
		Status string
		Lines  int `gorm:"column:line_count"`
	}
	if err := gdb.Raw(`SELECT id, status, line_count FROM orders WHERE cart_id IS NULL ORDER BY id`).Scan(&heads).Error; err != nil {
		t.Fatal(err)
	}
	carts := 0
	for _, h := range heads {
		code, body := shoptest.Send(t, "GET", fmt.Sprintf("%s/api/v1/orders/%d", base, h.ID), "")
		var o struct {
			Status string
			Items  []struct{ SKU string }
		}
		if err := json.Unmarshal([]byte(body), &o); code != http.StatusOK || err != nil || o.Status != h.Status || len(o.Items) != h.Lines {
			t.Errorf("order %d: %d %s; want 200, %s, %d lines", h.ID, code, body, h.Status, h.Lines)
		}
		if h.Lines > 1 {
			carts++
		}
	}
	if carts < 2 {
		t.Errorf("%d carts of several lines in the fixture, want 2", carts)
	}
	legacyPublished(t, env, unpublished)
	var stock []struct {
		SKU       string
		Available int
	}
	if err := gdb.Raw(`SELECT sku, available FROM stock_items`).Scan(&stock).Error; err != nil {
		t.Fatal(err)
	}
	for _, s := range stock {
		code, body := shoptest.Send(t, "GET", base+"/api/v1/stock/"+s.SKU, "")
		if code != http.StatusOK || !strings.Contains(body, fmt.Sprintf(`"available":%d`, s.Available)) {
			t.Errorf("stock %s: %d %s; want %d available", s.SKU, code, body, s.Available)
		}
	}
}

// legacyPublished waits until the events the legacy relay left unpublished
// are in the stream of the shop that env starts: its relay's cursor
// starts before them.
func legacyPublished(t *testing.T, env, ids []string) {
	t.Helper()
	cfg := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		cfg[k] = v
	}
	rdb := redis.NewClient(&redis.Options{Addr: cfg["SHOP_REDIS_ADDR"]})
	defer rdb.Close()
	var got []string
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		msgs, err := rdb.XRange(t.Context(), cfg["SHOP_REDIS_PREFIX"]+"events", "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, m := range msgs {
			got = append(got, fmt.Sprint(m.Values["id"]))
		}
		if !slices.ContainsFunc(ids, func(id string) bool { return !slices.Contains(got, id) }) {
			return
		}
	}
	t.Errorf("the stream has the events %v; want the ones left unpublished, %v, among them", got, ids)
}

// TestServeThreeAtOnce: three `shop serve` start at once on one empty
// database, on MySQL and on one SQLite file: all three serve, the schema
// is at the latest version, and an order placed through one is read
// through another.
func TestServeThreeAtOnce(t *testing.T) {
	t.Parallel()
	dsns := map[string]string{"sqlite": db.SQLitePrefix + filepath.Join(t.TempDir(), "shop.db")}
	if !testinfra.Embedded() {
		dsns["mysql"] = testinfra.MySQL(t)
	}
	for name, dsn := range dsns {
		t.Run(name, func(t *testing.T) {
			env := shopEnv(t, dsn)
			var addrs []<-chan string
			for range 3 {
				_, addr := shoptest.Spawn(t, "--debug=", env)
				addrs = append(addrs, addr)
			}
			var bases []string
			for _, addr := range addrs {
				bases = append(bases, "http://"+shoptest.Listening(t, addr, 1)[0])
			}
			st, err := db.ReadStatus(t.Context(), testinfra.OpenDB(t, dsn))
			if err != nil || st.Version != st.Latest() || st.Dirty {
				t.Fatalf("after three started at once: %+v, %v", st, err)
			}
			if code, body := shoptest.Send(t, "PUT", bases[0]+"/api/v1/stock/k3", `{"quantity":3}`, "Authorization", "Bearer secret"); code != http.StatusOK {
				t.Fatalf("put stock: %d %s", code, body)
			}
			code, body := shoptest.Send(t, "POST", bases[1]+"/api/v1/orders", `{"sku":"k3","user_id":"ann","quantity":1}`, "Idempotency-Key", "k3")
			if code != http.StatusCreated {
				t.Fatalf("order: %d %s", code, body)
			}
			if code, body := shoptest.Send(t, "GET", bases[2]+"/api/v1/stock/k3", ""); !strings.Contains(body, `"available":2`) {
				t.Errorf("stock through the third: %d %s; want 2 available", code, body)
			}
		})
	}
}

// serveFails runs `shop serve` with env, expects it to exit with an
// error, and returns what it printed. A refusal is a connection to MySQL,
// a few queries and an exit, under a second on a quiet machine; refuseWait
// is only there to end a child that never refuses (one waiting for a lock
// would wait up to the migrations' 5 minutes), and is long enough for a
// machine that other builds load heavily. Such a child gets SIGQUIT, and
// its goroutine dump is in the failure's output. The binary is built, or
// waited for, before refuseWait starts: a build on a loaded machine can
// take longer than refuseWait by itself.
func serveFails(t *testing.T, env []string) string {
	t.Helper()
	const refuseWait = 2 * time.Minute
	bin := shoptest.Bin(t)
	ctx, cancel := context.WithTimeout(t.Context(), refuseWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--debug=")
	shoptest.DumpOnCancel(cmd)
	cmd.Env = append(append(os.Environ(), "SHOP_HTTP_ADDR=127.0.0.1:0"), env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("shop serve did not refuse to start within %v: %v\n%s", refuseWait, err, out)
	}
	t.Logf("shop serve refused in %v", time.Since(start).Round(time.Millisecond))
	return string(out)
}

// TestServeRefusesSchema: `shop serve` refuses a schema behind (with
// SHOP_MIGRATE=off), ahead, or dirty, and says what to do.
func TestServeRefusesSchema(t *testing.T) {
	t.Parallel()
	dsn := testinfra.MySQL(t)
	gdb := testinfra.OpenDB(t, dsn)
	env := shopEnv(t, dsn)
	latest := latestVersion(t, gdb)
	if out := serveFails(t, append(env, "SHOP_MIGRATE=off")); !strings.Contains(out, "lacks versions 1, ") || !strings.Contains(out, fmt.Sprintf("%d; run `shop migrate up`", latest)) {
		t.Errorf("behind, SHOP_MIGRATE=off: %s", out)
	}
	// A later release's schema: this one's force refuses a version it lacks.
	if err := db.MigrateForce(t.Context(), gdb, latest); err != nil {
		t.Fatal(err)
	}
	if err := gdb.Exec(`UPDATE schema_migrations SET version = 99`).Error; err != nil {
		t.Fatal(err)
	}
	if out := serveFails(t, env); !strings.Contains(out, "schema ahead of this release: it is at version 99") {
		t.Errorf("ahead: %s", out)
	}
	if err := gdb.Exec(`UPDATE schema_migrations SET version = ?, dirty = ?`, latest, true).Error; err != nil {
		t.Fatal(err)
	}
	if out := serveFails(t, env); !strings.Contains(out, fmt.Sprintf("`shop migrate force %d`", latest)) {
		t.Errorf("dirty: %s", out)
	}
}

// latestVersion is the newest migration this release has for gdb's dialect.
func latestVersion(t *testing.T, gdb *gorm.DB) int {
	t.Helper()
	vs, err := db.Versions(gdb)
	if err != nil {
		t.Fatal(err)
	}
	return vs[len(vs)-1]
}

// TestMigrateCommand: status on an empty database prints that state;
// after up, it shows the latest version.
func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	dsn := testinfra.MySQL(t)
	getenv := func(k string) string { return map[string]string{"SHOP_MYSQL_DSN": dsn}[k] }
	migrate := func(args ...string) (string, error) {
		var out, errs bytes.Buffer
		err := run(t.Context(), append([]string{"migrate"}, args...), getenv, &out, &errs)
		return out.String(), err
	}
	gdb := testinfra.OpenDB(t, dsn)
	vs, _ := db.Versions(gdb)
	latest := fmt.Sprintf("version %d\n", latestVersion(t, gdb))
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"status"}, "schema: empty, no version\nlatest: " + latest + "       1  pending\n"},
		{[]string{"up"}, "schema: " + latest + "latest: " + latest + "       1  applied\n"},
		{[]string{"status"}, "schema: " + latest},
		{[]string{"down", fmt.Sprint(len(vs))}, "schema: empty, no version\n"},
		{[]string{"force", "1"}, "schema: version 1\n"},
	}
	for _, s := range steps {
		if out, err := migrate(s.args...); err != nil || !strings.HasPrefix(out, s.want) {
			t.Errorf("shop migrate %v: %v\n%s\nwant it to start with\n%s", s.args, err, out, s.want)
		}
	}
	for _, bad := range [][]string{{}, {"sideways"}, {"down"}, {"down", "x"}, {"force", "1", "2"}} {
		if _, err := migrate(bad...); err == nil {
			t.Errorf("shop migrate %v: no error", bad)
		}
	}
}

// TestMigrateUnknownVersion: force refuses a version this release does not
// have and changes nothing; status warns of a schema at one; a wrong
// argument count prints one line of usage, and -h lists --mysql alone.
func TestMigrateUnknownVersion(t *testing.T) {
	t.Parallel()
	dsn := db.SQLitePrefix + filepath.Join(t.TempDir(), "shop.db")
	getenv := func(k string) string { return map[string]string{"SHOP_MYSQL_DSN": dsn}[k] }
	migrate := func(args ...string) (string, string, error) {
		var out, errs bytes.Buffer
		err := run(t.Context(), append([]string{"migrate"}, args...), getenv, &out, &errs)
		return out.String(), errs.String(), err
	}
	if _, _, err := migrate("up"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := migrate("force", "99"); err == nil || !strings.Contains(err.Error(), "this release has no version 99") {
		t.Errorf("shop migrate force 99: %v, want it refused", err)
	}
	gdb := testinfra.OpenDB(t, dsn)
	if st, err := db.ReadStatus(t.Context(), gdb); err != nil || st.Version != latestVersion(t, gdb) {
		t.Errorf("after a refused force: %+v, %v; want the latest version kept", st, err)
	}
	if err := gdb.Exec("UPDATE schema_migrations SET version = 99").Error; err != nil {
		t.Fatal(err)
	}
	if out, _, err := migrate("status"); err != nil || !strings.Contains(out, "warning: db: schema ahead of this release: it is at version 99") {
		t.Errorf("shop migrate status at version 99: %v\n%s\nwant a warning", err, out)
	}
	for _, bad := range [][]string{{"down"}, {"force"}, {"up", "1"}} {
		_, errs, err := migrate(bad...)
		if err == nil || errs != "usage: shop migrate up | down N | status | force V [flags]\n" {
			t.Errorf("shop migrate %v: %v, printed\n%s\nwant one line of usage", bad, err, errs)
		}
	}
	if _, errs, _ := migrate("-h"); strings.Count(errs, "\n  -") != 1 || !strings.Contains(errs, "-mysql") {
		t.Errorf("shop migrate -h lists other flags than --mysql:\n%s", errs)
	}
}
