package config

import (
	"fmt"
	"maps"
	"math"
	"strconv"

	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/internal/errscope"
)

// Capacities in bytes (--l2-bytes per node, --device-bytes per rank) and a model's size (--model)
// become the geometry flags' values here, once the CP size and the ranks per node are known
// (Options.Size). Bytes are counted at the model's real bytes per token even when the copies are
// scaled down (--copy-token-bytes): the capacity in tokens, and so every hit count, is the real
// model's, while the slab holds fewer bytes.

// Size returns the options with the model and the byte capacities turned into the geometry for a CP
// group of cp ranks over nodes nodes of ranksPerNode ranks; the options themselves are not changed.
// --l2-bytes is per node: a node gives it to the CP groups' parts it holds, each node's slot
// holding its cp/nodes ranks' parts, so a group over k nodes gets k times the slots of the same
// --l2-bytes on one node. Every rank computes the same, so an error is the same on every rank (it
// names its flag).
func (o *Options) Size(cp, ranksPerNode, nodes int) (*Options, error) {
	s := *o
	s.GroupNodes = max(1, nodes)
	nodeParts := cp / s.GroupNodes
	if err := o.sizeTokenBytes(&s, cp); err != nil {
		return nil, err
	}
	s.AccountTokenBytes = s.TokenBytes
	if o.Serving != nil {
		var err error
		if s.Serving, err = o.Serving.sized(&s, cp); err != nil {
			return nil, err
		}
	}
	if o.CopyTokenBytes > 0 {
		if o.CopyTokenBytes > s.AccountTokenBytes {
			return nil, &errscope.ConfigError{
				Flag: "copy-token-bytes",
				Reason: fmt.Sprintf(
					"%d is more than the %d bytes per token per rank per layer per payload it stands in for: it can only copy fewer",
					o.CopyTokenBytes,
					s.AccountTokenBytes,
				),
			}
		}
		s.TokenBytes = o.CopyTokenBytes
	}
	rankPageBytes := s.RankPageBytes()
	if o.L2Bytes > 0 {
		slots, err := o.l2SlotsOfBytes(ranksPerNode, nodeParts, s.PageTokens, rankPageBytes)
		if err != nil {
			return nil, err
		}
		s.L2Slots = slots
	}
	if o.DeviceBytes > 0 {
		pages, err := o.devicePagesOfBytes(s.PageTokens, rankPageBytes)
		if err != nil {
			return nil, err
		}
		s.DevicePages = pages
	}
	return &s, nil
}

// RankPageBytes is what one rank's part of a page accounts for in the sized options (after Size):
// the bytes --device-bytes counts a device page at, and a slot's share of --l2-bytes on one rank.
func (o *Options) RankPageBytes() int64 {
	account := o.AccountTokenBytes
	if account == 0 { // options that did not go through Size
		account = o.TokenBytes
	}
	return int64(o.PageTokens) * int64(o.Layers) * int64(o.PayloadsPerLayer) * int64(account)
}

// sizeTokenBytes sets s's geometry of a token for a CP group of cp ranks: --model's layers,
// payloads and bytes a rank from the model table, or else the default model's bytes a token over
// the group (GroupTokenBytes) divided among its ranks, layers and payloads and rounded up to a
// multiple of 8, so that the default model is the same at every CP size.
func (o *Options) sizeTokenBytes(s *Options, cp int) error {
	if o.Model != "" {
		m, err := sizing.LookupModel(o.Model)
		if err != nil {
			return err
		}
		s.Layers, s.PayloadsPerLayer, s.TokenBytes = m.Layers, m.Payloads, m.RankTokenBytes(cp)
	} else if o.GroupTokenBytes > 0 {
		ways := cp * max(1, s.Layers*s.PayloadsPerLayer)
		s.TokenBytes = ((o.GroupTokenBytes+ways-1)/ways + 7) / 8 * 8
	}
	return nil
}

