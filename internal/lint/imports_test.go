package lint

import (
	"slices"
	"strings"
	"testing"
)

// The code map's import rules (DESIGN.md, "Code map", its "must not import" column), checked over
// every package of the module, as pebble's internal/lint checks its own: a rule that only a
// reviewer keeps is broken by the first change that needs a shortcut. It lists the whole module
// with `go list`, so where it runs does not matter.

// importRule is one row of the code map. Package patterns are relative to the module root: "pool"
// is that package, "pool/..." it and every package below it, "" the main package. A package may
// always import its own row's subtree. A standard (or third-party) entry in notStd stands for the
// packages below it too: "os" is also os/exec and os/signal, "sync" also sync/atomic, "log" also
// log/slog.
type importRule struct {
	pkgs string // the packages the row applies to
	rule string // the code map's words, which a failure quotes
	// notMod: the module's packages they must not import; "..." is every one of them; allowMod's
	// are exempt.
	notMod, allowMod []string
	notStd           []string
	importedBy       []string // when set: the only packages that may import them
	ifExists         bool     // a package issue 21 adds: checked once it exists, not required to
	// a rule across folders, not a package's own row (each package needs one of those)
	across bool
	// deep: the rule holds over every package they depend on, not only their own imports
	// (deps_test.go), but for the through packages of this module, which the walk does not go into
	// (their own rows rule them).
	deep    bool
	through []string
}

// Packages whose code must not reach a clock, randomness or I/O, or the job around the cache.
var (
	randomness   = []string{"math/rand", "crypto/rand"}
	belowTheCore = []string{
		"mpi/...",
		"nccl/...",
		"kernels/...",
		"hicache/runner/...",
		"hicache/transport/...",
		"hicache/shm/...",
		"hicache/spmd/...",
	}
)

