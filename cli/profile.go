package cli

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/cphicache/cphicache/internal/errscope"
)

// startCPUProfile starts this rank's CPU profile into prefix.rank<worldRank>.pprof, a file per rank
// so that the ranks of a node never write one file; the returned function stops it and closes the
// file. An empty prefix profiles nothing.
func startCPUProfile(prefix string, worldRank int) (stop func(), err error) {
	if prefix == "" {
		return func() {}, nil
	}
	path := fmt.Sprintf("%s.rank%d.pprof", prefix, worldRank)
	f, err := os.Create(path)
	if err != nil {
		return nil, &errscope.ConfigError{Flag: "cpu-profile", Reason: err.Error()}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, &errscope.ConfigError{Flag: "cpu-profile", Reason: err.Error()}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
