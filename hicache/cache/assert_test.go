package cache

import (
	"strings"
	"testing"
)

// panicMessage runs f and returns what it panicked with, or "" when it returned.
func panicMessage(f func()) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg, _ = p.(string)
		}
	}()
	f()
	return ""
}

// TestBrokenInvariantsDumpWhatTheyChecked: each kind of the core's always-on assert panics naming
// the invariant and with a dump of the state it checked (DESIGN.md, "Asserts"), not a bare message.
func TestBrokenInvariantsDumpWhatTheyChecked(t *testing.T) {
	c := newTestController(t, WriteThrough, 8, 16)
	req := requestOf([]int32{1, 1, 2, 2})
	if err := c.serve(&req); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		f    func()
		want []string
	}{
		{"a backup pushed out of order", func() { c.writes.push(&copyOp{seq: c.writes.lastSeq}) },
			[]string{
				"broken invariant",
				"pushed after",
				"backup queue: last issued 1, frontier 0, 1 ops: 1(done false",
			}},
		{"a load-back retired before it finished", func() {
			c.loads.push(&copyOp{seq: c.loads.lastSeq + 100})
			c.loads.retire(c.loads.lastSeq)
		}, []string{"broken invariant", "before it finished", "load-back queue: last issued 100"}},
		{"a device page unpinned twice", func() { c.dev.unpin([]int32{7}) },
			[]string{
				"broken invariant",
				"unpinning page 7",
				"device pool: 6 of 8 pages free, page 7 has 0 pins",
			}},
		{
			"an unlocked node unlocked again",
			func() { c.endStep(); c.work.locked = append(c.work.locked, c.tree.root.children[0]); c.endStep() },
			[]string{
				"broken invariant",
				"holds no lock",
				"node ",
				"CP group 0 rank 0: step 0, clock 1",
				"tree: 1 nodes",
			},
		},
	}
	for _, tc := range cases {
		msg := panicMessage(tc.f)
		for _, want := range tc.want {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: the panic %q does not say %q", tc.name, msg, want)
			}
		}
	}
}
