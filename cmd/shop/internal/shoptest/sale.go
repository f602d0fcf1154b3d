package shoptest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/audit"
	"github.com/stockguard/shop/internal/backend"
	"github.com/stockguard/shop/internal/history"
	"github.com/stockguard/shop/internal/lincheck"
	"github.com/stockguard/shop/internal/testinfra"
)

// Sale is a strategy on three `shop serve` processes, over a database and
// a Redis, whose requests and answers the test records in the sale's
// history.
type Sale struct {
	DSN       string // the shops'
	GDB       *gorm.DB
	RedisAddr string // SHOP_REDIS_ADDR
	Strategy  string
	RDB       redis.UniversalClient
	Prefix    string // SHOP_REDIS_PREFIX
	Shops     []*Shop
	// Rec is the history of the sale of the SKUs last put on sale.
	Rec *history.Recorder
}

// Shop is one of a sale's `shop serve` processes.
type Shop struct {
	Base, Debug string
	Cmd         *exec.Cmd
}

// StartSale runs strategy on three shops, on the database at dsn, which
// the test reads through gdb, and the Redis at redisAddr: under Sentinel
// when env sets SHOP_REDIS_SENTINEL_MASTER. Their settings are short, for
// a fault to show within a test (SHOP_LOCK_TTL=1s, SHOP_CLAIM_IDLE=3s, 2 s
// requests), and env adds to them. It waits for its turn first
// (holdSale).
func StartSale(t *testing.T, strategy, dsn string, gdb *gorm.DB, redisAddr string, env []string) *Sale {
	t.Helper()
	holdSale(t) // released once its shops have stopped
	s := &Sale{DSN: dsn, GDB: gdb, RedisAddr: redisAddr, Strategy: strategy, Prefix: "shop:" + strategy + ":"}
	o := &redis.UniversalOptions{Addrs: strings.Split(redisAddr, ",")}
	for _, kv := range env {
		if name, ok := strings.CutPrefix(kv, "SHOP_REDIS_SENTINEL_MASTER="); ok {
			o.MasterName = name
		}
	}
	s.RDB = backend.NewRedis(o)
	t.Cleanup(func() { s.RDB.Close() })
	env = append([]string{"SHOP_MYSQL_DSN=" + s.DSN, "SHOP_REDIS_ADDR=" + redisAddr, "SHOP_REDIS_PREFIX=" + s.Prefix,
		"SHOP_ADMIN_TOKEN=secret", "SHOP_STRATEGY=" + strategy, "SHOP_REQUEST_TIMEOUT=2s", "SHOP_CLAIM_IDLE=3s",
		"SHOP_RECONCILE_INTERVAL=300ms", "SHOP_LOCK_TTL=1s"}, env...)
	// The three start at once, and each is waited for in turn.
	cmds, listen := make([]*exec.Cmd, 3), make([]<-chan string, 3)
	for i := range cmds {
		cmds[i], listen[i] = Spawn(t, "--debug=127.0.0.1:0", env)
	}
	for i, cmd := range cmds {
		addrs := Listening(t, listen[i], 2)
		s.Shops = append(s.Shops, &Shop{Base: "http://" + addrs[0], Debug: "http://" + addrs[1], Cmd: cmd})
	}
	return s
}

// Pause stops the shop (SIGSTOP) and confirms from /proc that it is
// stopped.
func (o *Shop) Pause(t *testing.T) bool {
	if err := o.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Error(err)
		return false
	}
	if err := testinfra.AwaitStopped(o.Cmd.Process.Pid); err != nil {
		t.Errorf("the shop: %v", err)
		return false
	}
	return true
}

// Heard is what an answer tells a sale's history (internal/history): the
// fault tests record every request they send, and what they were told.
type Heard struct {
	Code  int
	Type  string   // a problem's type
	Order int64    // a 201's order
	Short []string // the SKUs a sold-out named
	Value *int     // a stock read's available
}

// Recorded sends one request with send, and keeps it in rec as op, with
// when it was sent, when its answer came and what it was. err is a
// transport error or a timeout: an answer that says nothing.
func Recorded[R interface{ Heard() Heard }](rec *history.Recorder, op history.Op, send func() (R, error)) (R, error) {
	op.Call = rec.Now()
	r, err := send()
	op.Return = rec.Now()
	h := r.Heard()
	op.Answer = history.AnswerOf(h.Code, h.Type, err)
	switch {
	case op.Answer == history.Ordered:
		op.Order = h.Order
	case op.Answer == history.SoldOut:
		op.Short = h.Short
	case op.Kind == history.StockRead && op.Answer == history.OK:
		op.Value = h.Value
	}
	rec.Add(op)
	return r, err
}

// OrderBody is the body of op, an order: one SKU's, or a cart's.
func OrderBody(op history.Op) string {
	if len(op.Items) == 1 {
		return fmt.Sprintf(`{"sku":%q,"user_id":%q,"quantity":%d}`, op.Items[0].SKU, op.User, op.Items[0].Quantity)
	}
	lines := make([]string, len(op.Items))
	for i, it := range op.Items {
		lines[i] = fmt.Sprintf(`{"sku":%q,"quantity":%d}`, it.SKU, it.Quantity)
	}
	return fmt.Sprintf(`{"user_id":%q,"items":[%s]}`, op.User, strings.Join(lines, ","))
}

// CheckHistory checks the history of the sale of skus, once it is
// settled: it fails the test if an answer was impossible, and keeps the
// history and porcupine's page of it in the temporary directory.
func (s *Sale) CheckHistory(t *testing.T, skus ...string) {
	t.Helper()
	r, ops := s.Verdict(t, skus...)
	if r.Linearizable {
		return
	}
	name := filepath.Join(os.TempDir(), "shop-history-"+strings.Map(func(r rune) rune {
		if strings.ContainsRune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.", r) {
			return r
		}
		return '_'
	}, t.Name()+"-"+skus[0]))
	if err := history.WriteFile(name+".jsonl", ops); err != nil {
		t.Error(err)
	}
	if err := r.VisualizePath(name + ".html"); err != nil {
		t.Error(err)
	}
	t.Errorf("the history of %v: %s; kept in %s.jsonl, its page in %s.html", skus, r, name, name)
}

// Verdict reads the final state of skus, adds it to the history, and
// checks the history: against that final state alone, if the sale was
// checked before.
func (s *Sale) Verdict(t *testing.T, skus ...string) (lincheck.Result, []history.Op) {
	t.Helper()
	call := s.Rec.Now()
	final, err := audit.Final(t.Context(), s.GDB, skus, s.Rec.Now)
	if err != nil {
		t.Fatal(err)
	}
	s.Rec.AddFinal(call, final)
	ops := slices.DeleteFunc(s.Rec.Ops(), func(op history.Op) bool { return op.Kind == history.State && op.Call != call })
	r := lincheck.Check(ops, 30*time.Second)
	t.Logf("the history of %v: %s", skus, r)
	return r, ops
}
