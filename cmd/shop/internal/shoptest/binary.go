// Package shoptest runs the shop binary for the process-level tests of
// cmd/shop and of the packages under cmd/shop/internal/e2e: `shop serve`
// as child processes, with real signals, and the other commands. Every
// test package that runs it shares one binary, built once for the
// sources as they are (docs/tests.md).
package shoptest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// shopPackage is the package of the binary.
const shopPackage = "github.com/stockguard/shop/cmd/shop"

// binary returns the path of the shop binary that the tests run:
// SHOP_TEST_BIN, or the one built for the sources as they are. It is
// built without the race detector: the children are the system under
// test here, not the code under -race, which the in-process tests of the
// packages cover; built with it, each child would use several times the
// CPU and memory, and the fault tests start three at a time.
var binary = sync.OnceValues(func() (string, error) {
	if bin := os.Getenv("SHOP_TEST_BIN"); bin != "" {
		return bin, nil
	}
	return build()
})

// Bin returns the path of the shop binary that the tests run, or ends
// the test.
func Bin(t *testing.T) string {
	t.Helper()
	bin, err := binary()
	if err != nil {
		t.Fatalf("the shop binary: %v", err)
	}
	return bin
}

// unused is how long a cached binary stays once no test has run it.
const unused = 24 * time.Hour

// build returns the binary of the sources as they are, from a cache
// shared by every test process, keyed by a hash of what goes into it.
func build() (string, error) {
	key, err := sourceKey()
	if err != nil {
		return "", err
	}
	return cached(cacheDir(), "shop-"+key, func(out string) error {
		// go test puts its own go first on the PATH.
		if out, err := exec.Command("go", "build", "-o", out, shopPackage).CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, out)
		}
		return nil
	})
}

// cacheDir is where the test processes share the binary and their
// locks.
func cacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "stockguard-shop-test")
}

// cached returns the file name in dir, which compile writes when it is
// not there yet. `go test ./...` runs several test packages at once: the
// first to need the file compiles it while the others wait on its lock,
// and then use the same file. compile writes a temporary file, which
// becomes name by a rename: a file under name is always whole.
func cached(dir, name string, compile func(out string) error) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name)
	if used(bin) {
		return bin, nil
	}
	lock, err := os.OpenFile(bin+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close() // and with it the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("locking %s: %w", lock.Name(), err)
	}
	if used(bin) { // compiled while this one waited
		return bin, nil
	}
	tmp, err := os.CreateTemp(dir, "building-")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	if err := compile(tmp.Name()); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), bin); err != nil {
		return "", err
	}
	prune(dir)
	return bin, nil
}

// used reports whether bin is there, and marks it as used now.
func used(bin string) bool {
	now := time.Now()
	return os.Chtimes(bin, now, now) == nil
}

// prune removes the binaries, and their locks, that no test has run for
// a while: those of sources since changed.
func prune(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > unused {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// sourceKey hashes what the binary is built from: the go command's
// version and settings, and sources' files.
func sourceKey() (string, error) {
	h := sha256.New()
	env, err := goCommand("env", "GOVERSION", "GOOS", "GOARCH", "GOAMD64", "CGO_ENABLED", "GOEXPERIMENT", "GOFLAGS")
	if err != nil {
		return "", err
	}
	h.Write([]byte(env))
	root, files, err := sources()
	if err != nil {
		return "", err
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil && !errors.Is(err, fs.ErrNotExist) { // no go.sum without dependencies
			return "", err
		}
		rel, _ := filepath.Rel(root, name) // the root differs from one clone to another
		fmt.Fprintf(h, "%s %d\n", rel, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// sources returns the module's root and the files the binary is built
// from: go.mod and go.sum, which pin every dependency, and every file of
// this module that goes into it, embedded files too. Reading them here
// also tells go test that the result of a test that ran the binary
// depends on them.
func sources() (root string, files []string, err error) {
	gomod, err := goCommand("env", "GOMOD")
	if err != nil {
		return "", nil, err
	}
	root = filepath.Dir(strings.TrimSpace(gomod))
	list, err := goCommand("list", "-deps", "-f",
		`{{if and .Module .Module.Main}}{{range .GoFiles}}{{$.Dir}}/{{.}}{{"\n"}}{{end}}{{range .CgoFiles}}{{$.Dir}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$.Dir}}/{{.}}{{"\n"}}{{end}}{{end}}`,
		shopPackage)
	if err != nil {
		return "", nil, err
	}
	files = []string{filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum")}
	return root, append(files, strings.Split(strings.TrimSpace(list), "\n")...), nil
}

// goCommand runs the go command with args and returns what it printed.
func goCommand(args ...string) (string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("go", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", args[0], err, stderr.String())
	}
	return string(out), nil
}
