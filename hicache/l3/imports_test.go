package l3

import (
	"go/build"
	"strings"
	"testing"
)

// TestImportsStayBelowTheController: the controller will use this package, so it must not use the controller
// (an import cycle in waiting), nor MPI, NCCL or the kernels; errscope is allowed for ConfigError, pool for Mix64.
func TestImportsStayBelowTheController(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	const module = "github.com/cphicache/cphicache/"
	allowed := map[string]bool{module + "hicache/errscope": true, module + "pool": true}
	for _, imp := range pkg.Imports {
		if strings.HasPrefix(imp, module) && !allowed[imp] {
			t.Errorf("hicache/l3 imports %s", imp)
		}
	}
}
