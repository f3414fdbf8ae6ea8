package workload

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/cphicache/cphicache/pool"
)

// A Mooncake trace (FAST'25) gives a prompt as a chain of block ids instead of tokens. cphicache
// gives block h tokens that are a pure function of h, so requests whose id chains agree share
// exactly that many blocks of prompt, as the trace means, and every rank expands a request to the
// same tokens without a token file.

// Bounds of a compact prompt. They bound what one line or one broadcast can make a rank allocate.
const (
	// 2^24 tokens (64 MiB of int32 ids) is above any context window: larger is a broken line.
	traceInputTokensMax = 1 << 24
	// Mooncake's blocks are 512 tokens; 2^20 leaves room for any block size while keeping products
	// in int64.
	BlockTokensMax = 1 << 20
	// Ids stay within int64, so any JSON reader (and any language's) holds them exactly.
	hashIDMax = math.MaxInt64
	// DefaultBlockTokens is the block size of the Mooncake FAST'25 traces.
	DefaultBlockTokens = 512
)

// BlockPrompt is a prompt given as a chain of block ids: every block holds BlockTokens tokens but
// the last, which holds InputTokens - BlockTokens*(len(HashIDs)-1), the first tokens of its block.
type BlockPrompt struct {
	HashIDs     []uint64
	InputTokens int32
	BlockTokens int32
}

// Compact reports whether the prompt is given by block ids.
func (b *BlockPrompt) Compact() bool { return len(b.HashIDs) > 0 }

// check holds a compact prompt to the trace format's rules; the trace reader and the event decoder
// both use it.
func (b *BlockPrompt) check() error {
	if b.BlockTokens < 1 || b.BlockTokens > BlockTokensMax {
		return fmt.Errorf("block tokens %d outside [1, %d]", b.BlockTokens, BlockTokensMax)
	}
	if b.InputTokens < 1 || b.InputTokens > traceInputTokensMax {
		return fmt.Errorf("input_length %d outside [1, %d]", b.InputTokens, traceInputTokensMax)
	}
	want := (int64(b.InputTokens) + int64(b.BlockTokens) - 1) / int64(b.BlockTokens)
	if int64(len(b.HashIDs)) != want {
		return fmt.Errorf(
			"hash_ids holds %d ids, want ceil(input_length %d / block tokens %d) = %d",
			len(b.HashIDs),
			b.InputTokens,
			b.BlockTokens,
			want,
		)
	}
	for i, id := range b.HashIDs {
		if id > hashIDMax {
			return fmt.Errorf("hash_ids[%d] = %d above %d", i, id, uint64(hashIDMax))
		}
	}
	return nil
}

// blockSeed fixes block contents: block h holds the same tokens in every run and on every rank,
// whatever --seed (which seeds the synthetic workload and the KV content), so one trace always
// means one token stream.
const blockSeed = 0x6d6f6f6e63616b65 // "mooncake"

// AppendTokens appends the prompt's tokens, each in [0, vocabSize): block h's tokens are the stream
// streamKey(blockSeed, streamBlock, h), so equal ids give equal tokens and the last block a prefix
// of its block.
func (b *BlockPrompt) AppendTokens(dst []int32, vocabSize int) []int32 {
	last := len(b.HashIDs) - 1
	for i, id := range b.HashIDs {
		n := int(b.BlockTokens)
		if i == last {
			n = int(b.InputTokens) - int(b.BlockTokens)*last
		}
		rng := newSplitMix(streamKey(blockSeed, streamBlock, id, 0))
		dst = appendTokens(dst, &rng, n, vocabSize)
	}
	return dst
}

// ExpandEvents gives every compact request its tokens (after DecodeEvents, on every rank of a CP
// group).
func ExpandEvents(events []Event, vocabSize int) {
	for i := range events {
		r := &events[i].Request
		if r.Blocks.Compact() && r.InputIDs == nil {
			r.InputIDs = r.Blocks.AppendTokens(make([]int32, 0, r.Blocks.InputTokens), vocabSize)
		}
	}
}

// WriteMooncakeTrace writes events as a Mooncake trace of blockTokens-token blocks: a block's id is
// its token content hashed together with the previous block's id, renumbered 0, 1, 2... in order of
// first appearance (as the FAST'25 release remaps its hashes), so equal prefixes give equal ids. A
// last block shorter than blockTokens hashes its own tokens only, so it gets an id of its own, as
// in Mooncake. A flush is written as {"op": "flush"}; the timestamp is the request's index (the
// synthetic workload has no clock). A request that is compact already keeps its ids if its block
// size is blockTokens.
func WriteMooncakeTrace(w io.Writer, events []Event, blockTokens int) error {
	if blockTokens < 1 || blockTokens > BlockTokensMax {
		return fmt.Errorf(
			"mooncake trace: block tokens %d outside [1, %d]",
			blockTokens,
			BlockTokensMax,
		)
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	ids := blockNumbering{byChain: map[uint64]uint64{}}
	var line []byte
	requests := 0
	for _, e := range events {
		if e.Flush {
			line = append(line[:0], "{\"op\":\"flush\"}\n"...)
		} else {
			r := &e.Request
			chain, inputTokens := r.Blocks.HashIDs, int(r.Blocks.InputTokens)
			if !r.Blocks.Compact() || int(r.Blocks.BlockTokens) != blockTokens {
				chain, inputTokens = ids.chain(r.InputIDs, blockTokens), len(r.InputIDs)
			}
			line = appendMooncakeLine(line[:0], requests, inputTokens, r.OutputLen, chain)
			requests++
		}
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func appendMooncakeLine(
	line []byte,
	timestamp, inputTokens int,
	outputLen int32,
	ids []uint64,
) []byte {
	line = append(line, `{"timestamp":`...)
	line = strconv.AppendInt(line, int64(timestamp), 10)
	line = append(line, `,"input_length":`...)
	line = strconv.AppendInt(line, int64(inputTokens), 10)
	line = append(line, `,"output_length":`...)
	line = strconv.AppendInt(line, int64(outputLen), 10)
	line = append(line, `,"hash_ids":[`...)
	for i, id := range ids {
		if i > 0 {
			line = append(line, ',')
		}
		line = strconv.AppendUint(line, id, 10)
	}
	return append(line, "]}\n"...)
}

// blockNumbering gives chained block hashes dense ids in order of first appearance.
type blockNumbering struct{ byChain map[uint64]uint64 }

// chain returns the ids of tokens' blocks: each block's hash covers its tokens, its length and the
// previous block's id (64-bit hashes: a collision, about n^2/2^65 for n blocks, would merge two
// blocks).
func (n *blockNumbering) chain(tokens []int32, blockTokens int) []uint64 {
	ids := make([]uint64, 0, (len(tokens)+blockTokens-1)/blockTokens)
	prev := uint64(math.MaxUint64) // no block before the first
	for start := 0; start < len(tokens); start += blockTokens {
		block := tokens[start:min(start+blockTokens, len(tokens))]
		h := pool.Mix64(prev ^ pool.Mix64(uint64(len(block))))
		for _, t := range block {
			h = pool.Mix64(h ^ uint64(uint32(t)))
		}
		id, ok := n.byChain[h]
		if !ok {
			id = uint64(len(n.byChain))
			n.byChain[h] = id
		}
		ids = append(ids, id)
		prev = id
	}
	return ids
}
