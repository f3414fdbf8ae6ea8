// Package lint holds the checks of the whole repository, as pebble's internal/lint does, and
// nothing else: its tests alone. TestCodeMapImports holds every package to its row of DESIGN.md's
// code map; TestDeepRowsOverEveryDependency holds the IO-free core and the simulator to theirs over
// every package they depend on, not only over their own imports, and names the chain of imports
// that breaks one; TestNoFileOverTheLineLimit holds every source, script and document to the
// house's 400 lines; TestDesignReferencesExist holds every citation of DESIGN.md (docs/DESIGN.md),
// and of the other documents, to a heading it has; TestDocLinksResolve holds every Markdown link to
// a file and a heading that exist. They list the module with `go list` and walk the repository from
// go.mod's folder, so they run from anywhere:
//
//	go test ./internal/lint
//
// It imports nothing of this module, and nothing imports it.
package lint
