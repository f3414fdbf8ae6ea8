package sizing

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/cphicache/cphicache/internal/errscope"
)

// byteUnits are the suffixes a size takes: binary (KiB) and decimal (KB, kB) multiples, and plain
// bytes.
var byteUnits = []struct {
	suffix string
	bytes  float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"PiB", 1 << 50},
	{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"PB", 1e15}, {"B", 1},
}

// sizeExample is what a size looks like, for every message that refuses one.
const sizeExample = "e.g. 512GiB, 1.5TiB, 64GB, 4096 (B, KiB, MiB, GiB, TiB, PiB, or KB to PB in powers of 1000)"

// ParseByteSize reads a size such as 512GiB, 1.5TiB, 64GB or 4096 (bytes); the error names flag. A
// number too large for 64 bits of bytes (8 EiB) is refused as too large, not as something that is
// not a size.
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
	if (err == nil || errors.Is(err, strconv.ErrRange)) && bytes >= math.MaxInt64 {
		return 0, &errscope.ConfigError{
			Flag: flag,
			Reason: fmt.Sprintf(
				"%q is too large: it overflows a 64-bit count of bytes (at most 8 EiB, %d bytes); %s",
				s,
				int64(math.MaxInt64),
				sizeExample,
			),
		}
	}
	if err != nil || math.IsNaN(bytes) || bytes < 1 {
		return 0, &errscope.ConfigError{
			Flag: flag,
			Reason: fmt.Sprintf(
				"%q is not a size: give a positive number of bytes with a unit, %s",
				s,
				sizeExample,
			),
		}
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

// FormatBytes writes a byte count in the largest binary unit that keeps it at 1 or more, to 4
// significant digits (1.5 TiB, 320 KiB).
func FormatBytes(bytes int64) string { return FormatByteAmount(float64(bytes), 4) }

// binaryUnits are the units FormatByteAmount writes, each 1024 times the one before.
var binaryUnits = []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}

// FormatByteAmount writes bytes (a size or a rate's bytes) to digits significant digits in the
// largest binary unit whose value, as written, is at least 1: the unit is chosen after rounding, so
// that a size just under 1 TiB (a slot count's round-down of --l2-bytes 1TiB) reads "1 TiB" and
// never "1024 GiB" beside "2 TiB".
func FormatByteAmount(bytes float64, digits int) string {
	i := 0
	for i < len(binaryUnits)-1 && math.Abs(bytes) >= 1024 {
		bytes, i = bytes/1024, i+1
	}
	text := Significant(bytes, digits)
	if v, _ := strconv.ParseFloat(text, 64); math.Abs(v) >= 1024 && i < len(binaryUnits)-1 {
		bytes, i = bytes/1024, i+1 // rounded up to the next unit: 1023.99 GiB to 4 digits is 1 TiB
		text = Significant(bytes, digits)
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", bytes)
	}
	return text + " " + binaryUnits[i]
}

// Significant writes v to digits significant digits in plain decimals, trailing zeros dropped:
// 0.003, 1.5, 1024, 21000; never an exponent (%g writes 1000 to 3 digits as 1e+03) and never a
// small value as 0.00.
func Significant(v float64, digits int) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	magnitude := int(math.Floor(math.Log10(math.Abs(v))))
	rounded, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'e', digits-1, 64), 64)
	decimals := max(0, digits-1-magnitude)
	// 9.996 to 3 digits is 10.0
	if r := int(math.Floor(math.Log10(math.Abs(rounded)))); r > magnitude {
		decimals = max(0, digits-1-r)
	}
	text := strconv.FormatFloat(rounded, 'f', decimals, 64)
	if strings.Contains(text, ".") {
		text = strings.TrimRight(strings.TrimRight(text, "0"), ".")
	}
	return text
}

// FlagBytes writes a size to give a flag that must be at least bytes: in the largest binary unit
// that keeps it at 1 or more, rounded up to 4 significant digits, with no space (2.501GiB), so that
// the size a message suggests is never short of what it asks for.
func FlagBytes(bytes int64) string {
	if bytes < 1024 {
		return fmt.Sprintf("%dB", max(bytes, 1))
	}
	v, i := float64(bytes), 0
	for i < len(binaryUnits)-1 && v >= 1024 {
		v, i = v/1024, i+1
	}
	magnitude := int(math.Floor(math.Log10(v)))
	step := math.Pow(10, float64(magnitude-3))
	// the first of a few candidates, around the value, that parses back to enough
	for q := math.Round(v/step) - 1; q <= math.Round(v/step)+2; q++ {
		text := Significant(q*step, 4) + binaryUnits[i]
		if got, err := ParseByteSize("", text); err == nil && got >= bytes {
			return text
		}
	}
	return fmt.Sprintf("%dB", bytes)
}
