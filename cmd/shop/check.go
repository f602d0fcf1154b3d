package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stockguard/shop/internal/history"
	"github.com/stockguard/shop/internal/lincheck"
)

const checkUsage = `usage: shop check [--timeout D] [--html FILE] FILE|DIR...

Checks sales' histories, as shop demo, bench and load write them with
--history DIR (one operation a line, JSON; docs/linearizability.md),
against the model of the shop: some order of the operations, each at one
point between its call and its answer, explains every answer. For each
history it prints the verdict and names the first impossible answer: who
was told what, and what the model allows there. It writes porcupine's
page of the history beside it (FILE.html), and fails if any history is
not linearizable, or gets no verdict within --timeout. A directory is
every *.jsonl file in it.

`

// checkCmd checks each history it is given.
func checkCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("check", checkUsage, stderr)
	timeout := fs.Duration("timeout", time.Minute, "the longest the search of one history may take")
	page := fs.String("html", "", "with one history, write its page here instead of beside it")
	names, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	files, err := histories(names)
	if err != nil {
		return err
	}
	if *page != "" && len(files) != 1 {
		return fmt.Errorf("--html names the page of one history; %d are given", len(files))
	}
	bad := 0
	for _, file := range files {
		ops, err := history.ReadFile(file)
		if err != nil {
			return err
		}
		r := lincheck.Check(ops, *timeout)
		html := strings.TrimSuffix(file, ".jsonl") + ".html"
		if *page != "" {
			html = *page
		}
		if err := r.VisualizePath(html); err != nil {
			return fmt.Errorf("%s: the page: %w", file, err)
		}
		fmt.Fprintf(stdout, "%s: %s\n  page: %s\n", file, r, html)
		if !r.Linearizable {
			bad++
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d histories are not linearizable, or got no verdict", bad, len(files))
	}
	return nil
}

// histories lists the files that names name: each file, and each *.jsonl
// of each directory.
func histories(names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, errors.New("name a history file or a directory of them")
	}
	var files []string
	for _, name := range names {
		info, err := os.Stat(name)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			files = append(files, name)
			continue
		}
		in, err := filepath.Glob(filepath.Join(name, "*.jsonl"))
		if err != nil {
			return nil, err
		}
		if len(in) == 0 {
			return nil, fmt.Errorf("%s has no history (*.jsonl)", name)
		}
		files = append(files, in...)
	}
	return files, nil
}
