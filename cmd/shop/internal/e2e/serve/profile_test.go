package serve

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestServeCPUProfile: with SHOP_CPU_PROFILE, `shop serve` writes its CPU
// profile, gzipped, to the file named with its process id for %p when it
// shuts down.
func TestServeCPUProfile(t *testing.T) {
	t.Parallel()
	r := testinfra.Redis(t)
	dir := t.TempDir()
	addrs, cmd := shoptest.Serve(t, "--debug=", []string{"SHOP_MYSQL_DSN=" + testinfra.MySQL(t), "SHOP_REDIS_ADDR=" + r.Addr, "SHOP_REDIS_PREFIX=" + r.Prefix,
		"SHOP_CPU_PROFILE=" + filepath.Join(dir, "shop-%p.pprof")})
	shoptest.Send(t, "GET", "http://"+addrs[0]+"/healthz", "")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("shop serve: %v", err)
	}
	name := filepath.Join(dir, fmt.Sprintf("shop-%d.pprof", cmd.Process.Pid))
	profile, err := os.ReadFile(name)
	if err != nil || !strings.HasPrefix(string(profile), "\x1f\x8b") {
		entries, _ := os.ReadDir(dir)
		t.Fatalf("%s: %d bytes %.20q, %v; want a gzipped profile (the directory holds %v)", name, len(profile), profile, err, entries)
	}
}
