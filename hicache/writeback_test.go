package hicache

import (
	"testing"

	"github.com/cphicache/cphicache/hicache/workload"
)

// Under write_back, L1 eviction backs a node up and lets it leave L1 when the backup commits. Those pages are
// on their way out: evictL1 must count them toward what it was asked to free, or one page short of room backs
// up, and then evicts, every evictable node in L1.
func TestInProcessWriteBackEvictsOnlyWhatItNeeds(t *testing.T) {
	skipUnlessOneRank(t)
	prompt := func(k int32) workload.Event { return req(tokenRun(1000*k, 4*modelPageTokens)...) } // 4 pages
	// Three prompts fill L1's 12 pages; the fourth needs 4 pages: one prompt's worth, the least recently used.
	events := []workload.Event{prompt(1), prompt(2), prompt(3), prompt(4)}
	cfg := modelConfig(12, 64, WriteBack)
	for _, n := range []int{1, 2} {
		for r, res := range runInProcess(cfg, n, events, 1) {
			if res.err != nil {
				t.Fatal(res.err)
			}
			if c := res.counters; c.L1Evictions != 1 || c.BackupReserved != 1 {
				t.Errorf("N=%d rank %d: %d L1 evictions and %d backups to make room for one 4-page prompt in a full L1 of 4-page prompts, want 1 and 1",
					n, r, c.L1Evictions, c.BackupReserved)
			}
		}
	}
}
