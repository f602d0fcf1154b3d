package main

import (
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
)

// quickCommands are the README's commands that run as written with
// nothing set up and end in a moment; each gets the environment it
// names in its comment. The others start sales or need a running shop:
// TestDocCommands checks their names, and the demo, lesson and serve
// tests run them.
var quickCommands = map[string]map[string]string{
	"version": nil,
	"token":   {"SHOP_JWT_SECRET": "a-secret-of-the-test-of-32-bytes!"}, // "signed with SHOP_JWT_SECRET"
}

// TestReadmeCommands runs every command of the README's "Other commands"
// that needs no server, as written, and checks that it succeeds and
// prints something.
func TestReadmeCommands(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, m := range regexp.MustCompile(`(?m)^go run \./cmd/shop ([^#\n]*?)\s*(?:#.*)?$`).FindAllStringSubmatch(string(readme), -1) {
		args := strings.Fields(m[1])
		env, ok := quickCommands[args[0]]
		if !ok {
			continue
		}
		ran++
		var out strings.Builder
		if err := run(t.Context(), args, func(k string) string { return env[k] }, &out, io.Discard); err != nil {
			t.Errorf("shop %s: %v", m[1], err)
		} else if out.Len() == 0 {
			t.Errorf("shop %s printed nothing", m[1])
		}
	}
	if ran != len(quickCommands) {
		t.Errorf("ran %d of the README's quick commands, want %d: %v", ran, len(quickCommands), quickCommands)
	}
}
