package lesson

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/stockguard/shop/internal/mariadb"
)

// Server names a server that a lesson cannot run without, because no
// embedded backend behaves like it in the way the lesson needs.
type Server string

const (
	// MySQL is MySQL or MariaDB. SQLite locks the whole file, so it has no
	// row lock to queue on.
	MySQL Server = "MySQL"
	// ZooKeeper cannot be embedded.
	ZooKeeper Server = "ZooKeeper"
	// MariaDBServer is MariaDB's server binaries, for a lesson that starts
	// servers of its own.
	MariaDBServer Server = "MariaDB"
)

// flags names the flag and the variable that point a lesson at a server.
var flags = map[Server]string{MySQL: "--mysql or SHOP_MYSQL_DSN", ZooKeeper: "--zk or SHOP_ZK_ADDRS",
	MariaDBServer: "mariadbd and mariadb-install-db on the PATH: apt-get install mariadb-server"}

// Need is a server a lesson needs, and why.
type Need struct {
	Server Server `json:"server"`
	Why    string `json:"why"`
}

// Env holds the stores a lesson runs on. `shop lesson` fills it from the
// same flags and SHOP_* variables as the demo, and embeds what they leave
// empty: miniredis for Redis and the Redlock masters, SQLite for the
// database.
type Env struct {
	// Redis is a Redis server, real or embedded.
	Redis *redis.Client
	// Advance lets d pass for the TTLs on Redis and on the Masters: an
	// embedded server fast-forwards, a real one is waited for.
	Advance func(d time.Duration)
	// Masters are Redlock's independent masters.
	Masters []Master
	// DB is the shop's database, migrated: MySQL, or SQLite.
	DB *gorm.DB
	// MySQL reports whether DB is MySQL or MariaDB.
	MySQL bool
	// ZooKeeper is the ensemble's addresses, or nil when there is none;
	// ZooKeeperRoot is an existing znode to make the lesson's znodes under.
	ZooKeeper     []string
	ZooKeeperRoot string
	// Prefix starts every Redis key, znode name and SKU that a lesson
	// makes, so that lessons on shared servers never meet other data.
	Prefix string
	// Dir is where a lesson writes what a reader opens afterwards (the
	// histories of linearizability's sales, and their pages); empty, a new
	// temporary directory, made by the first lesson that writes there.
	Dir string
}

// dir returns Dir, made if it does not exist, or a new temporary
// directory if it is empty.
func (e *Env) dir() (string, error) {
	if e.Dir != "" {
		return e.Dir, os.MkdirAll(e.Dir, 0o755)
	}
	d, err := os.MkdirTemp("", "stockguard-lesson-")
	e.Dir = d
	return d, err
}

// Master is one of Redlock's masters.
type Master struct {
	Client *redis.Client
	// RestartEmpty brings the master back without the lesson's keys, as a
	// master without persistence comes back from a crash. On a real server
	// it deletes the keys under Env.Prefix rather than the whole data set.
	RestartEmpty func(ctx context.Context) error
}

func (e *Env) has(s Server) bool {
	switch s {
	case MySQL:
		return e.MySQL
	case ZooKeeper:
		return len(e.ZooKeeper) > 0
	case MariaDBServer:
		return mariadb.Installed()
	}
	return false
}

// Trial is one run of a lesson's scenario, with the mistake or with its
// fix.
type Trial struct {
	// Name says what ran, as "SETNX, then EXPIRE".
	Name string `json:"name"`
	// Numbers are read from the stores after the run (Redis, ZooKeeper,
	// the database), never counted by the code that meant to do them.
	Numbers map[string]int64 `json:"numbers"`
	// Happened says in a line what the Numbers show.
	Happened string `json:"happened"`
	// Failed reports whether the failure the lesson teaches happened.
	Failed bool `json:"failed"`
	// Rows, where a trial compares ways of doing it, are the figures of
	// each way, a line each.
	Rows []string `json:"rows,omitempty"`
}

// Lesson is one failure from the seed articles, reproduced beside its fix.
type Lesson struct {
	// Number orders the lessons; Name selects one on the command line.
	Number int    `json:"number"`
	Name   string `json:"name"`
	// Seed names the seed article, as "seed 002", and Claim says in a line
	// what it claims.
	Seed  string `json:"seed"`
	Claim string `json:"claim"`
	// Setup says what both trials run.
	Setup string `json:"setup"`
	// Takeaway is the lesson in a line.
	Takeaway string `json:"takeaway"`
	Needs    []Need `json:"needs,omitempty"`
	// Mistake runs the scenario as the seed does it, Fix as the shop does.
	Mistake func(ctx context.Context, env *Env) (Trial, error) `json:"-"`
	Fix     func(ctx context.Context, env *Env) (Trial, error) `json:"-"`
}

