package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The assertion policy's measure (DESIGN.md, "Asserts"): how many assertions the packages that keep
// the invariants make per function. An assertion is a call of the builtin panic (a broken invariant
// of the process's own state, which the house dumps before it throws), or a check that reports a
// broken invariant to the CP group instead, a call whose first argument is cache.FailureInvariant
// (the core's step invariants travel in the next consensus so that no peer waits for the watchdog).
// Functions are the declarations with a body in the package's files that are not tests; the
// deliberate bugs (bugs*.go, compiled out) are left out of both counts.

// assertFloor is each package's floor in assertions per function, a ratchet: raise it when the
// density rises, never lower it to let a change through. `go test ./internal/lint -run
// AssertDensity -v` prints the counts.
var assertFloor = map[string]float64{
	"hicache/cache":  0.20, // 0.11 before issue 33's assertion policy
	"hicache/l3":     0.05, // 0
	"hicache/runner": 0.01, // 0
}

// keepers are the functions that change what an invariant rules (the allocator's use, the tree, the
// device pages, eviction, the copy queues, commit, flush, the L3 tier and store, the runner's
// waits), by package, as "Receiver.name": each must assert at least one of its pre- or
// post-conditions.
var keepers = map[string][]string{
	"hicache/cache": {
		"Core.backup",
		"Core.takeDevicePages",
		"Core.evictL1",
		"Core.evictNode",
		"Core.commit",
		"Core.releaseLoads",
		"Core.endStep",
		"Core.reset",
		"Core.consensus",
		"Core.retireWrites",
		"Core.resolvePrefetches",
		"Core.Complete",
		"opQueue.push",
		"opQueue.advance",
		"opQueue.retire",
		"devicePool.take",
		"devicePool.give",
		"devicePool.unpin",
		"radixTree.newNode",
		"radixTree.split",
		"radixTree.remove",
		"evictQueue.popOldest",
	},
	"hicache/l3": {
		"Store.Write",
		"Store.Read",
		"Store.ReadBlock",
		"Store.eachPart",
		"lruIndex.insert",
		"lruIndex.remove",
	},
	"hicache/runner": {"runState.localWait", "runState.Start", "runState.landRead"},
}

// TestAssertDensity: every package of assertFloor makes at least its floor of assertions per
// function, and each of its keepers asserts something.
func TestAssertDensity(t *testing.T) {
	root := moduleRoot(t)
	pkgs := make([]string, 0, len(assertFloor))
	for pkg := range assertFloor {
		pkgs = append(pkgs, pkg)
	}
	sort.Strings(pkgs)
	for _, pkg := range pkgs {
		byFunc := countAsserts(t, filepath.Join(root, pkg))
		asserts, keeperAsserts := 0, 0
		for _, n := range byFunc {
			asserts += n
		}
		for _, name := range keepers[pkg] {
			n, ok := byFunc[name]
			if !ok || n == 0 {
				t.Errorf(
					"%s: %s changes what an invariant rules but asserts nothing (or is gone: update keepers)",
					pkg,
					name,
				)
			}
			keeperAsserts += n
		}
		density := float64(asserts) / float64(len(byFunc))
		t.Logf(
			"%-14s %4d functions %4d assertions %.2f per function (floor %.2f); its %d keepers %.2f per function",
			pkg,
			len(byFunc),
			asserts,
			density,
			assertFloor[pkg],
			len(keepers[pkg]),
			float64(keeperAsserts)/float64(max(1, len(keepers[pkg]))),
		)
		if density < assertFloor[pkg] {
			t.Errorf(
				"%s makes %.2f assertions per function, under its floor of %.2f: assert the pre- and post-conditions of what it changes (DESIGN.md, \"Asserts\")",
				pkg,
				density,
				assertFloor[pkg],
			)
		}
	}
}

// countAsserts counts the assertions of every function of the package in dir, its tests and
// deliberate bugs aside, by "Receiver.name" (a method) or name.
func countAsserts(t *testing.T, dir string) map[string]int {
	t.Helper()
	byFunc := map[string]int{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") ||
			strings.HasPrefix(name, "bugs") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name := fn.Name.Name
			if fn.Recv != nil && len(fn.Recv.List) == 1 {
				recv := fn.Recv.List[0].Type
				if star, ok := recv.(*ast.StarExpr); ok {
					recv = star.X
				}
				if id, ok := recv.(*ast.Ident); ok {
					name = id.Name + "." + name
				}
			}
			// a function of one name in files of different build tags: count one
			if _, dup := byFunc[name]; dup {
				continue
			}
			byFunc[name] = 0
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok && isAssertion(call) {
					byFunc[name]++
				}
				return true
			})
		}
	}
	if len(byFunc) == 0 {
		t.Fatalf("%s: no functions found: the count reads the package wrong", dir)
	}
	return byFunc
}

// isAssertion: a call of panic, or a call reporting FailureInvariant.
func isAssertion(call *ast.CallExpr) bool {
	if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "panic" {
		return true
	}
	if len(call.Args) == 0 {
		return false
	}
	switch a := call.Args[0].(type) {
	case *ast.Ident:
		return a.Name == "FailureInvariant"
	case *ast.SelectorExpr:
		return a.Sel.Name == "FailureInvariant"
	}
	return false
}
