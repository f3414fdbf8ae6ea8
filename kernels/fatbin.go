package kernels

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"strings"
)

// pagecopyFatbin is kernels/cuda/pagecopy.cu compiled by `make kernels/cuda/pagecopy.fatbin`: sm_90
// SASS (what an H100/H200 runs without compiling anything at load) beside compute_90 PTX (what the
// driver compiles for a newer GPU). It is embedded in both builds so that the CPU build's tests
// check what it holds; only the cuda build loads it.
//
//go:embed cuda/pagecopy.fatbin
var pagecopyFatbin string

// fatbinMagic starts a fatbin (NVIDIA's fatBinaryHeader), little-endian.
const fatbinMagic = 0xba55ed50

// fatbinEntry is one image of a fatbin: PTX or an ELF (SASS), for one architecture (90 for sm_90).
type fatbinEntry struct {
	Kind string // "ptx" or "sass"
	Arch int
}

func (e fatbinEntry) String() string {
	if e.Kind == "ptx" {
		return fmt.Sprintf("compute_%d PTX", e.Arch)
	}
	return fmt.Sprintf("sm_%d SASS", e.Arch)
}

// fatbinEntries lists a fatbin's images. The layout (a 16-byte header of magic, version, header
// size and the entries' total size; then each entry's header of kind (1 PTX, 2 ELF), header size
// and payload size, with the architecture at byte 28) is the one cuobjdump reads; nvcc 11.8 and
// later write it.
func fatbinEntries(image []byte) ([]fatbinEntry, error) {
	le := binary.LittleEndian
	if len(image) < 16 || le.Uint32(image) != fatbinMagic {
		return nil, fmt.Errorf("not a fatbin (%d bytes, no magic %#x)", len(image), fatbinMagic)
	}
	headerBytes, entriesBytes := uint64(le.Uint16(image[6:])), le.Uint64(image[8:])
	end := headerBytes + entriesBytes
	if end > uint64(len(image)) {
		return nil, fmt.Errorf("fatbin header says %d bytes, the image has %d", end, len(image))
	}
	var entries []fatbinEntry
	for off := headerBytes; off < end; {
		if off+32 > end {
			return nil, fmt.Errorf("fatbin entry at byte %d is cut short", off)
		}
		kind, entryHeaderBytes, payloadBytes := le.Uint16(
			image[off:],
		), uint64(
			le.Uint32(image[off+4:]),
		), le.Uint64(
			image[off+8:],
		)
		e := fatbinEntry{
			Kind: map[uint16]string{1: "ptx", 2: "sass"}[kind],
			Arch: int(le.Uint32(image[off+28:])),
		}
		if e.Kind == "" || entryHeaderBytes < 32 {
			return nil, fmt.Errorf(
				"fatbin entry at byte %d: kind %d, header of %d bytes",
				off,
				kind,
				entryHeaderBytes,
			)
		}
		entries = append(entries, e)
		off += entryHeaderBytes + payloadBytes
	}
	return entries, nil
}

// describeFatbin names a fatbin's images ("sm_90 SASS, compute_90 PTX"), or why it cannot: for the
// load error.
func describeFatbin(image string) string {
	entries, err := fatbinEntries([]byte(image))
	if err != nil {
		return err.Error()
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.String()
	}
	return strings.Join(names, ", ")
}