// Result is what running a lesson found.
type Result struct {
	Lesson
	Mistake *Trial `json:"mistake,omitempty"`
	Fix     *Trial `json:"fix,omitempty"`
	// Skipped says why the lesson did not run; Err why it stopped.
	Skipped string `json:"skipped,omitempty"`
	Err     string `json:"error,omitempty"`
	// Reproduced: the mistake failed. Held: the fix did not.
	Reproduced bool `json:"reproduced"`
	Held       bool `json:"held"`
}

// OK reports whether the lesson ran, its mistake failed and its fix held.
func (r Result) OK() bool { return r.Skipped == "" && r.Err == "" && r.Reproduced && r.Held }

var registered []Lesson

// register adds a lesson; each lesson's file registers it in init.
func register(l Lesson) { registered = append(registered, l) }

// All returns the lessons in order.
func All() []Lesson {
	all := slices.Clone(registered)
	slices.SortFunc(all, func(a, b Lesson) int { return cmp.Compare(a.Number, b.Number) })
	return all
}

// Find returns the lesson called name.
func Find(name string) (Lesson, bool) {
	i := slices.IndexFunc(registered, func(l Lesson) bool { return l.Name == name })
	if i < 0 {
		return Lesson{}, false
	}
	return registered[i], true
}

// Run runs the mistake and then the fix, or skips the lesson when env
// lacks a server it needs.
func (l Lesson) Run(ctx context.Context, env *Env) Result {
	r := Result{Lesson: l}
	for _, n := range l.Needs {
		if !env.has(n.Server) {
			r.Skipped = fmt.Sprintf("needs a %s server (%s): %s", n.Server, flags[n.Server], n.Why)
			return r
		}
	}
	for _, t := range []struct {
		run func(context.Context, *Env) (Trial, error)
		to  **Trial
		as  string
	}{{l.Mistake, &r.Mistake, "mistake"}, {l.Fix, &r.Fix, "fix"}} {
		trial, err := t.run(ctx, env)
		if err != nil {
			r.Err = fmt.Sprintf("%s: %v", t.as, err)
			return r
		}
		*t.to = &trial
	}
	r.Reproduced, r.Held = r.Mistake.Failed, !r.Fix.Failed
	return r
}

// Print writes r for a reader.
func Print(w io.Writer, r Result) {
	fmt.Fprintf(w, "%d. %s\n", r.Number, r.Name)
	fmt.Fprintf(w, "   %s claims: %s\n", r.Seed, r.Claim)
	fmt.Fprintf(w, "   setup:    %s\n", r.Setup)
	switch {
	case r.Skipped != "":
		fmt.Fprintf(w, "   skipped:  %s\n\n", r.Skipped)
		return
	case r.Mistake != nil:
		printTrial(w, "mistake", *r.Mistake, map[bool]string{true: "failure reproduced", false: "failure NOT reproduced"})
	}
	if r.Fix != nil {
		printTrial(w, "fix", *r.Fix, map[bool]string{true: "fix FAILED", false: "fix held"})
	}
	if r.Err != "" {
		fmt.Fprintf(w, "   error:    %s\n\n", r.Err)
		return
	}
	fmt.Fprintf(w, "   takeaway: %s\n\n", r.Takeaway)
}

func printTrial(w io.Writer, as string, t Trial, verdict map[bool]string) {
	fmt.Fprintf(w, "   %-8s  %s\n", as+":", t.Name)
	for _, row := range t.Rows {
		fmt.Fprintf(w, "             %s\n", row)
	}
	fmt.Fprintf(w, "             %s  [%s]\n", t.Happened, verdict[t.Failed])
	var nums []string
	for _, k := range slices.Sorted(maps.Keys(t.Numbers)) {
		nums = append(nums, fmt.Sprintf("%s=%d", k, t.Numbers[k]))
	}
	fmt.Fprintf(w, "             read from the stores: %s\n", strings.Join(nums, " "))
}

// Summary writes the table that ends `shop lesson all`.
func Summary(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LESSON\tFAILURE REPRODUCED\tFIX HELD\tNOTE")
	yes := map[bool]string{true: "yes", false: "NO"}
	for _, r := range results {
		switch {
		case r.Skipped != "":
			fmt.Fprintf(tw, "%s\t-\t-\tskipped: %s\n", r.Name, r.Skipped)
		case r.Err != "":
			fmt.Fprintf(tw, "%s\t-\t-\terror: %s\n", r.Name, r.Err)
		default:
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\n", r.Name, yes[r.Reproduced], yes[r.Held])
		}
	}
	return tw.Flush()
}
