package testinfra

import (
	"os"
	"os/exec"
	"testing"
)

// Chromium returns the path of a Chromium browser for page tests:
// SHOP_TEST_CHROMIUM, or chromium on the PATH. Without one the test fails
// and says how to install it, as it does for a missing server.
func Chromium(t testing.TB) string {
	t.Helper()
	skipShort(t, "a browser")
	if p := os.Getenv("SHOP_TEST_CHROMIUM"); p != "" {
		return p
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf(`testinfra: no Chromium: %v
Provide one in either of these ways:
  - scripts/services.sh up (installs Debian's chromium) && eval "$(scripts/services.sh env)"
  - set SHOP_TEST_CHROMIUM to a Chromium or Chrome binary`, err)
	}
	return p
}
