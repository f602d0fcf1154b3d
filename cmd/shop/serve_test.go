package main

import (
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestListenDebugTaken: when the debug listener cannot open, listen fails
// and leaves nothing listening on the public address.
func TestListenDebugTaken(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	public := free.Addr().String()
	free.Close()

	cfg := config.Config{HTTPAddr: public, DebugAddr: taken.Addr().String()}
	err = listen(t.Context(), slog.New(slog.DiscardHandler), cfg, http.NotFoundHandler())
	if err == nil {
		t.Fatal("listen succeeded on a debug address in use")
	}
	ln, err := net.Listen("tcp", public)
	if err != nil {
		t.Fatalf("the public address is still held after listen failed: %v", err)
	}
	ln.Close()
}

// TestDebugProfile: the debug listener serves a CPU profile that lasts
// longer than its write timeout, whole: pprof moves the write deadline on
// by the profile's length.
func TestDebugProfile(t *testing.T) {
	t.Parallel()
	r := testinfra.Redis(t)
	addrs, _ := runShop(t, "--debug=127.0.0.1:0", []string{"SHOP_MYSQL_DSN=" + testinfra.MySQL(t), "SHOP_REDIS_ADDR=" + r.Addr, "SHOP_REDIS_PREFIX=" + r.Prefix,
		"SHOP_HTTP_READ_TIMEOUT=1s", "SHOP_REQUEST_TIMEOUT=1s", "SHOP_HTTP_WRITE_TIMEOUT=2s"})
	code, profile := send(t, "GET", "http://"+addrs[1]+"/debug/pprof/profile?seconds=3", "")
	if code != http.StatusOK || !strings.HasPrefix(profile, "\x1f\x8b") {
		t.Errorf("a 3 s profile under a 2 s write timeout: %d, %d bytes %.40q; want 200 and a gzipped profile", code, len(profile), profile)
	}
}
