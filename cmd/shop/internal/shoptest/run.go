package shoptest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/stockguard/shop/internal/config"
)

// Run runs the shop binary with args, as main runs run in package main,
// and with run's arguments: what the command prints goes to stdout and
// stderr, and the error that main prints last, after "shop: ", is Run's.
// The child's environment is the test's without its SHOP_* variables,
// and with those that getenv gives of the settings of internal/config.
// The end of ctx interrupts it (SIGINT), as it would end run.
func Run(ctx context.Context, args []string, getenv config.Getenv, stdout, stderr io.Writer) error {
	bin, err := binary()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.Env = environ(getenv)
	var errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = stdout, io.MultiWriter(stderr, &errs)
	err = cmd.Run()
	if cmd.ProcessState != nil && cmd.ProcessState.Success() {
		return nil // interrupted, cmd.Run returns ctx's error; the command exited cleanly
	}
	if i := strings.LastIndex("\n"+errs.String(), "\nshop: "); i >= 0 {
		return errors.New(strings.TrimSpace(errs.String()[i+len("shop: "):]))
	}
	return err
}

// environ is the test's environment without its SHOP_* variables, and
// with the settings that getenv gives.
func environ(getenv config.Getenv) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHOP_") {
			env = append(env, kv)
		}
	}
	for _, kv := range (config.Config{}).Environ() { // every setting's variable
		name, _, _ := strings.Cut(kv, "=")
		if v := getenv(name); v != "" {
			env = append(env, name+"="+v)
		}
	}
	return env
}
