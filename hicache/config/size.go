package config

import (
	"fmt"
	"maps"
	"math"
	"math/bits"
	"strconv"
	"strings"

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
// --l2-bytes on one node. Every byte capacity counts the sizing model's KV (ModelTokenBytes):
// --model's, or the serving clock's --prefill-model's when the geometry flags replay it scaled
// down. Every rank computes the same, so an error is the same on every rank (it names its flag).
func (o *Options) Size(cp, ranksPerNode, nodes int) (*Options, error) {
	s := *o
	s.GroupNodes = max(1, nodes)
	nodeParts := cp / s.GroupNodes
	if err := o.sizeTokenBytes(&s, cp); err != nil {
		return nil, err
	}
	s.AccountTokenBytes = s.TokenBytes
	s.ModelTokenBytes = s.sizingTokenBytes(cp)
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
	pageBytes := int64(s.PageTokens) * s.ModelTokenBytes // a page of the group, every rank's part
	if err := s.sizeFromGPU(cp); err != nil {
		return nil, err
	}
	if s.L2Bytes > 0 {
		slots, err := o.l2SlotsOfBytes(ranksPerNode, nodeParts, cp, s.PageTokens, pageBytes)
		if err != nil {
			return nil, err
		}
		s.L2Slots = slots
	}
	if s.DeviceBytes > 0 {
		pages, err := s.devicePagesOfBytes(cp, s.PageTokens, pageBytes)
		if err != nil {
			return nil, err
		}
		s.DevicePages = pages
	}
	if s.L2FromL1 && s.Serving != nil && s.SizingModel() != "" {
		// a slot is a page of the group, as a device page is: HiCacheRatio times L1's tokens
		s.L2Slots = min(HiCacheRatio*s.DevicePages, math.MaxInt32)
		l2 := fmt.Sprintf("L2 %d x L1 (SGLang's --hicache-ratio default)", HiCacheRatio)
		s.SizedBy = strings.TrimPrefix(s.SizedBy+"; "+l2, "; ")
	}
	s.L3.StoreBytes = s.storeBytes(cp)
	return &s, nil
}

// sizeFromGPU sets the sized options' L1 in bytes from the model and the GPU when the user gave no
// L1 geometry (L1FromGPU), for a CP group of cp ranks (the serving clock's --group-gpus in a
// sweep): the KV budget a GPU of the deployment has (ServingOptions.DeviceBudget), in SizedBy.
func (o *Options) sizeFromGPU(cp int) error {
	model := o.SizingModel()
	if !o.L1FromGPU || o.Serving == nil || model == "" {
		return nil
	}
	gpus := cp
	if o.Serving.GroupGPUs > 0 {
		gpus = o.Serving.GroupGPUs
	}
	b, err := o.Serving.DeviceBudget(model, gpus)
	if err != nil {
		return err
	}
	o.DeviceBytes, o.SizedBy = b.Bytes, b.Describe
	return nil
}

// SizingModel is the model whose KV the byte capacities count: --model, else the serving clock's
// --prefill-model when it names one of the table's (the geometry flags then replay it scaled down);
// "" for the geometry's own bytes.
func (o *Options) SizingModel() string {
	if o.Model != "" {
		return o.Model
	}
	if o.Serving != nil {
		if _, err := sizing.LookupModel(o.Serving.Prefill.Model); err == nil {
			return o.Serving.Prefill.Model
		}
	}
	return ""
}

// sizingTokenBytes is the KV bytes of one token over a CP group of cp ranks that capacities count
// (o sized by sizeTokenBytes): --model's geometry (every rank's share, as the slab holds it), the
// --prefill-model's KV, or else the geometry's.
func (o *Options) sizingTokenBytes(cp int) int64 {
	geometry := int64(cp) * int64(o.Layers) * int64(o.PayloadsPerLayer) * int64(o.AccountTokenBytes)
	if o.Model != "" {
		return geometry
	}
	if m, err := sizing.LookupModel(o.SizingModel()); err == nil {
		return m.TokenBytes()
	}
	return geometry
}

// storeBytes is the L3 store's budget of block bytes as it copies them: with a model --l3-bytes
// counts its KV, so a run whose copies are scaled down keeps as many blocks as the model's bytes
// would hold (o sized, cp its CP size); without one, the block files' bytes, as given.
func (o *Options) storeBytes(cp int) int64 {
	copied := int64(cp) * int64(o.Layers) * int64(o.PayloadsPerLayer) * int64(o.TokenBytes)
	if o.L3.Bytes <= 0 || o.SizingModel() == "" || o.ModelTokenBytes <= 0 ||
		copied == o.ModelTokenBytes {
		return o.L3.Bytes
	}
	hi, lo := bits.Mul64(uint64(o.L3.Bytes), uint64(copied))
	if hi >= uint64(o.ModelTokenBytes) { // cannot be: copied is less than the model's
		return o.L3.Bytes
	}
	q, _ := bits.Div64(hi, lo, uint64(o.ModelTokenBytes))
	return max(1, int64(q))
}

// RankPageBytes is what one rank's part of a page accounts for in options sized for a CP group of
// cp ranks (after Size): the sizing model's KV of a page over the group's ranks, rounded up, the
// bytes --device-bytes counts a device page at.
func (o *Options) RankPageBytes(cp int) int64 {
	group := o.ModelTokenBytes
	if group == 0 { // options that did not go through Size
		group = int64(cp) * int64(o.Layers) * int64(o.PayloadsPerLayer) * int64(o.TokenBytes)
	}
	page := int64(o.PageTokens) * group
	return (page + int64(cp) - 1) / int64(max(1, cp))
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
// groups (ranksPerNode/nodeParts of them, each holding nodeParts of its cp ranks' parts of a slot,
// a page of pageTokens tokens whose every part together is pageBytes). An error, naming
// --l2-bytes, when that is not 1 to MaxInt32 slots says how the bytes were divided, so that the
// user sees which count to change.
func (o *Options) l2SlotsOfBytes(
	ranksPerNode, nodeParts, cp, pageTokens int,
	pageBytes int64,
) (int, error) {
	groups := int64(max(1, ranksPerNode/nodeParts))
	// slots = bytes a group / (pageBytes x nodeParts / cp), in 128 bits: bytes x cp may overflow
	hi, lo := bits.Mul64(uint64(o.L2Bytes/groups), uint64(cp))
	den := uint64(pageBytes) * uint64(max(1, nodeParts))
	slots := int64(math.MaxInt64)
	if hi < den {
		q, _ := bits.Div64(hi, lo, den)
		slots = int64(min(q, math.MaxInt64))
	}
	if slots < 1 || slots > math.MaxInt32 {
		return 0, &errscope.ConfigError{
			Flag: "l2-bytes",
			Reason: fmt.Sprintf(
				"%d bytes per node, %d bytes for each of its %d CP group(s), make %d slots of %d bytes (a page of %d tokens); give 1 to %d slots",
				o.L2Bytes,
				o.L2Bytes/groups,
				groups,
				slots,
				int64(den)/int64(max(1, cp)),
				pageTokens,
				math.MaxInt32,
			),
		}
	}
	return int(slots), nil
}

// devicePagesOfBytes is the number of device pages that --device-bytes a rank makes, each rank
// holding 1/cp of a page of pageTokens tokens whose every part together is pageBytes. An error,
// naming --device-bytes, when that is not 1 to MaxInt32 pages gives a page's size, so that the user
// sees how many bytes make one.
func (o *Options) devicePagesOfBytes(cp, pageTokens int, pageBytes int64) (int, error) {
	hi, lo := bits.Mul64(uint64(o.DeviceBytes), uint64(cp))
	pages := int64(math.MaxInt64)
	if hi < uint64(pageBytes) {
		q, _ := bits.Div64(hi, lo, uint64(pageBytes))
		pages = int64(min(q, math.MaxInt64))
	}
	if pages < 1 || pages > math.MaxInt32 {
		return 0, &errscope.ConfigError{
			Flag: "device-bytes",
			Reason: fmt.Sprintf(
				"%d bytes per rank make %d device pages of %d bytes (a rank's part of a page of %d tokens)",
				o.DeviceBytes,
				pages,
				(pageBytes+int64(cp)-1)/int64(max(1, cp)),
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

// Capacity states the sized options' tiers (after Size) for a CP group of cp ranks on nodes of
// ranksPerNode ranks: each in slots or pages, tokens and the sizing model's bytes, per CP group
// and per node, beside what the run replays when its copies are scaled down.
func (o *Options) Capacity(cp, ranksPerNode int) report.Capacity {
	account := o.AccountTokenBytes
	if account == 0 { // options that did not go through Size: nothing is scaled
		account = o.TokenBytes
	}
	perToken := int64(o.Layers) * int64(o.PayloadsPerLayer)
	c := report.Capacity{
		Model:            o.SizingModel(),
		TokenBytes:       o.ModelTokenBytes,
		CopiedTokenBytes: perToken * int64(cp) * int64(o.TokenBytes),
		L2Slots:          o.L2Slots,
		DevicePages:      o.DevicePages,
	}
	if c.TokenBytes == 0 {
		c.TokenBytes = perToken * int64(cp) * int64(account)
	}
	c.Scaled = c.TokenBytes != c.CopiedTokenBytes
	c.L2Tokens = int64(o.L2Slots) * int64(o.PageTokens)
	c.L2Bytes, c.L2SlabBytes = c.L2Tokens*c.TokenBytes, c.L2Tokens*c.CopiedTokenBytes
	c.DeviceTokens = int64(o.DevicePages) * int64(o.PageTokens)
	c.DeviceBytes = c.DeviceTokens * c.TokenBytes / int64(cp)
	c.DeviceBufBytes = c.DeviceTokens * c.CopiedTokenBytes / int64(cp)
	// A node holds its ranks' GPUs, and of each CP group's L2 (and a local L3) the share of its
	// parts: a group over k nodes 1/k on each, and ranksPerNode/nodeParts groups' shares.
	nodes := int64(max(1, o.GroupNodes))
	groups := int64(max(1, ranksPerNode/max(1, cp/int(nodes))))
	c.L2BytesPerNode = c.L2Bytes / nodes * groups
	c.DeviceBytesPerGroup = c.DeviceBytes * int64(cp)
	c.DeviceBytesPerNode = c.DeviceBytes * int64(max(1, ranksPerNode))
	if o.L3.Enabled() {
		c.L3Bytes = o.L3.Bytes
		c.L3Tokens = o.L3.Bytes / max(1, c.TokenBytes)
		c.L3BytesPerNode = c.L3Bytes / nodes * groups
		c.L3StoreBytes = o.L3.StoreBytes
	}
	c.SizedBy = o.SizedBy
	return c
}
