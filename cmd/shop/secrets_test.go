package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// commands is every subcommand of shop.
var commands = []string{"serve", "migrate", "demo", "bench", "load", "echo", "reconcile", "audit", "token", "pay", "events", "lesson"}

// TestNoSecretInOutput: with every secret setting set, through the
// environment and through flags, no output shows one: not the -h of any
// command, not serve's start log or its error, not a bench's text, JSON or
// HTML report.
func TestNoSecretInOutput(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"SHOP_MYSQL_DSN":      "acc:envdbpass81@tcp(127.0.0.1:1)/shop?timeout=200ms",
		"SHOP_ADMIN_TOKEN":    "envadmintok52",
		"SHOP_JWT_SECRET":     "envjwtsecret-0123456789abcdef0123456789",
		"SHOP_PAYMENT_SECRET": "envpaysecret-0123456789abcdef0123456789",
		"SHOP_BUYER_AUTH":     "jwt",
		"SHOP_HTTP_ADDR":      "127.0.0.1:0",
		"SHOP_DEBUG_ADDR":     "127.0.0.1:0",
	}
	flags := []string{"--mysql", "acc:flagdbpass37@tcp(127.0.0.1:1)/shop?timeout=200ms", "--admin-token", "flagadmintok64",
		"--jwt-secret", "flagjwtsecret-0123456789abcdef0123456789", "--payment-secret", "flagpaysecret-0123456789abcdef0123456789"}
	secrets := []string{"envdbpass81", "envadmintok52", "envjwtsecret", "envpaysecret", "flagdbpass37", "flagadmintok64", "flagjwtsecret", "flagpaysecret"}
	check := func(what, out string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("%s shows the secret %q:\n%s", what, s, out)
			}
		}
	}
	getenv := func(k string) string { return env[k] }
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // nothing here is to run for long: serve stops as it starts

	for _, cmd := range commands {
		var out, errs strings.Builder
		err := run(ctx, []string{cmd, "-h"}, getenv, &out, &errs)
		if !strings.Contains(errs.String(), "-") {
			t.Errorf("shop %s -h printed no flags: %v\n%s", cmd, err, errs.String())
		}
		check("shop "+cmd+" -h", out.String()+errs.String())
	}
	for _, args := range [][]string{{"serve"}, append([]string{"serve"}, flags...), {"migrate", "status", "--mysql", flags[1]}} {
		var errs strings.Builder
		err := run(t.Context(), args, getenv, &errs, &errs)
		if err == nil {
			t.Fatalf("shop %s with no database answering: no error", args[0])
		}
		if args[0] == "serve" && !strings.Contains(errs.String(), `"msg":"starting"`) {
			t.Errorf("shop serve logged no start:\n%s", errs.String())
		}
		check("shop "+strings.Join(args[:1], " "), errs.String()+err.Error())
	}

	dir := t.TempDir()
	jsonFile, htmlFile := filepath.Join(dir, "bench.json"), filepath.Join(dir, "bench.html")
	benchEnv := map[string]string{"SHOP_ADMIN_TOKEN": env["SHOP_ADMIN_TOKEN"], "SHOP_JWT_SECRET": env["SHOP_JWT_SECRET"], "SHOP_PAYMENT_SECRET": env["SHOP_PAYMENT_SECRET"]}
	var out strings.Builder
	err := run(t.Context(), []string{"bench", "--strategies", "atomic", "--stock", "5", "--buyers", "20", "--instances", "1",
		"--mysql", "sqlite:" + filepath.Join(dir, "shop.db"), "--json", jsonFile, "--html", htmlFile},
		func(k string) string { return benchEnv[k] }, &out, &out)
	if err != nil {
		t.Fatalf("bench on embedded servers: %v\n%s", err, out.String())
	}
	check("bench's text", out.String())
	for _, f := range []string{jsonFile, htmlFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		check(f, string(b))
	}
}

// TestWrongArgumentCount: a command given too few or too many arguments
// prints the one line of usage that says which it takes, not its flags.
func TestWrongArgumentCount(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"migrate", "down"}, {"migrate", "force"}, {"audit"}, {"pay", "1"}, {"token"}, {"version", "x"}} {
		var errs strings.Builder
		err := run(t.Context(), args, func(string) string { return "" }, io.Discard, &errs)
		if err == nil || strings.Count(errs.String(), "\n") > 1 || strings.Contains(errs.String(), "  -") {
			t.Errorf("shop %v: %v, printed\n%s\nwant one line of usage", args, err, errs.String())
		}
	}
}
