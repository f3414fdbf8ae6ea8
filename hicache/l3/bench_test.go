package l3

import (
	"fmt"
	"io"
	"math"
	"os"
	"testing"
	"time"
)

// benchNS is `cphicache run`'s default geometry, as bench l3 uses: one page is 4 KiB of payload.
var benchNS = Namespace{
	Layers:     4,
	Payloads:   2,
	PageTokens: 16,
	TokenBytes: 32,
	CPSize:     1,
	Name:       "l3 go benchmark",
}

// benchBlockBytes are the block sizes of bench l3's goal, 32 KiB to 16 MiB.
var benchBlockBytes = []int{32 << 10, 256 << 10, 1 << 20, 16 << 20}

// benchStore opens an unbounded store in a fresh directory and, with written, stores block 7 of
// size bytes of zeros; it returns the store and the block's token count.
func benchStore(b testing.TB, size int, written bool) (*Store, int) {
	b.Helper()
	s, err := Open(b.TempDir(), benchNS, Unbounded)
	if err != nil {
		b.Fatal(err)
	}
	tokens := size / int(benchNS.PayloadBytes(1))
	if written {
		if err := s.Write(7, tokens, make([]byte, size), false); err != nil {
			b.Fatal(err)
		}
	}
	return s, tokens
}

// BenchmarkRead is Store.Read of one block over and over, from the page cache: the per-block cost
// of a verified read (go test -bench Read -cpuprofile shows where it goes).
func BenchmarkRead(b *testing.B) {
	for _, size := range benchBlockBytes {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			s, _ := benchStore(b, size, true)
			into := make([]byte, size)
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := s.Read(7, into); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWrite is Store.Write of new blocks, each a new file (every 64 writes, the files are
// removed, untimed).
func BenchmarkWrite(b *testing.B) {
	for _, size := range benchBlockBytes {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			s, tokens := benchStore(b, size, false)
			payload := make([]byte, size)
			b.SetBytes(int64(size))
			key := uint64(0)
			for b.Loop() {
				key++
				if key%64 == 0 {
					b.StopTimer()
					for k := key - 63; k < key; k++ {
						s.fs.Remove(s.blockPath(k))
					}
					b.StartTimer()
				}
				if err := s.Write(key*0x9e3779b97f4a7c15, tokens, payload, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadVsPlain alternates Store.Read of a block with a plain read of the same file (open,
// fstat, read whole, close), and reports each one's fastest time and their ratio: on a shared
// machine the fastest of many alternations is the least disturbed, where a mean is mostly the
// neighbours'.
func BenchmarkReadVsPlain(b *testing.B) {
	for _, size := range benchBlockBytes {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			s, _ := benchStore(b, size, true)
			into := make([]byte, size+headerBytes)
			path := s.blockPath(7)
			ours, plain := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
			for b.Loop() {
				t := time.Now()
				if _, err := s.Read(7, into[:size]); err != nil {
					b.Fatal(err)
				}
				ours = min(ours, time.Since(t))
				t = time.Now()
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				if info, err := f.Stat(); err != nil || info.Size() != int64(len(into)) {
					b.Fatal(info, err)
				}
				if _, err := io.ReadFull(f, into); err != nil {
					b.Fatal(err)
				}
				f.Close()
				plain = min(plain, time.Since(t))
			}
			b.ReportMetric(float64(ours.Nanoseconds()), "ours-ns")
			b.ReportMetric(float64(plain.Nanoseconds()), "plain-ns")
			b.ReportMetric(float64(plain)/float64(ours), "ours/plain")
		})
	}
}
