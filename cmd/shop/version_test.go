package main

import (
	"io"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/stockguard/shop/internal/buildinfo"
)

// TestVersion: shop version prints the build, the metrics carry it as
// shop_build_info, and serve's start log names it.
func TestVersion(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := run(t.Context(), []string{"version"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	b := buildinfo.Read()
	// A test binary is built from this module's checkout: its version is
	// (devel).
	if want := "shop (devel), revision " + b.Revision + ", " + runtime.Version() + "\n"; out.String() != want {
		t.Errorf("shop version: %q, want %q", out.String(), want)
	}
	if err := run(t.Context(), []string{"version", "now"}, func(string) string { return "" }, io.Discard, io.Discard); err == nil {
		t.Error("shop version now: no error")
	}

	rec := httptest.NewRecorder()
	debugMux().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	want := `shop_build_info{goversion="` + runtime.Version() + `",revision="` + b.Revision + `",version="(devel)"} 1`
	if !strings.Contains(rec.Body.String(), want) {
		t.Errorf("/metrics lacks %s", want)
	}

	var log strings.Builder
	env := map[string]string{"SHOP_MYSQL_DSN": "u:p@tcp(127.0.0.1:1)/shop?timeout=200ms", "SHOP_HTTP_ADDR": "127.0.0.1:0", "SHOP_DEBUG_ADDR": "127.0.0.1:0"}
	run(t.Context(), []string{"serve"}, func(k string) string { return env[k] }, io.Discard, &log)
	if want := `"build":{"version":"(devel)","revision":"` + b.Revision + `","goversion":"` + runtime.Version() + `"}`; !strings.Contains(log.String(), want) {
		t.Errorf("start log lacks %s:\n%s", want, log.String())
	}
}
