package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The module as the code map sees it: its packages and their imports (go list), and where the module's root is.

// listModule runs `go list` at the module's root, once per build (the default one, and with the
// cuda and mpich tags, whose files import what the default build's do not), and returns the
// module's path and each package's imports (relative path to import paths, the builds' union). A
// test file's imports are not the package's.
func listModule(t *testing.T) (module string, imports map[string][]string) {
	t.Helper()
	root := moduleRoot(t)
	imports = map[string][]string{}
	for _, tags := range []string{"", "cuda,mpich"} {
		cmd := exec.Command(
			"go",
			"list",
			"-e",
			"-tags",
			tags,
			"-json=ImportPath,Imports,Module",
			"./...",
		)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -tags %q ./... in %s: %v\n%s", tags, root, err, stderr.String())
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var p struct {
				ImportPath string
				Imports    []string
				Module     *struct{ Path string }
			}
			if err := dec.Decode(&p); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("go list -tags %q: %v", tags, err)
			}
			if p.Module == nil {
				t.Fatalf("go list: %s has no module", p.ImportPath)
			}
			module = p.Module.Path
			rel, ok := relPath(module, p.ImportPath)
			if !ok {
				t.Fatalf("go list: %s is not in module %s", p.ImportPath, module)
			}
			for _, imp := range p.Imports {
				if !slices.Contains(imports[rel], imp) {
					imports[rel] = append(imports[rel], imp)
				}
			}
			if _, ok := imports[rel]; !ok {
				imports[rel] = nil
			}
		}
	}
	if len(imports) < 10 {
		t.Fatalf("go list found %d packages in %s, expected the whole module", len(imports), root)
	}
	return module, imports
}

// moduleRoot is the directory of the module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" {
		t.Fatalf("go env GOMOD: %q, %v: the test needs the go command and the module", gomod, err)
	}
	return filepath.Dir(strings.TrimSpace(string(gomod)))
}

// matchPkg says whether pattern ("x", "x/..." or "" for main) names the module package rel.
func matchPkg(pattern, rel string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return rel == base || strings.HasPrefix(rel, base+"/")
	}
	return rel == pattern
}

// subtree is the pattern of a row's packages and everything below them, which they may always
// import.
func subtree(pattern string) string {
	if pattern == "" || strings.HasSuffix(pattern, "/...") {
		return pattern
	}
	return pattern + "/..."
}

func relPath(module, imp string) (string, bool) {
	if imp == module {
		return "", true
	}
	rel, ok := strings.CutPrefix(imp, module+"/")
	return rel, ok
}

func modPath(module, rel string) string {
	if rel == "" {
		return module
	}
	return module + "/" + rel
}

// showImport names a module package by its relative path, as the code map does.
func showImport(module, imp string) string {
	if rel, ok := relPath(module, imp); ok {
		return show(rel)
	}
	return imp
}

func show(rel string) string {
	if rel == "" {
		return "main"
	}
	return rel
}
