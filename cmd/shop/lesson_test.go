package main

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/stockguard/shop/internal/lesson"
	"github.com/stockguard/shop/internal/testinfra"
)

// runLessons runs `shop lesson all --json` with env as its variables, and
// the files lessons write in a directory of the test's own.
func runLessons(t *testing.T, env map[string]string, name string) []lesson.Result {
	t.Helper()
	var out, errs strings.Builder
	err := run(t.Context(), []string{"lesson", name, "--json", "--dir", t.TempDir()}, func(k string) string { return env[k] }, &out, &errs)
	// One lesson's JSON is its result, every lesson's a list.
	var results []lesson.Result
	into := any(&results)
	if name != "all" {
		results = make([]lesson.Result, 1)
		into = &results[0]
	}
	if jerr := json.Unmarshal([]byte(out.String()), into); jerr != nil {
		t.Fatalf("shop lesson %s: %v, %v\n%s%s", name, err, jerr, out.String(), errs.String())
	}
	if err != nil {
		t.Errorf("shop lesson %s: %v", name, err)
	}
	want := 1
	if name == "all" {
		want = len(lesson.All())
	}
	if len(results) != want {
		t.Fatalf("shop lesson %s: %d results, want %d", name, len(results), want)
	}
	return results
}

// TestLessonsEmbedded: with nothing configured, every lesson that needs no
// server of its own runs on miniredis and SQLite, reproduces its failure
// and holds with its fix; the others say what they need, or, when they
// find it on the machine (MariaDB's server binaries), run too.
func TestLessonsEmbedded(t *testing.T) {
	t.Parallel()
	for _, r := range runLessons(t, nil, "all") {
		switch {
		case len(r.Needs) > 0 && r.Skipped != "":
			if !strings.Contains(r.Skipped, "needs a "+string(r.Needs[0].Server)+" server") {
				t.Errorf("%s: skipped %q, want it to name %s", r.Name, r.Skipped, r.Needs[0].Server)
			}
		case !r.OK():
			t.Errorf("%s: reproduced %v, held %v, skipped %q, error %q", r.Name, r.Reproduced, r.Held, r.Skipped, r.Err)
		}
	}
}

// TestLessonsOnServers: with the servers of scripts/services.sh named in
// the environment, `shop lesson` runs on them: a lesson on MySQL, one
// that takes a Redis lock, and the one that needs ZooKeeper each run, are
// not skipped, reproduce their failure and hold with their fix. That
// every lesson does so on these servers is internal/lesson's tests, one
// per lesson, each asserting what the stores said.
func TestLessonsOnServers(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SHOP_MYSQL_DSN": testinfra.MySQL(t), "SHOP_REDIS_ADDR": testinfra.Redis(t).Addr,
		"SHOP_ZK_ADDRS": strings.Join(testinfra.ZooKeeper(t).Addrs, ",")}
	for _, name := range []string{"oversell", "local-lock", "zk-herd"} {
		for _, r := range runLessons(t, env, name) {
			if !r.OK() {
				t.Errorf("%s: reproduced %v, held %v, skipped %q, error %q", r.Name, r.Reproduced, r.Held, r.Skipped, r.Err)
			}
		}
	}
}

// TestLessonList: without a name, the lessons are listed; an unknown name
// is an error that lists them.
func TestLessonList(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := run(t.Context(), []string{"lesson"}, func(string) string { return "" }, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, l := range lesson.All() {
		if !strings.Contains(out.String(), l.Name) {
			t.Errorf("the list lacks %s:\n%s", l.Name, out.String())
		}
	}
	err := run(t.Context(), []string{"lesson", "no-such"}, func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "oversell") {
		t.Errorf("shop lesson no-such: %v, want an error that lists the lessons", err)
	}
}
