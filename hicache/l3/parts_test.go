package l3

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// The blocks of a CP group over several nodes: one part-file a node (NODES.md, "The L3").

// twoNodeNS is testNS's geometry for a group of 4 ranks over 2 nodes: each part-file holds 2 ranks'
// parts.
var twoNodeNS = Namespace{
	Layers:      2,
	Payloads:    2,
	PageTokens:  4,
	TokenBytes:  8,
	CPSize:      4,
	Nodes:       2,
	ContentSeed: 1,
	Name:        "test-model bf16",
}

// TestOneNodeFingerprintIsUnchanged: Nodes 0 and 1 both mean one node and keep the fingerprint
// every earlier job's blocks carry; a group over two nodes has another, and says so in its
// printable form.
func TestOneNodeFingerprintIsUnchanged(t *testing.T) {
	one := testNS
	one.Nodes = 1
	if testNS.Fingerprint() != fingerprintGolden || one.Fingerprint() != fingerprintGolden {
		t.Fatalf(
			"one node: fingerprints %016x and %016x, want the golden %016x",
			testNS.Fingerprint(),
			one.Fingerprint(),
			uint64(fingerprintGolden),
		)
	}
	if strings.Contains(one.String(), "nodes") {
		t.Errorf("one node's namespace says %q: it has no node count", one.String())
	}
	wide := testNS
	wide.CPSize, wide.Nodes = 4, 1
	two := wide
	two.Nodes = 2
	if two.Fingerprint() == wide.Fingerprint() {
		t.Errorf(
			"cp 4 over 2 nodes has the fingerprint of cp 4 on one: a one-node job would read part-files as whole blocks",
		)
	}
	if !strings.Contains(two.String(), " nodes=2 ") {
		t.Errorf("two nodes' namespace says %q, want nodes=2", two.String())
	}
	bad := two
	bad.Nodes = 3
	if bad.Validate() == nil {
		t.Errorf("cp 4 over 3 nodes validated")
	}
	if two.PayloadBytes(4) != wide.PayloadBytes(4)/2 {
		t.Errorf(
			"a part-file of 2 nodes holds %d bytes, want half of the whole block's %d",
			two.PayloadBytes(4),
			wide.PayloadBytes(4),
		)
	}
}

// TestPartFilesAreEachNodesOwn: each node's Store writes, finds and reads its own part-file only,
// under the group's one namespace directory, and its keeper budgets its own.
func TestPartFilesAreEachNodesOwn(t *testing.T) {
	dir := t.TempDir()
	var stores [2]*Store
	for node := range stores {
		s, err := OpenPart(OSFS{}, dir, twoNodeNS, node, Unbounded)
		if err != nil {
			t.Fatal(err)
		}
		stores[node] = s
	}
	part := func(node int) []byte {
		return bytes.Repeat([]byte{byte(0x10 + node)}, int(twoNodeNS.PayloadBytes(pageTokens)))
	}
	const key = 0xabc
	if err := stores[0].Write(key, pageTokens, part(0), false); err != nil {
		t.Fatal(err)
	}
	if !stores[0].Exists(key) || stores[1].Exists(key) {
		t.Fatalf(
			"after node 0's write: node 0 finds it %v, node 1 %v; want true, false (node 1's part is not there)",
			stores[0].Exists(key),
			stores[1].Exists(key),
		)
	}
	if err := stores[1].Write(key, pageTokens, part(1), false); err != nil {
		t.Fatal(err)
	}
	for node, s := range stores {
		want := filepath.Join(
			s.dir,
			hex16(key)[:2],
			hex16(key)+[]string{".p0of2", ".p1of2"}[node]+".blk",
		)
		if s.BlockPath(key) != want {
			t.Errorf("node %d's part-file is %s, want %s", node, s.BlockPath(key), want)
		}
		buf := make([]byte, twoNodeNS.PayloadBytes(pageTokens))
		if n, err := s.Read(key, buf); err != nil || n != pageTokens ||
			!bytes.Equal(buf, part(node)) {
			t.Errorf(
				"node %d read its part-file: %d tokens, %v, its own bytes %v",
				node,
				n,
				err,
				bytes.Equal(buf, part(node)),
			)
		}
	}
	if got := len(filesUnder(t, dir, ".blk")); got != 2 {
		t.Errorf("%d block files, want 2 part-files", got)
	}
	keeper, err := OpenPart(OSFS{}, dir, twoNodeNS, 1, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if want := headerBytes + twoNodeNS.PayloadBytes(pageTokens); keeper.UsedBytes() != want {
		t.Errorf(
			"node 1's keeper counts %d bytes at start, want its own part-file's %d",
			keeper.UsedBytes(),
			want,
		)
	}
	if _, err := OpenPart(OSFS{}, dir, twoNodeNS, 2, Unbounded); err == nil {
		t.Errorf("node 2 of a group over 2 opened")
	}
}

func TestBlockNames(t *testing.T) {
	for _, c := range []struct {
		name string
		key  uint64
		part string
		ok   bool
	}{
		{"0000000000000abc.blk", 0xabc, "", true},
		{"0000000000000abc.p1of2.blk", 0xabc, ".p1of2", true},
		{"0000000000000abc.p2of2.blk", 0, "", false},
		{"0000000000000abc.p01of2.blk", 0, "", false},
		{"0000000000000abc.x.blk", 0, "", false},
		{"abc.blk", 0, "", false},
		{"0000000000000abc.tmp", 0, "", false},
	} {
		key, part, ok := parseBlockName(c.name)
		if key != c.key || part != c.part || ok != c.ok {
			t.Errorf("%s: %x %q %v, want %x %q %v", c.name, key, part, ok, c.key, c.part, c.ok)
		}
	}
}
