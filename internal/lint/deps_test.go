package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// A deep row of the code map (importRule.deep) holds its packages to its rule over every package
// they depend on, not only over their own imports: a core that imports no clock but a package that
// does still reaches the clock. The walk goes through every package of this module and every
// third-party one that the row's packages reach (`go list -deps`) and checks each one's imports
// against the row; it does not go into the standard library, whose own packages import what they
// need (fmt imports os, and strings imports sync through reflect's caches) without giving the core
// a file, a clock or a lock of its own.

// depsBeingCut are dependencies that break a deep row and that a change still has to cut: the test
// tolerates them, and fails once one is gone so that the list only shrinks. Each is "importer
// imports imported" as a failure prints it, with the row's packages before a colon.
var depsBeingCut = []string{
	// pool asks for huge pages for its tables (madvise, hugepages_linux.go): a hint, never a
	// result.
	"hicache/cache: pool imports syscall",
	// pool's BreakResetForTest's switch is an atomic.Bool, as the runner's ranks read it from their
	// goroutines.
	"hicache/cache: pool imports sync/atomic",
	"hicache/sim: pool imports sync/atomic",
}

// TestDeepRowsOverEveryDependency: no package that a deep row's packages depend on, in the default
// build and in the cuda and mpich builds, imports what the row forbids, but for depsBeingCut; a
// failure names the chain.
func TestDeepRowsOverEveryDependency(t *testing.T) {
	module, _ := listModule(t)
	deps := listDeps(t, module)
	seen := map[string]bool{}
	for _, r := range codeMap {
		if !r.deep {
			continue
		}
		for root := range deps {
			if rel, ok := relPath(module, root); !ok || !matchPkg(r.pkgs, rel) {
				continue
			}
			for _, chain := range r.brokenChains(module, root, deps) {
				importer, imported := chain[len(chain)-2], chain[len(chain)-1]
				key := strings.TrimSuffix(
					r.pkgs,
					"/...",
				) + ": " + showImport(
					module,
					importer,
				) + " imports " + showImport(
					module,
					imported,
				)
				seen[key] = true
				if slices.Contains(depsBeingCut, key) {
					continue
				}
				names := make([]string, len(chain))
				for i, p := range chain {
					names[i] = showImport(module, p)
				}
				t.Errorf(
					"%s depends on %s through %s (forbidden as %s): the code map says %q",
					showImport(
						module,
						root,
					),
					names[len(names)-1],
					strings.Join(names, " -> "),
					r.breaks(module, imported),
					r.rule,
				)
			}
		}
	}
	for _, key := range depsBeingCut {
		if !seen[key] {
			t.Errorf("%q is cut (or no longer reached): take it off depsBeingCut", key)
		}
	}
}

// brokenChains walks from root, breadth first, through every package of this module and every
// third-party one it depends on, but not into the standard library nor into the row's through
// packages, and returns, for each import that breaks r found on the way (below root itself, whose
// own imports TestCodeMapImports checks), the shortest chain of imports from root to it.
func (r importRule) brokenChains(module, root string, deps map[string]goPackage) [][]string {
	from := map[string]string{root: ""}
	queue := []string{root}
	var chains [][]string
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		for _, imp := range deps[pkg].imports {
			if pkg != root && r.breaks(module, imp) != "" {
				chain := []string{imp}
				for p := pkg; p != ""; p = from[p] {
					chain = append([]string{p}, chain...)
				}
				chains = append(chains, chain)
				continue
			}
			rel, inModule := relPath(module, imp)
			if _, ok := from[imp]; ok || deps[imp].standard ||
				inModule && slices.Contains(r.through, rel) {
				continue
			}
			from[imp] = pkg
			queue = append(queue, imp)
		}
	}
	return chains
}

// goPackage is what the walk needs of a package: its imports and whether it is the standard
// library's.
type goPackage struct {
	imports  []string
	standard bool
}

// listDeps runs `go list -deps` over every deep row's packages, in the default build and with the
// cuda and mpich tags, and returns every package they depend on (import path to its imports, the
// builds' union).
func listDeps(t *testing.T, module string) map[string]goPackage {
	t.Helper()
	var patterns []string
	for _, r := range codeMap {
		if r.deep {
			patterns = append(patterns, "./"+r.pkgs)
		}
	}
	deps := map[string]goPackage{}
	for _, tags := range []string{"", "cuda,mpich"} {
		args := append(
			[]string{"list", "-e", "-deps", "-tags", tags, "-json=ImportPath,Imports,Standard"},
			patterns...)
		cmd := exec.Command("go", args...)
		cmd.Dir = moduleRoot(t)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var p struct {
				ImportPath string
				Imports    []string
				Standard   bool
			}
			if err := dec.Decode(&p); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("go list -deps -tags %q: %v", tags, err)
			}
			d := deps[p.ImportPath]
			d.standard = p.Standard
			for _, imp := range p.Imports {
				if !slices.Contains(d.imports, imp) {
					d.imports = append(d.imports, imp)
				}
			}
			deps[p.ImportPath] = d
		}
	}
	if _, ok := deps[modPath(module, "pool")]; !ok {
		t.Fatalf(
			"go list -deps %s found no pool: it lists the dependencies wrong",
			strings.Join(patterns, " "),
		)
	}
	return deps
}
