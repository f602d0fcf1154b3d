package config_test

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/stockguard/shop/internal/config"
)

// Every bad address or port is refused when the config is read, and each
// error names the setting as it was given: the flag when a flag set it,
// else the variable.
func TestErrorsNameTheSettingAsGiven(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:3306)/d", "SHOP_LOCK_TTL": "soon"}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		args []string
		want []string // each must be in the error
		not  string   // and this must not
	}{
		{[]string{"--strategy=lau", "--lock-ttl=1s"}, []string{`--strategy: unknown strategy "lau"`}, "SHOP_STRATEGY"},
		{[]string{"--http=:99999", "--lock-ttl=1s"}, []string{`--http: ":99999" is not host:port, with a port from 0 to 65535`}, "SHOP_HTTP_ADDR"},
		{[]string{"--debug=localhost:http", "--lock-ttl=1s"}, []string{`--debug: "localhost:http" is not host:port`}, "SHOP_DEBUG_ADDR"},
		{[]string{"--redis=127.0.0.1:70000", "--lock-ttl=1s"}, []string{`--redis: "127.0.0.1:70000" is not host:port`}, "SHOP_REDIS_ADDR"},
		{[]string{"--zk=127.0.0.1:-1", "--lock-ttl=1s"}, []string{`--zk: "127.0.0.1:-1" is not host:port`}, "SHOP_ZK_ADDRS"},
		{nil, []string{`SHOP_LOCK_TTL: "soon" is not a duration`}, "--lock-ttl"},
		{[]string{"--lock-ttl=later"}, []string{`--lock-ttl: "later" is not a duration`}, "SHOP_LOCK_TTL"},
	}
	for _, tt := range tests {
		_, err := config.Load(tt.args, getenv, strategies, io.Discard)
		for _, want := range tt.want {
			if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), tt.not) {
				t.Errorf("%v: %v, want %q and no %q", tt.args, err, want, tt.not)
			}
		}
	}
	env = map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:3306)/d", "SHOP_HTTP_ADDR": "127.0.0.1:99999"}
	if _, err := config.Load(nil, getenv, strategies, io.Discard); err == nil || !strings.Contains(err.Error(), "SHOP_HTTP_ADDR: ") {
		t.Errorf("SHOP_HTTP_ADDR=127.0.0.1:99999: %v", err)
	}
}

// An empty SHOP_DEBUG_ADDR turns the debug listener off; unset, it has its
// default.
func TestEmptyDebugAddr(t *testing.T) {
	getenv := func(k string) string { return map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:3306)/d"}[k] }
	c, err := config.Load(nil, getenv, strategies, io.Discard)
	if err != nil || c.DebugAddr != "127.0.0.1:6060" {
		t.Fatalf("unset: %q, %v", c.DebugAddr, err)
	}
	t.Setenv("SHOP_DEBUG_ADDR", "")
	if c, err = config.Load(nil, getenv, strategies, io.Discard); err != nil || c.DebugAddr != "" {
		t.Errorf("SHOP_DEBUG_ADDR empty: %q, %v; want the listener off", c.DebugAddr, err)
	}
}

// A secret's value, from the environment, never shows in -h, and a
// command line shown in a report has its secrets masked.
func TestSecretsMaskedInHelpAndArgs(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SHOP_MYSQL_DSN": "acc:dbpw1@tcp(db:3306)/shop", "SHOP_ADMIN_TOKEN": "admintok1",
		"SHOP_JWT_SECRET": "jwtsecret1", "SHOP_PAYMENT_SECRET": "paysecret1"}
	var help strings.Builder
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(&help)
	config.Flags(fs, func(k string) string { return env[k] }, nil, config.ForServe)
	fs.PrintDefaults()
	for _, s := range []string{"dbpw1", "admintok1", "jwtsecret1", "paysecret1"} {
		if strings.Contains(help.String(), s) {
			t.Errorf("-h shows %q:\n%s", s, help.String())
		}
	}
	if !strings.Contains(help.String(), `(default "acc:*****@tcp(db:3306)/shop")`) {
		t.Errorf("-h does not show the DSN masked:\n%s", help.String())
	}
	args := []string{"--mysql", "acc:dbpw2@tcp(db:3306)/shop", "--mysql=acc:dbpw3@tcp(db:3306)/shop", "-admin-token", "tok2",
		"--jwt-secret=sec2", "--payment-secret", "pay2", "--stock", "5", "sqlite"}
	got := strings.Join(config.MaskArgs(args), " ")
	want := "--mysql acc:*****@tcp(db:3306)/shop --mysql=acc:*****@tcp(db:3306)/shop -admin-token ***** --jwt-secret=***** --payment-secret ***** --stock 5 sqlite"
	if got != want {
		t.Errorf("MaskArgs:\n got %s\nwant %s", got, want)
	}
}
