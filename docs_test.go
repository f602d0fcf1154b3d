package shop_test

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// pages returns README.md and every page under docs/, the pages whose
// links the tests below check.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no pages under docs/")
	}
	return append([]string{"README.md"}, docs...)
}

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var (
	// fence matches a fenced code block, whose text is no Markdown.
	fence = regexp.MustCompile("(?ms)^ {0,3}```.*?^ {0,3}```[ \t]*$")
	// codeSpan matches an inline code span, which may wrap lines.
	codeSpan = regexp.MustCompile("`[^`]*`")
	// inlineLink matches [text](target) and [text](target "title").
	inlineLink = regexp.MustCompile(`\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// refLink matches a reference definition, [label]: target.
	refLink = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	// heading matches an ATX heading.
	heading = regexp.MustCompile(`(?m)^ {0,3}#{1,6}[ \t]+(.*?)[ \t#]*$`)
	// htmlAnchor matches <a id="x"> and <a name="x">.
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	// scheme starts a link that leaves the repository: https:, mailto:.
	scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// prose is page's Markdown without its code: no fenced block and no code
// span, so that what looks like a link or a heading in code is neither.
func prose(page string) string {
	return codeSpan.ReplaceAllString(fence.ReplaceAllString(page, ""), "")
}

// links returns the targets of page's links, inline and by reference.
func links(page string) []string {
	text := prose(page)
	var targets []string
	for _, re := range []*regexp.Regexp{inlineLink, refLink} {
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			targets = append(targets, m[1])
		}
	}
	return targets
}

// anchors returns the anchors of page's headings as GitHub makes them
// (lowercase; spaces to "-"; punctuation, backticks and emphasis dropped;
// "-1", "-2" after a repeat), and those of its HTML anchors.
func anchors(page string) map[string]bool {
	page = fence.ReplaceAllString(page, "")
	seen := map[string]int{}
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(page, -1) {
		a := slug(m[1])
		if n := seen[a]; n > 0 {
			seen[a]++
			a = a + "-" + strconv.Itoa(n)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	for _, m := range htmlAnchor.FindAllStringSubmatch(page, -1) {
		out[m[1]] = true
	}
	return out
}

// slug is GitHub's anchor of a heading's text.
func slug(text string) string {
	// A link in a heading shows its text.
	text = inlineLink.ReplaceAllStringFunc(text, func(l string) string {
		return l[1:strings.Index(l, "](")]
	})
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestSlug pins the anchor rules on headings of these pages.
func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"The fast path (`lua`)":                        "the-fast-path-lua",
		"What Redlock promises, and what it does not":  "what-redlock-promises-and-what-it-does-not",
		"Sold-out answers never queue":                 "sold-out-answers-never-queue",
		"The default is `none`":                        "the-default-is-none",
		"Idempotency keys":                             "idempotency-keys",
		"SQLite in place of MySQL":                     "sqlite-in-place-of-mysql",
		"A [linked](docs/x.md) heading, **bold** too!": "a-linked-heading-bold-too",
		"snake_case and 2 digits":                      "snake_case-and-2-digits",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// target is one link to check: where it was found, and what it names.
type target struct {
	from string // the page or Go file that holds the link
	file string // the file it names, from the repository's root; "" for none
	frag string // the anchor, without "#"; "" for none
}

// resolve makes link, found in page from, a target; ok is false for a
// link that leaves the repository by URL (https:, mailto:).
func resolve(from, link string) (target, bool) {
	if scheme.MatchString(link) || strings.HasPrefix(link, "//") {
		return target{}, false
	}
	file, frag, _ := strings.Cut(link, "#")
	switch {
	case file == "":
		file = from // an anchor on the same page
	case strings.HasPrefix(file, "/"):
		file = path.Clean(strings.TrimPrefix(file, "/"))
	default:
		file = path.Join(path.Dir(filepath.ToSlash(from)), file)
	}
	return target{from: from, file: file, frag: frag}, true
}

// check reports whether tg names a file of the repository and, on a
// Markdown page, a heading of it. pages caches the anchors of the pages
// read so far.
func check(t *testing.T, tg target, link string, cache map[string]map[string]bool) {
	t.Helper()
	if tg.file == ".." || strings.HasPrefix(tg.file, "../") {
		t.Errorf("%s: link %q leaves the repository", tg.from, link)
		return
	}
	info, err := os.Stat(filepath.FromSlash(tg.file))
	if err != nil {
		t.Errorf("%s: link %q: no file %s in the repository", tg.from, link, tg.file)
		return
	}
	if tg.frag == "" || info.IsDir() || !strings.HasSuffix(tg.file, ".md") {
		return
	}
	a, ok := cache[tg.file]
	if !ok {
		a = anchors(read(t, tg.file))
		cache[tg.file] = a
	}
	if !a[tg.frag] {
		t.Errorf("%s: link %q: %s has no heading with the anchor #%s", tg.from, link, tg.file, tg.frag)
	}
}

// TestDocLinks: every relative link of README.md and docs/*.md names a
// file of the repository, and every anchor a heading of its page.
func TestDocLinks(t *testing.T) {
	cache := map[string]map[string]bool{}
	checked := 0
	for _, p := range pages(t) {
		for _, link := range links(read(t, p)) {
			if tg, ok := resolve(p, link); ok {
				check(t, tg, link, cache)
				checked++
			}
		}
	}
	if checked < 50 {
		t.Errorf("checked %d links, want the pages' many more: does the link pattern still match?", checked)
	}
}

// docRef matches a page of docs/ named in a Go comment, with its anchor.
var docRef = regexp.MustCompile(`\bdocs/[\w./-]+\.md(?:#[\w-]+)?`)

// TestGoCommentLinks: every docs/ page that a Go file names exists, with
// the heading its anchor names.
func TestGoCommentLinks(t *testing.T) {
	cache := map[string]map[string]bool{}
	checked := 0
	err := filepath.WalkDir(".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if base := d.Name(); name != "." && (strings.HasPrefix(base, ".") || base == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || name == "docs_test.go" {
			return nil
		}
		for _, ref := range docRef.FindAllString(read(t, name), -1) {
			tg, _ := resolve("", ref) // from the repository's root
			tg.from = filepath.ToSlash(name)
			check(t, tg, ref, cache)
			checked++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Error("no Go file names a page of docs/: does the pattern still match?")
	}
}

// TestDocTestNames: every test, benchmark, fuzz target and example that
// the pages name by its full name exists. A name followed by "*" stands
// for a family (TestFault*) and is not checked.
func TestDocTestNames(t *testing.T) {
	declared := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz|Example)\w*)\(`)
	err := filepath.WalkDir(".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && name != "." && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(name, "_test.go") {
			for _, m := range decl.FindAllStringSubmatch(read(t, name), -1) {
				declared[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile(`\b(?:Test|Benchmark|Fuzz|Example)[A-Z]\w*\b\*?`)
	for _, p := range pages(t) {
		for _, name := range named.FindAllString(read(t, p), -1) {
			if !strings.HasSuffix(name, "*") && !declared[name] {
				t.Errorf("%s names %s, which no _test.go file declares", p, name)
			}
		}
	}
}

// TestDocCommands: every `shop` command and make target that the pages
// name is one that cmd/shop's usage and the Makefile list.
func TestDocCommands(t *testing.T) {
	usage := regexp.MustCompile("(?s)const usage = `(.*?)`").FindStringSubmatch(read(t, "cmd/shop/main.go"))
	if usage == nil {
		t.Fatal("cmd/shop/main.go: no usage text")
	}
	commands := []string{"help"}
	for _, m := range regexp.MustCompile(`(?m)^  ([a-z]+) `).FindAllStringSubmatch(usage[1], -1) {
		commands = append(commands, m[1])
	}
	var targets []string
	for _, m := range regexp.MustCompile(`(?m)^([\w-]+):`).FindAllStringSubmatch(read(t, "Makefile"), -1) {
		targets = append(targets, m[1])
	}

	// `shop demo …`, go run ./cmd/shop demo, bin/shop serve; and make
	// test, in a code span or at the start of a line of a code block.
	shopCmd := regexp.MustCompile("(?:`|\\./cmd/|bin/)shop ([a-z]+)")
	makeSpan := regexp.MustCompile("`make ([a-z][\\w-]*)")
	makeLine := regexp.MustCompile(`(?m)^make ([a-z][\w-]*)`)
	for _, p := range pages(t) {
		page := read(t, p)
		for _, m := range shopCmd.FindAllStringSubmatch(page, -1) {
			if !slices.Contains(commands, m[1]) {
				t.Errorf("%s names the command shop %s, which cmd/shop's usage does not list (%v)", p, m[1], commands)
			}
		}
		makes := makeSpan.FindAllStringSubmatch(page, -1)
		for _, block := range fence.FindAllString(page, -1) {
			makes = append(makes, makeLine.FindAllStringSubmatch(block, -1)...)
		}
		for _, m := range makes {
			if !slices.Contains(targets, m[1]) {
				t.Errorf("%s names make %s, which the Makefile has no target for (%v)", p, m[1], targets)
			}
		}
	}
	if !strings.Contains(read(t, "README.md"), "\nmake test\n") {
		t.Error("README.md: make test, the test command CI runs, is gone")
	}
}

// TestMetricsDocumented: every metric of the shop, all registered in
// internal/metrics, has its row in the metrics table of the operations
// page.
func TestMetricsDocumented(t *testing.T) {
	names := regexp.MustCompile(`"(shop_[a-z_]+)"`).FindAllStringSubmatch(read(t, "internal/metrics/metrics.go"), -1)
	if len(names) < 10 {
		t.Fatalf("internal/metrics/metrics.go: %d metrics found, the pattern misses them", len(names))
	}
	page := read(t, "docs/operations.md")
	for _, m := range names {
		if !strings.Contains(page, "\n| `"+m[1]+"` |") {
			t.Errorf("docs/operations.md: the metrics table has no row for %s", m[1])
		}
	}
}