var codeMap = []importRule{
	{
		pkgs:     "",
		rule:     "main.go: hands the build's version to cli/ and imports nothing else of this module",
		notMod:   []string{"..."},
		allowMod: []string{"cli"},
	},
	{
		pkgs:       "cli",
		rule:       "cli/: the urfave/cli/v2 application; it may import anything, and only main imports it",
		importedBy: []string{""},
	},
	{
		pkgs:   "mpi/...",
		rule:   "mpi/ must not import anything of this module",
		notMod: []string{"..."},
	},
	{
		pkgs:   "nccl/...",
		rule:   "nccl/ must not import mpi/ (it takes a bootstrap interface; its doc: no other package of this module)",
		notMod: []string{"..."},
	},
	{
		pkgs: "pool/...",
		rule: "pool/ must not import MPI, NCCL, clocks, randomness (its doc: nor os; nor the kernels or anything under hicache/, above it; only internal/errscope, below both, for ConfigError)",
		notMod: []string{
			"mpi/...",
			"nccl/...",
			"kernels/...",
			"hicache/...",
		},
		allowMod: []string{"internal/errscope"},
		notStd:   append([]string{"time", "os"}, randomness...),
	},
	{
		pkgs:   "hicache",
		rule:   "hicache/: a folder, its root package only the doc that maps the packages below it; it imports nothing",
		notMod: []string{"..."},
	},
	{
		pkgs:   "hicache/runner",
		rule:   "hicache/runner/: one pass of a job around the cache; it must not import validate/ or bench/ (nor cli/ or main)",
		notMod: []string{"hicache/validate", "hicache/sweep", "bench/..."},
	},
	{
		pkgs: "hicache/runner/runnertest",
		rule: "hicache/runner/runnertest/: the SPMD tests' shared fixtures, for tests alone; it imports no runner, and no package imports it",
		notMod: []string{
			"hicache/runner",
			"hicache/validate",
			"bench/...",
			"cli",
		},
		importedBy: []string{},
	},
	{
		pkgs:       "hicache/validate",
		rule:       "hicache/validate/: the validation matrix over the runner's passes, reading their results; only cli/ imports it",
		notMod:     []string{"bench/...", "cli"},
		importedBy: []string{"cli"},
	},
	{
		pkgs: "hicache/config",
		rule: "hicache/config/: a job's options, their parsing, sizing and pure checks; no MPI, NCCL, kernels, shared memory, transport, spmd or runner, over every dependency, and no test hook (the runner's Testing)",
		notMod: []string{
			"mpi/...",
			"nccl/...",
			"kernels/...",
			"hicache/shm/...",
			"hicache/transport/...",
			"hicache/spmd/...",
			"hicache/runner/...",
			"hicache/sweep",
			"bench/...",
			"cli",
		},
		deep: true,
	},
	{
		pkgs:   "hicache/...",
		rule:   "nothing under hicache/ imports bench/",
		notMod: []string{"bench/..."},
		across: true,
	},
	{
		pkgs:   "hicache/...",
		rule:   "nothing under hicache/ imports hicache/ itself (a folder: its packages import each other)",
		notMod: []string{"hicache"},
		across: true,
	},
	{
		pkgs:     "hicache/spmd/...",
		rule:     "hicache/spmd/ must not import anything but mpi/ (and errscope/, whose types it re-exports)",
		notMod:   []string{"..."},
		allowMod: []string{"mpi", "internal/errscope"},
	},
	{
		pkgs:   "internal/errscope",
		rule:   "internal/errscope/ holds the error types and the counts their messages say: it imports nothing of this module",
		notMod: []string{"..."},
	},
	{
		pkgs:   "hicache/workload/...",
		rule:   "hicache/workload/ must not import mpi/, nccl/, kernels/, the runner",
		notMod: []string{"mpi/...", "nccl/...", "kernels/...", "hicache/runner/..."},
	},
	{pkgs: "hicache/transport/...", rule: "hicache/transport/ must not import the runner",
		notMod: []string{"hicache/runner/..."}},
	{
		pkgs: "hicache/l3/...",
		rule: "hicache/l3/ must not import the runner (it may use errscope/ for ConfigError, l3block/ for its keys and page slots and pool/ for the geometry, and nothing else of this module)",
		notMod: []string{
			"...",
		},
		allowMod: []string{"internal/errscope", "hicache/l3block", "pool"},
	},
	{
		pkgs: "hicache/l3block",
		rule: "hicache/l3block/: an L3 block's key and page slots, pure; it imports nothing of this module, and no files, clock, sync, logging or randomness",
		notMod: []string{
			"...",
		},
		notStd: append(
			[]string{
				"os",
				"time",
				"log",
				"sync",
				"net",
				"runtime",
				"syscall",
				"io/fs",
				"path/filepath",
				"golang.org/x/sys",
				"C",
			},
			randomness...),
	},
	{
		pkgs:     "hicache/bound",
		rule:     "hicache/bound/: the offline bound on hits (Belady's MIN over the prefix tree), pure; it imports workload/ and pool/ (Mix64) and nothing else of this module, and no files, clock, sync or randomness",
		notMod:   []string{"..."},
		allowMod: []string{"hicache/workload", "pool"},
		notStd:   append([]string{"os", "time", "sync"}, randomness...),
	},
	{
		pkgs:     "hicache/sizing",
		rule:     "hicache/sizing/: the model table, byte sizes and a node's memory; it imports errscope/ and nothing else of this module",
		notMod:   []string{"..."},
		allowMod: []string{"internal/errscope"},
	},
	{
		pkgs:     "hicache/prefill",
		rule:     "hicache/prefill/: the prefill cost model, pure functions with no clock of its own; it imports sizing/ and errscope/ and nothing else of this module (no MPI, no runner), and no files, clock, sync or randomness",
		notMod:   []string{"..."},
		allowMod: []string{"hicache/sizing", "internal/errscope"},
		notStd: append(
			[]string{"os", "time", "sync", "io/fs", "path/filepath", "syscall", "C"},
			randomness...),
	},
	{
		pkgs:     "hicache/outfile",
		rule:     "hicache/outfile/: the files a command writes for its user; it imports errscope/ and nothing else of this module",
		notMod:   []string{"..."},
		allowMod: []string{"internal/errscope"},
	},
	{
		pkgs:   "hicache/timeline",
		rule:   "hicache/timeline/: run --timeline's recorder and Chrome trace writer; it imports nothing of this module (no MPI: the runner gathers its buffers)",
		notMod: []string{"..."},
	},
	{
		pkgs:   "hicache/shm/...",
		rule:   "hicache/shm/ must not import the runner",
		notMod: []string{"hicache/runner/..."},
	},
	{
		pkgs: "hicache/serving",
		rule: "hicache/serving/: the serving clock's pure part (arrivals, step batching, step costs, the virtual clock); no clock, I/O, sync or randomness, and nothing of this module",
		notMod: []string{
			"...",
		},
		notStd: append(
			[]string{"os", "time", "sync", "log", "net", "runtime", "syscall"},
			randomness...),
	},
	{
		pkgs: "hicache/report",
		rule: "hicache/report/: the report from the gathered tallies, no collective: it must not import the core (its Tallies are its own), the runner (hicache/runner/), spmd, MPI, NCCL, kernels, transport, shm or the L3 store, over every dependency",
		notMod: []string{
			"hicache/cache/...",
			"hicache/runner/...",
			"hicache/spmd/...",
			"mpi/...",
			"nccl/...",
			"kernels/...",
			"hicache/transport/...",
			"hicache/shm/...",
			"hicache/l3/...",
			"bench/...",
			"cli",
		},
		deep: true,
	},
	{
		pkgs:       "hicache/sweep",
		rule:       "hicache/sweep/: nothing of the cache imports it (cli/ alone does)",
		importedBy: []string{"cli"},
	},
	{
		pkgs:   "kernels/...",
		rule:   "kernels/ must not import hicache/ (its doc: nor mpi/, nccl/, pool/: it knows bytes and offsets)",
		notMod: []string{"mpi/...", "nccl/...", "pool/...", "hicache/..."},
	},
	{
		pkgs:       "internal/lint",
		rule:       "internal/lint/: the repository's checks, tests alone; it imports nothing of this module, and nothing imports it",
		notMod:     []string{"..."},
		importedBy: []string{},
	},
	{pkgs: "bench/...", rule: "bench/: benchmarks; it may import anything but cli/ and main"},
	{pkgs: "hicache/cache/...", ifExists: true,
		rule:   "hicache/cache/ is IO-free: no MPI, NCCL, kernels, transport, shm, spmd, the runner or the L3 store (hicache/l3block for the L3 block's key and page slots), no files, clock, goroutines' sync, network, runtime, randomness, system calls, logging",
		notMod: append([]string{"hicache/l3"}, belowTheCore...), deep: true,
		notStd: append(
			[]string{
				"os",
				"time",
				"log",
				"sync",
				"net",
				"runtime",
				"syscall",
				"io/fs",
				"path/filepath",
				"golang.org/x/sys",
				"C",
			},
			randomness...)},
	{pkgs: "hicache/sim/...", ifExists: true,
		rule:   "hicache/sim/ drives the IO-free core in one goroutine with its own seeded PRNG: no MPI, NCCL, kernels, transport, shm, spmd or the runner, no clock, sync, runtime or math/rand, over every dependency but the real L3 store it runs over memory (hicache/l3 on l3.MemFS)",
		notMod: belowTheCore, notStd: append([]string{"time", "sync", "runtime"}, randomness...), deep: true, through: []string{"hicache/l3"}},
}

