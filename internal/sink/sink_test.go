package sink

import (
	"errors"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kubegate/internal/informer"
)

// fakeSource is a listener holding notes; it records the limit of each
// pop and what each pop returned.
type fakeSource struct {
	name  string
	notes []informer.Notification
	pops  []int // notifications returned by each pop
}

func (f *fakeSource) PopAtMost(buf []informer.Notification, limit int) []informer.Notification {
	n := len(f.notes)
	if limit > 0 {
		n = min(n, limit)
	}
	buf = append(buf, f.notes[:n]...)
	f.notes = f.notes[n:]
	f.pops = append(f.pops, n)
	return buf
}

// recorder is an encoder that records "source/rv" per notification,
// fails at the notification whose RV is failAt, and is Full once it has
// taken fullAt.
type recorder struct {
	got    []string
	objs   []*informer.Object
	failAt uint64
	fullAt int
}

var errEncode = errors.New("encode failed")

func (r *recorder) Encode(src *fakeSource, n *informer.Notification) error {
	if n.RV == r.failAt && r.failAt != 0 {
		return errEncode
	}
	r.got = append(r.got, src.name+"/"+strconv.FormatUint(n.RV, 10))
	r.objs = append(r.objs, n.Object)
	return nil
}

func (r *recorder) Full() bool { return r.fullAt > 0 && len(r.got) >= r.fullAt }

// notes returns n notifications with RVs from+1 to from+n; every tenth
// (by RV) is a Reset.
func notes(from, n int) []informer.Notification {
	out := make([]informer.Notification, n)
	for i := range out {
		rv := uint64(from + i + 1)
		out[i] = informer.Notification{Type: informer.Added, Object: &informer.Object{RV: rv}, RV: rv}
		if rv%10 == 0 {
			out[i] = informer.Notification{Type: informer.Reset, RV: rv}
		}
	}
	return out
}

// names returns what recorder records for notes(from, n) of source name.
func names(name string, from, n int) []string {
	var out []string
	for i := range n {
		out = append(out, name+"/"+strconv.Itoa(from+i+1))
	}
	return out
}

func TestPop(t *testing.T) {
	for _, tc := range []struct {
		name      string
		chunk     int
		maxChunks int
		sizes     []int // notifications each source holds
		enc       recorder
		wantPops  [][]int // per source
		wantGot   []string
		wantRes   Result
		wantErr   error
	}{{
		name:     "whole listeners at once",
		sizes:    []int{300, 5},
		wantPops: [][]int{{300}, {5}},
		wantGot:  append(names("a", 0, 300), names("b", 0, 5)...),
		wantRes:  Result{Popped: 305, Resets: 30},
	}, {
		name:     "in chunks until empty",
		chunk:    100,
		sizes:    []int{250, 0, 100},
		wantPops: [][]int{{100, 100, 50}, {0}, {100, 0}},
		wantGot:  append(names("a", 0, 250), names("c", 0, 100)...),
		wantRes:  Result{Popped: 350, Resets: 35},
	}, {
		name:      "one chunk per listener leaves more",
		chunk:     100,
		maxChunks: 1,
		sizes:     []int{250, 7},
		wantPops:  [][]int{{100}, {7}},
		wantGot:   append(names("a", 0, 100), names("b", 0, 7)...),
		wantRes:   Result{Popped: 107, Resets: 10, More: true},
	}, {
		name:      "a listener that fits its last chunk",
		chunk:     100,
		maxChunks: 2,
		sizes:     []int{150},
		wantPops:  [][]int{{100, 50}},
		wantGot:   names("a", 0, 150),
		wantRes:   Result{Popped: 150, Resets: 15},
	}, {
		name:     "a full encoder takes one chunk of each listener",
		chunk:    100,
		sizes:    []int{250, 250},
		enc:      recorder{fullAt: 100},
		wantPops: [][]int{{100}, {100}},
		wantGot:  append(names("a", 0, 100), names("b", 0, 100)...),
		wantRes:  Result{Popped: 200, Resets: 20, More: true},
	}, {
		name:     "an error stops at once",
		chunk:    100,
		sizes:    []int{250, 5},
		enc:      recorder{failAt: 150},
		wantPops: [][]int{{100, 100}, nil},
		wantGot:  names("a", 0, 149),
		wantRes:  Result{Popped: 200, Resets: 15},
		wantErr:  errEncode,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var srcs []*fakeSource
			for i, n := range tc.sizes {
				srcs = append(srcs, &fakeSource{name: string(rune('a' + i)), notes: notes(0, n)})
			}
			p := Popper[*fakeSource]{Chunk: tc.chunk, MaxChunks: tc.maxChunks}
			enc := tc.enc
			res, err := p.Pop(srcs, &enc)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Pop error = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantRes, res); diff != "" {
				t.Errorf("Result (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantGot, enc.got); diff != "" {
				t.Errorf("encoded (-want +got):\n%s", diff)
			}
			for i, src := range srcs {
				if diff := cmp.Diff(tc.wantPops[i], src.pops); diff != "" {
					t.Errorf("pops of %s (-want +got):\n%s", src.name, diff)
				}
			}
			for i, n := range p.buf[:cap(p.buf)] {
				if n != (informer.Notification{}) {
					t.Fatalf("buffer entry %d still holds %+v after Pop", i, n)
				}
			}
		})
	}
}

// TestPopReusesItsBuffer: a Popper that has grown to a chunk delivers
// without allocating, so a sink's cost per delivery stays flat.
func TestPopReusesItsBuffer(t *testing.T) {
	src := &fakeSource{name: "a"}
	enc := &counter{}
	p := Popper[*fakeSource]{Chunk: 64}
	batch := notes(0, 100)
	refill := func() {
		src.notes, src.pops = batch, src.pops[:0]
	}
	refill()
	if _, err := p.Pop([]*fakeSource{src}, enc); err != nil {
		t.Fatal(err)
	}
	srcs := []*fakeSource{src}
	enc.n = 0
	allocs := testing.AllocsPerRun(100, func() {
		refill()
		_, _ = p.Pop(srcs, enc)
	})
	if allocs != 0 {
		t.Errorf("Pop allocates %v times per call, want 0", allocs)
	}
	// AllocsPerRun runs the function once more to warm up.
	if enc.n != 101*100 {
		t.Errorf("encoded %d notifications, want %d", enc.n, 101*100)
	}
}

type counter struct{ n int }

func (c *counter) Encode(*fakeSource, *informer.Notification) error { c.n++; return nil }
func (c *counter) Full() bool                                       { return false }