// l2SlotsOfBytes is the number of L2 slots that --l2-bytes a node makes for each of the node's CP
// groups (ranksPerNode/nodeParts of them, each holding nodeParts ranks' parts of a slot, a part of
// rankPageBytes for a page of pageTokens tokens). An error, naming --l2-bytes, when that is not 1
// to MaxInt32 slots says how the bytes were divided, so that the user sees which count to change.
func (o *Options) l2SlotsOfBytes(
	ranksPerNode, nodeParts, pageTokens int,
	rankPageBytes int64,
) (int, error) {
	groups := int64(max(1, ranksPerNode/nodeParts))
	slotBytes := rankPageBytes * int64(nodeParts)
	slots := o.L2Bytes / groups / slotBytes
	if slots < 1 || slots > math.MaxInt32 {
		return 0, &errscope.ConfigError{
			Flag: "l2-bytes",
			Reason: fmt.Sprintf(
				"%d bytes per node, %d bytes for each of its %d CP group(s), make %d slots of %d bytes (a page of %d tokens); give 1 to %d slots",
				o.L2Bytes,
				o.L2Bytes/groups,
				groups,
				slots,
				slotBytes,
				pageTokens,
				math.MaxInt32,
			),
		}
	}
	return int(slots), nil
}

// devicePagesOfBytes is the number of device pages of rankPageBytes (a rank's part of a page of
// pageTokens tokens) that --device-bytes a rank makes. An error, naming --device-bytes, when that
// is not 1 to MaxInt32 pages gives a page's size, so that the user sees how many bytes make one.
func (o *Options) devicePagesOfBytes(pageTokens int, rankPageBytes int64) (int, error) {
	pages := o.DeviceBytes / rankPageBytes
	if pages < 1 || pages > math.MaxInt32 {
		return 0, &errscope.ConfigError{
			Flag: "device-bytes",
			Reason: fmt.Sprintf(
				"%d bytes per rank make %d device pages of %d bytes (a rank's part of a page of %d tokens)",
				o.DeviceBytes,
				pages,
				rankPageBytes,
				pageTokens,
			),
		}
	}
	return int(pages), nil
}

// SizedFlags are the geometry flags' values the job runs with, for a CP group of cp ranks over
// nodes nodes of ranksPerNode ranks (Size): the model's --layers and --payloads, the per-rank
// --token-bytes a token accounts for (before any --copy-token-bytes; derived from the default
// model's bytes a token when not given), and the --l2-slots and --device-pages that --l2-bytes and
// --device-bytes make. A provenance that printed those flags as parsed would print their defaults:
// a record of another job than the one that ran. With the serving clock on, the same holds for
// --prefill-dtype and --host-link-rate, whose defaults come from the model and the GPU
// (ServingOptions.ResolvedFlags).
func (o *Options) SizedFlags(cp, ranksPerNode, nodes int) (map[string]string, error) {
	s, err := o.Size(cp, ranksPerNode, nodes)
	if err != nil {
		return nil, err
	}
	flags := map[string]string{
		"layers":       strconv.Itoa(s.Layers),
		"payloads":     strconv.Itoa(s.PayloadsPerLayer),
		"token-bytes":  strconv.Itoa(s.AccountTokenBytes),
		"l2-slots":     strconv.Itoa(s.L2Slots),
		"device-pages": strconv.Itoa(s.DevicePages),
	}
	if o.Serving != nil {
		maps.Copy(flags, o.Serving.ResolvedFlags())
	}
	return flags, nil
}

// Capacity states the sized options' tiers (after Size) for a CP group of cp ranks.
func (o *Options) Capacity(cp int) report.Capacity {
	account := o.AccountTokenBytes
	if account == 0 { // options that did not go through Size: nothing is scaled
		account = o.TokenBytes
	}
	perToken := int64(o.Layers) * int64(o.PayloadsPerLayer)
	c := report.Capacity{
		Model:            o.Model,
		TokenBytes:       perToken * int64(cp) * int64(account),
		CopiedTokenBytes: perToken * int64(cp) * int64(o.TokenBytes),
		Scaled:           account != o.TokenBytes,
		L2Slots:          o.L2Slots,
		DevicePages:      o.DevicePages,
	}
	c.L2Tokens = int64(o.L2Slots) * int64(o.PageTokens)
	c.L2Bytes, c.L2SlabBytes = c.L2Tokens*c.TokenBytes, c.L2Tokens*c.CopiedTokenBytes
	c.DeviceTokens = int64(o.DevicePages) * int64(o.PageTokens)
	c.DeviceBytes, c.DeviceBufBytes = c.DeviceTokens*c.TokenBytes/int64(
		cp,
	), c.DeviceTokens*c.CopiedTokenBytes/int64(
		cp,
	)
	return c
}
