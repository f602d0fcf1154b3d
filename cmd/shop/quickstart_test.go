package main

import (
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stockguard/shop/cmd/shop/internal/shoptest"
	"github.com/stockguard/shop/internal/testinfra"
)

// TestQuickstart runs docs/quickstart.md as written, on real MySQL and
// Redis (its own database and key prefix in place of the page's): each
// `go run ./cmd/shop` line through run, the serve line as a child
// process, each curl line as its request, which must succeed; and the
// audit must print the table the page shows.
func TestQuickstart(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../../docs/quickstart.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```(\\w*)\n(.*?)```").FindAllStringSubmatch(string(page), -1)
	dsn, redis := testinfra.MySQL(t), testinfra.Redis(t)
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	var base, audited string
	for i, b := range blocks {
		if b[1] != "sh" {
			if strings.HasPrefix(b[2], "SKU ") && audited != "" && audited != b[2] {
				t.Errorf("shop audit printed\n%s\nthe page shows\n%s", audited, b[2])
			}
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(b[2]), "\n") {
			args := words(line)
			switch {
			case args[0] == "export":
				k, v, _ := strings.Cut(args[1], "=")
				env[k] = v
				env["SHOP_MYSQL_DSN"], env["SHOP_REDIS_ADDR"], env["SHOP_REDIS_PREFIX"] = dsn, redis.Addr, redis.Prefix
			case strings.HasPrefix(line, "go run ./cmd/shop serve"):
				var envs []string
				for k, v := range env {
					envs = append(envs, k+"="+v)
				}
				base, _ = shoptest.Start(t, envs...)
			case strings.HasPrefix(line, "go run ./cmd/shop "):
				var out strings.Builder
				if err := run(t.Context(), args[3:], getenv, &out, io.Discard); err != nil {
					t.Fatalf("block %d: %s: %v\n%s", i, line, err, out.String())
				}
				if args[3] == "audit" {
					audited = out.String()
				}
			case args[0] == "curl":
				code, body := curl(t, base, args[1:])
				if code >= 300 {
					t.Errorf("%s: %d %s", line, code, body)
				}
			default:
				t.Errorf("block %d: %q is not a command this test runs", i, line)
			}
		}
	}
	if base == "" || audited == "" {
		t.Errorf("the page started no shop (%q) or ran no audit (%q)", base, audited)
	}
}

// words splits a shell line into its words: bare, or in single quotes;
// an unquoted # starts a comment.
func words(line string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`'([^']*)'|(\S+)`).FindAllStringSubmatch(line, -1) {
		if strings.HasPrefix(m[2], "#") {
			break
		}
		out = append(out, m[1]+m[2])
	}
	return out
}

// curl sends the request of a curl command line's arguments to base, in
// place of the page's localhost:8080.
func curl(t *testing.T, base string, args []string) (int, string) {
	t.Helper()
	method, url, body := http.MethodGet, "", ""
	var header []string
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-i":
		case "-X":
			i++
			method = args[i]
		case "-H":
			i++
			k, v, _ := strings.Cut(args[i], ": ")
			header = append(header, k, v)
		case "-d":
			i++
			body = args[i]
		default:
			url = base + strings.TrimPrefix(args[i], "localhost:8080")
		}
	}
	return shoptest.Send(t, method, url, body, header...)
}
