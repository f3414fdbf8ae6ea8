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

// The house's measures, the figures a reader entering the code meets: the packages and their lines, the largest
// package's share, the largest structs and how many files their methods span, the longest functions, the import
// arrows that point up into an ancestor, and the documentation at the root. `go test ./internal/lint -run
// HouseMeasures -v` prints them; the test holds the ones that are rules: no package imports its ancestor, the
// README stays within readmeBytesMax, and no function outgrows functionLinesMax, the house's 70 lines
// (TigerBeetle's limit): a function longer than that has parts that want names of their own.
const (
	readmeBytesMax   = 15 << 10
	functionLinesMax = 70
)

// packageStats is one package's non-test Go files, lines, and declarations.
type packageStats struct {
	files, lines int
	structFields map[string]int             // a struct's fields, by type name
	methodFiles  map[string]map[string]bool // the files a type's methods are in, by type name
	funcLines    map[string]int             // a function's lines, by name
}

// readPackage parses dir's non-test Go files.
func readPackage(t *testing.T, dir string) *packageStats {
	t.Helper()
	ps := &packageStats{structFields: map[string]int{}, methodFiles: map[string]map[string]bool{},
		funcLines: map[string]int{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ps.files++
		ps.lines += fset.File(f.Pos()).LineCount()
		ps.addDecls(fset, f, name)
	}
	return ps
}

// addDecls records f's structs, methods and functions.
func (ps *packageStats) addDecls(fset *token.FileSet, f *ast.File, file string) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.GenDecl:
			for _, s := range d.Specs {
				if ts, ok := s.(*ast.TypeSpec); ok {
					if st, ok := ts.Type.(*ast.StructType); ok {
						ps.structFields[ts.Name.Name] = st.Fields.NumFields()
					}
				}
			}
		case *ast.FuncDecl:
			name := d.Name.Name
			if d.Recv != nil && len(d.Recv.List) == 1 {
				recv := receiverName(d.Recv.List[0].Type)
				if ps.methodFiles[recv] == nil {
					ps.methodFiles[recv] = map[string]bool{}
				}
				ps.methodFiles[recv][file] = true
				name = recv + "." + name
			}
			ps.funcLines[name] = fset.Position(d.End()).Line - fset.Position(d.Pos()).Line + 1
		}
	}
}

// receiverName is a method receiver's type name, without its pointer or type parameters.
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return "?"
		}
	}
}

// TestHouseMeasures prints the house's measures and holds its rules.
func TestHouseMeasures(t *testing.T) {
	root := moduleRoot(t)
	module, imports := listModule(t)
	total, stats := 0, map[string]*packageStats{}
	for pkg := range imports {
		stats[pkg] = readPackage(t, filepath.Join(root, filepath.FromSlash(pkg)))
		total += stats[pkg].lines
	}
	logPackages(t, stats, total)
	logStructs(t, stats)
	checkFunctions(t, stats)
	checkNoImportOfAnAncestor(t, module, imports)
	checkRootDocs(t, root)
}

// logPackages prints the packages by their lines and the largest one's share.
func logPackages(t *testing.T, stats map[string]*packageStats, total int) {
	pkgs := sortedKeys(stats, func(a, b *packageStats) bool { return a.lines > b.lines })
	t.Logf("%d packages, %d lines of non-test Go; the largest, %s, %d lines (%.1f%%)", len(pkgs), total,
		show(pkgs[0]), stats[pkgs[0]].lines, 100*float64(stats[pkgs[0]].lines)/float64(max(1, total)))
	for _, p := range pkgs {
		t.Logf("  %-28s %2d files %5d lines", show(p), stats[p].files, stats[p].lines)
	}
}

// logStructs prints the five structs with the most fields and the files their methods span.
func logStructs(t *testing.T, stats map[string]*packageStats) {
	type row struct {
		name          string
		fields, files int
	}
	var rows []row
	for pkg, ps := range stats {
		for name, fields := range ps.structFields {
			rows = append(rows, row{show(pkg) + "." + name, fields, len(ps.methodFiles[name])})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].fields > rows[j].fields })
	for _, r := range rows[:min(5, len(rows))] {
		t.Logf("  struct %-34s %2d fields, methods in %d files", r.name, r.fields, r.files)
	}
}

// checkFunctions prints the longest functions and holds each to functionLinesMax.
func checkFunctions(t *testing.T, stats map[string]*packageStats) {
	type row struct {
		name  string
		lines int
	}
	var rows []row
	for pkg, ps := range stats {
		for name, n := range ps.funcLines {
			rows = append(rows, row{show(pkg) + "." + name, n})
			if n > functionLinesMax {
				t.Errorf("%s.%s is %d lines, over %d: give its parts names of their own", show(pkg), name, n,
					functionLinesMax)
			}
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].lines > rows[j].lines })
	t.Logf("%d functions, at most %d lines; the longest:", len(rows), functionLinesMax)
	for _, r := range rows[:min(5, len(rows))] {
		t.Logf("  %-50s %3d lines", r.name, r.lines)
	}
}

// checkNoImportOfAnAncestor fails a package that imports a package above it in the folder tree: data flows
// down into the rooms below, and a parent is a map of its children, not a library they use. A parent's test
// helper, named for it (mpi/mpitest, as net/http/httptest), is the one that may.
func checkNoImportOfAnAncestor(t *testing.T, module string, imports map[string][]string) {
	arrows := 0
	for pkg, imps := range imports {
		for _, imp := range imps {
			rel, ok := relPath(module, imp)
			helper := strings.HasSuffix(pkg, "test") && filepath.Dir(pkg) == rel
			if ok && rel != pkg && !helper && (rel == "" || strings.HasPrefix(pkg, rel+"/")) {
				arrows++
				t.Errorf("%s imports its ancestor %s", show(pkg), show(rel))
			}
		}
	}
	t.Logf("%d import arrows into an ancestor package", arrows)
}

// checkRootDocs prints the documentation at the root and holds the README to readmeBytesMax.
func checkRootDocs(t *testing.T, root string) {
	docs, _ := filepath.Glob(filepath.Join(root, "*.md"))
	bytes := 0
	for _, d := range docs {
		info, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		bytes += int(info.Size())
		if filepath.Base(d) == "README.md" && info.Size() > readmeBytesMax {
			t.Errorf("README.md is %d bytes, over %d: move a subject into docs/ and link it", info.Size(),
				readmeBytesMax)
		}
	}
	t.Logf("%d documents at the root, %d bytes", len(docs), bytes)
}

// sortedKeys are m's keys in the order less gives their values.
func sortedKeys[V any](m map[string]V, less func(a, b V) bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return less(m[keys[i]], m[keys[j]]) })
	return keys
}
