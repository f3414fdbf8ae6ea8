package runner

import (
	"iter"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/kernels"
)

// The content of this rank's device memory: the KV a step computes (Fill) and the check of a
// finished load-back (VerifyLoad), run by run of consecutive device pages.

// deviceRun is one run of consecutive device pages [from, to) of one layer and payload of this
// rank: its content key, its offset in the device buffer, and where its parts are computed or
// checked (devicePlace).
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

// deviceRunsOf yields, per layer and payload, every run of pages (deviceRuns) with its place: Fill
// and VerifyLoad walk the same runs.
func (rs *runState) deviceRunsOf(pages []int32) iter.Seq[deviceRun] {
	return func(yield func(deviceRun) bool) {
		for layer := range rs.geometry.Layers {
			for payload := range rs.geometry.PayloadsPerLayer {
				key := rs.contentKey(rs.job.Topo.CPRank, layer, payload)
				for from, to := range rs.deviceRuns(pages) {
					offset := rs.deviceOffset(pages[from], layer, payload)
					if !yield(
						deviceRun{
							key:    key,
							from:   from,
							to:     to,
							offset: offset,
							buf:    rs.devicePlace(offset, to-from),
						},
					) {
						return
					}
				}
			}
		}
	}
}

// devicePlace is where pages parts at offset are computed or checked: the device buffer itself in
// the CPU build, else the staging buffer.
func (rs *runState) devicePlace(offset int64, pages int) []byte {
	n := int64(pages) * rs.partBytes
	if rs.hostDevice != nil {
		return rs.hostDevice[offset : offset+n]
	}
	return rs.staging(pages)
}

// stagingBytesMax bounds the staging buffer: a run of pages longer than it is cut (a real model's
// parts are tens of KiB).
const stagingBytesMax = 1 << 20

// deviceRuns yields the runs [from, to) of pages whose device page numbers are consecutive, which
// are contiguous in each layer and payload's region of the device buffer (deviceOffset), of at most
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

// deviceOffset is where (page, layer, payload) lives in the device KV buffer:
// [layer][payload][page], so the pages of one layer and payload are contiguous, as in a per-layer
// KV buffer of a serving engine.
func (rs *runState) deviceOffset(page int32, layer, payload int) int64 {
	g := rs.geometry
	part := (int64(layer)*int64(g.PayloadsPerLayer)+int64(payload))*int64(rs.opts.DevicePages) + int64(page)
	return part * rs.partBytes
}

// spansFor builds, per layer, the copies between a copy's device pages and its slots: per payload,
// in page order. Kernels coalesce neighbours that are contiguous on both sides: a payload's
// consecutive device pages are (deviceOffset), and so are its consecutive slots in a layer_first
// slab, so such a run becomes one copy. (Page-major order put the other payload's span between
// every two, so nothing coalesced: an L2-only replay copied parts of a few hundred bytes, each a
// cache and TLB miss in the slab.)
func (rs *runState) spansFor(w *cache.Copy) [][]kernels.Span {
	g := rs.geometry
	spans := make([][]kernels.Span, g.Layers)
	for layer := range spans {
		spans[layer] = make([]kernels.Span, 0, len(w.DevicePages)*g.PayloadsPerLayer)
		for payload := range g.PayloadsPerLayer {
			for i, page := range w.DevicePages {
				s := w.Slots[i]
				spans[layer] = append(spans[layer], kernels.Span{
					DeviceOffsetBytes: rs.deviceOffset(page, layer, payload),
					Slab:              s.Slab,
					SlabOffsetBytes: rs.parts.Offset(
						int(s.Slab),
						int(s.Slot),
						rs.job.Topo.NodePart,
						layer,
						payload,
					),
					Bytes: rs.partBytes,
				})
			}
		}
	}
	return spans
}

func (rs *runState) contentKey(rank, layer, payload int) cache.ContentKey {
	return cache.ContentKey{Seed: rs.opts.Seed, Rank: rank, Layer: layer, Payload: payload}
}
