package feed

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"k8s.io/client-go/rest"

	"kubegate/internal/informer"
	"kubegate/internal/livequery"
)

// startManager runs an informer Manager against the test apiserver until
// the test ends.
func startManager(t *testing.T, cfg *rest.Config) *informer.Manager {
	t.Helper()
	m, err := informer.New(informer.Options{Config: cfg, Logger: zaptest.NewLogger(t).Named("informer"),
		// How often a resource that went away is looked up.
		DiscoveryRefreshInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run(t, m.Start)
	return m
}

// startTables runs Tables until the test ends.
func startTables(t *testing.T, opts Options) *Tables {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = zaptest.NewLogger(t).Named("feed")
	}
	ts := New(opts)
	run(t, ts.Start)
	return ts
}

// run calls start in a goroutine and, when the test ends, cancels its
// context and waits for it to return.
func run(t *testing.T, start func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
}

func resource(t *testing.T, m *informer.Manager, name string) *informer.Resource {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := m.Resource(ctx, name)
	if err != nil {
		t.Fatalf("Resource(%q): %v", name, err)
	}
	if err := r.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

// consumer is a window's consumer: it holds a copy of the window built
// only from the operations it popped.
type consumer struct {
	w     *Window
	wake  chan struct{}
	rows  []*livequery.Row
	count int
	// offset is the window's offset as last reported; rv the version
	// of the last Pop.
	offset int
	rv     uint64
	ops    []livequery.Op // every operation applied, for failure messages
}

func open(t *testing.T, ts *Tables, r *informer.Resource, q livequery.Query) *consumer {
	t.Helper()
	c := &consumer{wake: make(chan struct{}, 1)}
	q.Wake = func() {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := ts.Open(ctx, r, q)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	c.w = w
	t.Cleanup(w.Close)
	c.pop(t)
	return c
}

// pop applies what the window has pending.
func (c *consumer) pop(t *testing.T) {
	t.Helper()
	ops, rv := c.w.Pop(nil)
	c.rv = rv
	c.ops = append(c.ops, ops...)
	if err := c.apply(ops); err != nil {
		t.Fatal(err)
	}
}

func (c *consumer) apply(ops []livequery.Op) error {
	for _, op := range ops {
		n := len(c.rows)
		switch op.Type {
		case livequery.OpInsert:
			if op.Pos < 0 || op.Pos > n {
				return fmt.Errorf("%v: position out of [0,%d]", op, n)
			}
			c.rows = slices.Insert(c.rows, op.Pos, op.Row)
		case livequery.OpRemove:
			if op.Pos < 0 || op.Pos >= n {
				return fmt.Errorf("%v: position out of [0,%d)", op, n)
			}
			c.rows = slices.Delete(c.rows, op.Pos, op.Pos+1)
		case livequery.OpMove:
			if op.Pos < 0 || op.Pos >= n || op.To < 0 || op.To >= n || c.rows[op.Pos].Key() != op.Row.Key() {
				return fmt.Errorf("%v does not fit %v", op, keys(c.rows))
			}
			c.rows = slices.Delete(c.rows, op.Pos, op.Pos+1)
			c.rows = slices.Insert(c.rows, op.To, op.Row)
		case livequery.OpUpdate:
			if op.Pos < 0 || op.Pos >= n || c.rows[op.Pos].Key() != op.Row.Key() {
				return fmt.Errorf("%v does not fit %v", op, keys(c.rows))
			}
			c.rows[op.Pos] = op.Row
		case livequery.OpCount:
			c.count, c.offset = op.Count, op.Offset
		case livequery.OpReset:
			c.rows = nil
		default:
			return fmt.Errorf("unknown operation %v", op)
		}
	}
	return nil
}

// until pops, woken by the window, until cond holds; it fails after 30s
// (a failure bound, not a delay).
func (c *consumer) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-c.wake:
			c.pop(t)
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s; window holds %v", what, versioned(c.rows))
		}
	}
}

func keys(rows []*livequery.Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Key()
	}
	return out
}

// versioned renders rows as "namespace/name@rv".
func versioned(rows []*livequery.Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprintf("%s@%d", r.Key(), r.RV)
	}
	return out
}

// pauser holds a feeder on its goroutine, once armed, the next time it
// is woken, until released: changes then pile up in its listener.
type pauser struct {
	mu    sync.Mutex
	armed bool
	at    chan *feeder
	gate  chan struct{}
}

func newPauser(t *testing.T) *pauser {
	p := &pauser{at: make(chan *feeder)}
	t.Cleanup(p.release)
	return p
}

// hook is Options.beforeDrain.
func (p *pauser) hook(f *feeder) {
	p.mu.Lock()
	armed, gate := p.armed, p.gate
	p.armed = false
	p.mu.Unlock()
	if armed {
		// Released, or Tables stopping (a test that failed while the
		// feeder was held).
		select {
		case p.at <- f:
		case <-f.ts.ctx.Done():
			return
		}
		select {
		case <-gate:
		case <-f.ts.ctx.Done():
		}
	}
}

func (p *pauser) arm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.gate = true, make(chan struct{})
}

// paused waits for the feeder to be held.
func (p *pauser) paused(t *testing.T) *feeder {
	t.Helper()
	select {
	case f := <-p.at:
		return f
	case <-time.After(30 * time.Second):
		t.Fatal("the feeder was not woken")
		return nil
	}
}

func (p *pauser) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = false
	if p.gate != nil {
		close(p.gate)
		p.gate = nil
	}
}
