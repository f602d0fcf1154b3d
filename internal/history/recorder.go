package history

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Recorder keeps the operations of one sale, from any number of
// goroutines. A nil *Recorder records nothing, so that a client can call
// it whether or not a history was asked for.
type Recorder struct {
	base    time.Time
	clients atomic.Int64
	mu      sync.Mutex
	ops     []Op
}

// NewRecorder returns an empty Recorder whose clock starts now.
func NewRecorder() *Recorder { return &Recorder{base: time.Now()} }

// Now is the recording clock: nanoseconds since the Unix epoch, moved by
// the monotonic clock, so that a step of the wall clock during a sale
// cannot reorder its operations.
func (r *Recorder) Now() int64 {
	if r == nil {
		return 0
	}
	return r.base.UnixNano() + int64(time.Since(r.base))
}

// Client returns a client id that no other client of r has.
func (r *Recorder) Client() int {
	if r == nil {
		return 0
	}
	return int(r.clients.Add(1) - 1)
}

// Add keeps op.
func (r *Recorder) Add(op Op) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// Ops returns the operations kept so far, by call time.
func (r *Recorder) Ops() []Op {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	ops := slices.Clone(r.ops)
	r.mu.Unlock()
	slices.SortStableFunc(ops, func(a, b Op) int { return cmp.Compare(a.Call, b.Call) })
	return ops
}

// Write writes ops as JSON lines.
func Write(w io.Writer, ops []Op) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, op := range ops {
		if err := enc.Encode(op); err != nil {
			return fmt.Errorf("history: %w", err)
		}
	}
	return bw.Flush()
}

// WriteFile writes ops to path as JSON lines.
func WriteFile(path string, ops []Op) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	if err := Write(f, ops); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Read reads JSON lines of operations. It names the line of the first one
// that is not an operation.
func Read(r io.Reader) ([]Op, error) {
	var ops []Op
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20) // a final state holds every order on one line
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var op Op
		if err := json.Unmarshal(line, &op); err != nil {
			return nil, fmt.Errorf("history: line %d: %w", n, err)
		}
		if op.Kind == "" {
			return nil, fmt.Errorf(`history: line %d: no "op"`, n)
		}
		ops = append(ops, op)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return ops, nil
}

// ReadFile reads the operations in path.
func ReadFile(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	ops, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ops, nil
}

// AddFinal keeps the final state, read from call until now.
func (r *Recorder) AddFinal(call int64, final Final) {
	r.Add(Op{Client: r.Client(), Kind: State, Call: call, Return: r.Now(), Answer: OK, Final: &final})
}
