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

// The assertion policy's measure (DESIGN.md, "Asserts"): how many assertions the packages that keep the
// invariants make per function. An assertion is a call of the builtin panic (a broken invariant of the process's
// own state, which the house dumps before it throws), or a check that reports a broken invariant to the CP group
// instead, a call whose first argument is cache.FailureInvariant (the core's step invariants travel in the next
// consensus so that no peer waits for the watchdog). Functions are the declarations with a body in the package's
// files that are not tests; the deliberate bugs (bugs*.go, compiled out) are left out of both counts.

// assertFloor is each package's floor in assertions per function, a ratchet: raise it when the density rises,
// never lower it to let a change through. `go test ./internal/lint -run AssertDensity -v` prints the counts.
var assertFloor = map[string]float64{
	"hicache/cache": 0,
	"hicache/l3":    0,
	"hicache":       0,
}

// TestAssertDensity: every package of assertFloor makes at least its floor of assertions per function.
func TestAssertDensity(t *testing.T) {
	root := moduleRoot(t)
	pkgs := make([]string, 0, len(assertFloor))
	for pkg := range assertFloor {
		pkgs = append(pkgs, pkg)
	}
	sort.Strings(pkgs)
	for _, pkg := range pkgs {
		funcs, asserts := countAsserts(t, filepath.Join(root, pkg))
		if funcs == 0 {
			t.Fatalf("%s: no functions found: the count reads the package wrong", pkg)
		}
		density := float64(asserts) / float64(funcs)
		t.Logf("%-14s %4d functions %4d assertions %.2f per function (floor %.2f)", pkg, funcs, asserts, density, assertFloor[pkg])
		if density < assertFloor[pkg] {
			t.Errorf("%s makes %.2f assertions per function, under its floor of %.2f: assert the pre- and post-conditions of what it changes (DESIGN.md, \"Asserts\")",
				pkg, density, assertFloor[pkg])
		}
	}
}

// countAsserts counts the functions and assertions of the package in dir, its tests and deliberate bugs aside.
func countAsserts(t *testing.T, dir string) (funcs, asserts int) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || strings.HasPrefix(name, "bugs") {
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
			funcs++
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok && isAssertion(call) {
					asserts++
				}
				return true
			})
		}
	}
	return funcs, asserts
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
