package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/stockguard/shop/internal/config"
)

// newFlags returns the flag set of a command, whose -h prints usage and
// then the flags.
func newFlags(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseConfig parses args, flags only, into fs, and returns the config
// that read, from config.Flags on fs, then reads.
func parseConfig(fs *flag.FlagSet, args []string, read func() (config.Config, error)) (config.Config, error) {
	if err := fs.Parse(args); err != nil {
		return config.Config{}, err
	}
	if fs.NArg() > 0 {
		return config.Config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return read()
}

// parseInterleaved parses fs from args, where the positional arguments may
// come before, between or after the flags, and returns them in order.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil // after --, every argument is positional
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// usageLine prints the first line of a command's usage, for a wrong
// argument count: the line that says which arguments it takes.
func usageLine(stderr io.Writer, usage string) {
	line, _, _ := strings.Cut(usage, "\n")
	fmt.Fprintln(stderr, line)
}
