package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/l3"
	"github.com/cphicache/cphicache/hicache/l3block"
)

// l3Fixture fills an L3 directory with two namespaces (3 blocks and 1) and a file that is not the
// L3's.
func l3Fixture(t *testing.T) (dir string, a, b *l3.Store) {
	t.Helper()
	dir = t.TempDir()
	ns := l3.Namespace{
		Layers:      2,
		Payloads:    2,
		PageTokens:  4,
		TokenBytes:  8,
		CPSize:      2,
		ContentSeed: 1,
		Name:        "llama-3.1-8b bf16",
	}
	other := ns
	other.CPSize = 4
	var err error
	if a, err = l3.Open(dir, ns, 1<<20); err != nil {
		t.Fatal(err)
	}
	if b, err = l3.Open(dir, other, 1<<20); err != nil {
		t.Fatal(err)
	}
	for i, s := range []*l3.Store{a, a, a, b} {
		tokens := []int32{int32(i)}
		if err := s.Write(
			l3block.ChainKey(0, tokens), 4, make([]byte, s.Namespace().PayloadBytes(4)), false,
		); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("not the L3's"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, a, b
}

// TestL3StatAndClear runs the binary without mpirun, as a user does: stat counts each namespace and
// names its fields; clear removes one namespace, refuses an unknown one, then removes all, and
// nothing else.
func TestL3StatAndClear(t *testing.T) {
	dir, a, b := l3Fixture(t)
	out := singleton(t, "l3", "stat", "--l3-dir", dir)
	fileBytes := 64 + a.Namespace().PayloadBytes(4)
	for _, want := range []string{
		fmt.Sprintf("2 namespaces, 4 blocks, 1.5 KiB (%d bytes)", 3*fileBytes+64+b.Namespace().PayloadBytes(4)),
		fmt.Sprintf("namespace %016x: 3 blocks, 960 B (%d bytes), oldest 20", a.Fingerprint(), 3*fileBytes),
		fmt.Sprintf("namespace %016x: 1 block, ", b.Fingerprint()),
		`cp=4 seed=1 content=v0 namespace="llama-3.1-8b bf16"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stat lacks %q:\n%s", want, out)
		}
	}
	out = singleton(
		t,
		"l3",
		"clear",
		"--l3-dir",
		dir,
		"--l3-namespace-fingerprint",
		fmt.Sprintf("%016x", a.Fingerprint()),
	)
	if !strings.Contains(out, "1 namespace removed") || a.Exists(l3block.ChainKey(0, []int32{0})) ||
		!b.Exists(l3block.ChainKey(0, []int32{3})) {
		t.Errorf("clear of one namespace:\n%s", out)
	}
	cmd := exec.Command(
		binPath,
		"l3",
		"clear",
		"--l3-dir",
		dir,
		"--l3-namespace-fingerprint",
		fmt.Sprintf("%016x", a.Fingerprint()),
	)
	notThere := fmt.Sprintf(
		"no namespace starts with %q under %s; it holds 1 namespace: %016x (",
		fmt.Sprintf("%016x", a.Fingerprint()),
		dir,
		b.Fingerprint(),
	)
	if msg, err := cmd.CombinedOutput(); err == nil ||
		!strings.Contains(string(msg), "invalid --l3-namespace-fingerprint: "+notThere) {
		t.Errorf(
			"clear of a namespace that is not there: %v, want it to list the one there is\n%s",
			err,
			msg,
		)
	}
	if out = singleton(t, "l3", "clear", "--l3-dir", dir); !strings.Contains(
		out,
		"1 namespace removed",
	) {
		t.Errorf("clear of every namespace:\n%s", out)
	}
	if out = singleton(t, "l3", "stat", "--l3-dir", dir); !strings.Contains(
		out,
		"0 namespaces, 0 blocks",
	) {
		t.Errorf("stat after clear:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "README")); err != nil {
		t.Errorf("clear removed a file that is not the L3's: %v", err)
	}
}

// TestL3ClearTakesTheStartOfAFingerprint: --l3-namespace-fingerprint is matched as the start of a
// fingerprint (as a git hash), never padded into another one (0ba3d4fb is not 000000000ba3d4fb);
// the start of two is refused, naming both, and one that starts none lists the namespaces there
// are.
func TestL3ClearTakesTheStartOfAFingerprint(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"0ba3d4fb00000001", "0ba3d4fb00000002", "000000000ba3d4fb", "77aa000000000000"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	refuse := func(prefix string, want ...string) {
		t.Helper()
		cmd := exec.Command(
			binPath,
			"l3",
			"clear",
			"--l3-dir",
			dir,
			"--l3-namespace-fingerprint",
			prefix,
		)
		msg, err := cmd.CombinedOutput()
		for _, w := range want {
			if err == nil || !strings.Contains(string(msg), w) {
				t.Errorf("clear %s: %v, want %q in\n%s", prefix, err, w, msg)
			}
		}
	}
	refuse(
		"0ba3d4fb",
		`"0ba3d4fb" is the start of 2 namespaces' fingerprints: 0ba3d4fb00000001; 0ba3d4fb00000002`,
	)
	refuse(
		"0ba3d4fc",
		"it holds 4 namespaces: 000000000ba3d4fb; 0ba3d4fb00000001; 0ba3d4fb00000002; 77aa000000000000",
	)
	if out := singleton(t, "l3", "clear", "--l3-dir", dir, "--l3-namespace-fingerprint", "0x77AA"); !strings.Contains(
		out,
		"removed namespace 77aa000000000000",
	) {
		t.Errorf("clear 0x77AA:\n%s", out)
	}
	if out := singleton(t, "l3", "clear", "--l3-dir", dir, "--l3-namespace-fingerprint", "0ba3d4fb00000002"); !strings.Contains(
		out,
		"removed namespace 0ba3d4fb00000002",
	) {
		t.Errorf("clear of a whole fingerprint:\n%s", out)
	}
	for _, name := range []string{"0ba3d4fb00000001", "000000000ba3d4fb"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s is gone, want it kept: %v", name, err)
		}
	}
}
