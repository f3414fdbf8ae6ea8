package sizing

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/cphicache/cphicache/internal/errscope"
)

// byteUnits are the suffixes a size takes: binary (KiB) and decimal (KB, kB) multiples, and plain bytes.
var byteUnits = []struct {
	suffix string
	bytes  float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

// ParseByteSize reads a size such as 512GiB, 1.5TiB, 64GB or 4096 (bytes); the error names flag.
func ParseByteSize(flag, s string) (int64, error) {
	text := strings.TrimSpace(s)
	unit := 1.0
	for _, u := range byteUnits {
		if number, ok := strings.CutSuffix(text, u.suffix); ok {
			text, unit = strings.TrimSpace(number), u.bytes
			break
		}
	}
	v, err := strconv.ParseFloat(text, 64)
	bytes := v * unit
	if err != nil || math.IsNaN(bytes) || bytes < 1 || bytes >= math.MaxInt64 {
		return 0, &errscope.ConfigError{Flag: flag, Reason: fmt.Sprintf("%q is not a size: give a positive number of bytes with a unit, e.g. 512GiB, 1.5TiB, 64GB, 4096 (B, KiB, MiB, GiB, TiB, or KB to TB in powers of 1000)", s)}
	}
	return int64(bytes), nil
}

// ParseByteSizes reads a comma-separated list of sizes (sweep's --l2-bytes).
func ParseByteSizes(flag, s string) ([]int64, error) {
	var sizes []int64
	for _, item := range strings.Split(s, ",") {
		v, err := ParseByteSize(flag, item)
		if err != nil {
			return nil, err
		}
		sizes = append(sizes, v)
	}
	return sizes, nil
}

// FormatBytes writes a byte count in the largest binary unit that keeps it at 1 or more, to 4 significant
// digits (1.5 TiB, 320 KiB).
func FormatBytes(bytes int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if bytes >= u.size {
			return fmt.Sprintf("%.4g %s", float64(bytes)/float64(u.size), u.name)
		}
	}
	return fmt.Sprintf("%d B", bytes)
}
