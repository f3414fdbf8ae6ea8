package runner

import (
	"fmt"
	"iter"

	"github.com/cphicache/cphicache/hicache/cache"
)

// The content of this rank's device memory: the KV a step computes (Fill) and the check of a finished load-back
// (VerifyLoad), run by run of consecutive device pages.

// Fill writes a node's KV, as the model would have computed it, into its device pages: per layer and payload,
// each run of consecutive device pages is computed in place in the CPU build's device buffer, or into a staging
// buffer written in one call (a part is often a few hundred bytes, and a GPU's copy per part would cost more
// than the part).
func (rs *runState) Fill(f *cache.Fill) error {
	g := rs.geometry
	for r := range rs.deviceRunsOf(f.DevicePages) {
		for i := r.from; i < r.to; i++ {
			cache.FillPart(r.part(i, rs.partBytes), f.Tokens[i*g.PageTokens:(i+1)*g.PageTokens], f.StartPos+i*g.PageTokens, g.TokenBytes, r.key)
		}
		if rs.hostDevice != nil {
			continue
		}
		if err := rs.faults.WriteDevice(r.offset, r.buf); err != nil {
			return fmt.Errorf("write KV of pages %d..%d: %w", f.DevicePages[r.from], f.DevicePages[r.to-1], err)
		}
	}
	return nil
}

// VerifyLoad checks every part of a finished load-back against the content function, in place in the CPU
// build's device buffer, or reading each run of consecutive device pages of a layer and payload back in one call.
func (rs *runState) VerifyLoad(v *cache.Verify) (checked, mismatches int64, err error) {
	g := rs.geometry
	bad := make([]bool, len(v.DevicePages))
	for r := range rs.deviceRunsOf(v.DevicePages) {
		if rs.hostDevice == nil {
			if err := rs.faults.ReadDevice(r.offset, r.buf); err != nil {
				return 0, 0, err
			}
		}
		for i := r.from; i < r.to; i++ {
			if !cache.PartMatches(r.part(i, rs.partBytes), v.Tokens[i*g.PageTokens:(i+1)*g.PageTokens], v.StartPos+i*g.PageTokens, g.TokenBytes, r.key) {
				bad[i] = true
			}
		}
	}
	for _, b := range bad {
		checked++
		if b {
			mismatches++
		}
	}
	return checked, mismatches, nil
}

// deviceRun is one run of consecutive device pages [from, to) of one layer and payload of this rank: its
// content key, its offset in the device buffer, and where its parts are computed or checked (devicePlace).
type deviceRun struct {
	key      cache.ContentKey
	from, to int
	offset   int64
	buf      []byte
}

// part is page i's part in the run's buffer.
func (r deviceRun) part(i int, partBytes int64) []byte {
	return r.buf[int64(i-r.from)*partBytes : int64(i-r.from+1)*partBytes]
}

// deviceRunsOf yields, per layer and payload, every run of pages (deviceRuns) with its place: Fill and
// VerifyLoad walk the same runs.
func (rs *runState) deviceRunsOf(pages []int32) iter.Seq[deviceRun] {
	return func(yield func(deviceRun) bool) {
		for layer := range rs.geometry.Layers {
			for payload := range rs.geometry.PayloadsPerLayer {
				key := rs.contentKey(rs.job.Topo.CPRank, layer, payload)
				for from, to := range rs.deviceRuns(pages) {
					offset := rs.deviceOffset(pages[from], layer, payload)
					if !yield(deviceRun{key: key, from: from, to: to, offset: offset, buf: rs.devicePlace(offset, to-from)}) {
						return
					}
				}
			}
		}
	}
}

// devicePlace is where pages parts at offset are computed or checked: the device buffer itself in the CPU
// build, else the staging buffer.
func (rs *runState) devicePlace(offset int64, pages int) []byte {
	n := int64(pages) * rs.partBytes
	if rs.hostDevice != nil {
		return rs.hostDevice[offset : offset+n]
	}
	return rs.staging(pages)
}

// stagingBytesMax bounds the staging buffer: a run of pages longer than it is cut (a real model's parts are
// tens of KiB).
const stagingBytesMax = 1 << 20

// deviceRuns yields the runs [from, to) of pages whose device page numbers are consecutive, which are
// contiguous in each layer and payload's region of the device buffer (deviceOffset), of at most
// stagingBytesMax (and at least one page).
func (rs *runState) deviceRuns(pages []int32) func(yield func(from, to int) bool) {
	runMax := max(1, int(stagingBytesMax/rs.partBytes))
	return func(yield func(from, to int) bool) {
		for from := 0; from < len(pages); {
			to := from + 1
			for to < len(pages) && to-from < runMax && pages[to] == pages[to-1]+1 {
				to++
			}
			if !yield(from, to) {
				return
			}
			from = to
		}
	}
}

// staging is the fill and verify buffer for pages parts, grown as needed and kept.
func (rs *runState) staging(pages int) []byte {
	n := int64(pages) * rs.partBytes
	if int64(cap(rs.partBuf)) < n {
		rs.partBuf = make([]byte, n)
	}
	return rs.partBuf[:n]
}