// TestCodeMapImports: every package of the module breaks no row of codeMap, in the default build
// and in the cuda and mpich builds; every package has a row (a new package needs a line in the code
// map and here); every row other than ifExists' names a package that exists (a renamed package must
// not drop its rules unseen).
func TestCodeMapImports(t *testing.T) {
	module, imports := listModule(t)
	covered := map[string]bool{}
	for _, r := range codeMap {
		matched := false
		for pkg, imps := range imports {
			if !matchPkg(r.pkgs, pkg) {
				continue
			}
			matched, covered[pkg] = true, covered[pkg] || !r.across
			for _, imp := range imps {
				if as := r.breaks(module, imp); as != "" {
					t.Errorf(
						"%s imports %s (forbidden as %s): the code map says %q",
						show(pkg),
						showImport(module, imp),
						as,
						r.rule,
					)
				}
			}
		}
		if !matched && !r.ifExists {
			t.Errorf(
				"the code map's row %q names no package of this module: %s",
				show(r.pkgs),
				r.rule,
			)
		}
		if r.importedBy == nil {
			continue
		}
		for pkg, imps := range imports {
			if slices.Contains(imps, modPath(module, r.pkgs)) &&
				!slices.Contains(r.importedBy, pkg) &&
				!matchPkg(r.pkgs, pkg) {
				t.Errorf("%s imports %s: the code map says %q", show(pkg), show(r.pkgs), r.rule)
			}
		}
	}
	for pkg := range imports {
		if !covered[pkg] {
			t.Errorf(
				"%s has no row in the code map (DESIGN.md and codeMap here): say what it must not import",
				show(pkg),
			)
		}
	}
}

// breaks says why importing imp breaks r, or "" when it does not.
func (r importRule) breaks(module, imp string) string {
	if rel, ok := relPath(module, imp); ok {
		if matchPkg(subtree(r.pkgs), rel) {
			return ""
		}
		for _, not := range r.notMod {
			if not == "..." && !slices.Contains(r.allowMod, rel) {
				return "a package of this module other than " + strings.Join(
					append(slices.Clone(r.allowMod), subtree(r.pkgs)),
					", ",
				)
			}
			if not != "..." && matchPkg(not, rel) && !slices.Contains(r.allowMod, rel) {
				return show(not)
			}
		}
		return ""
	}
	for _, not := range r.notStd {
		if imp == not || strings.HasPrefix(imp, not+"/") {
			return not
		}
	}
	return ""
}
