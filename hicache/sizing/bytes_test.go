package sizing

import (
	"errors"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/internal/errscope"
)

// A size is printed in one scale: the largest binary unit whose value, as printed, is at least 1. A
// size just under a unit (a slot count's round-down of --l2-bytes 1TiB) reads as that unit, never
// "1024 GiB" beside a "2 TiB"; PiB is a unit like the others.
func TestFormatBytesUsesTheLargestUnitWhoseValueIsAtLeastOne(t *testing.T) {
	for _, tc := range []struct {
		bytes int64
		want  string
	}{
		{0, "0 B"}, {1000, "1000 B"}, {1023, "1023 B"}, {1024, "1 KiB"}, {320 << 10, "320 KiB"},
		{3 << 39, "1.5 TiB"}, {1<<40 - 4096, "1 TiB"}, {1<<40 - 1<<30, "1023 GiB"}, {2 << 40, "2 TiB"},
		{1 << 50, "1 PiB"}, {5 << 50, "5 PiB"}, {1<<50 - 1<<20, "1 PiB"}, {1<<30 - 1, "1 GiB"},
	} {
		if got := FormatBytes(tc.bytes); got != tc.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tc.bytes, got, tc.want)
		}
	}
	for _, tc := range []struct {
		bytes  float64
		digits int
		want   string
	}{{1023.96 * (1 << 30), 4, "1 TiB"}, {1023.96 * (1 << 30), 3, "1020 GiB"}, {1000 << 10, 3, "1000 KiB"}} {
		// never 1024 GiB, nor 1e+03 KiB
		if got := FormatByteAmount(tc.bytes, tc.digits); got != tc.want {
			t.Errorf("FormatByteAmount(%g, %d) = %q, want %q", tc.bytes, tc.digits, got, tc.want)
		}
	}
}

func TestSignificantWritesDigitsWithoutAnExponentOrZeros(t *testing.T) {
	for _, tc := range []struct {
		v      float64
		digits int
		want   string
	}{
		{0.00312, 2, "0.0031"}, {0.003, 3, "0.003"}, {1.5, 3, "1.5"}, {1000, 3, "1000"}, {21345, 2, "21000"},
		{9.996, 3, "10"}, {0.9999, 2, "1"}, {0, 3, "0"}, {477.3, 3, "477"}, {12.34, 3, "12.3"},
	} {
		if got := Significant(tc.v, tc.digits); got != tc.want {
			t.Errorf("Significant(%v, %d) = %q, want %q", tc.v, tc.digits, got, tc.want)
		}
	}
}

// A size too large for 64 bits of bytes says so, naming the flag; PiB and PB are accepted.
func TestParseByteSizeSaysASizeOverflowsAndTakesPiB(t *testing.T) {
	for _, text := range []string{"99999999TiB", "8EiB0", "1e30", "9223372036854775807"} {
		_, err := ParseByteSize("l2-bytes", text)
		var config *errscope.ConfigError
		if text == "8EiB0" {
			if err == nil || strings.Contains(err.Error(), "too large") {
				t.Errorf("ParseByteSize(%q) = %v, want not a size", text, err)
			}
			continue
		}
		if !errors.As(err, &config) || config.Flag != "l2-bytes" ||
			!strings.Contains(err.Error(), "too large: it overflows") {
			t.Errorf(
				"ParseByteSize(%q) = %v, want a --l2-bytes error that says it overflows",
				text,
				err,
			)
		}
	}
	for text, want := range map[string]int64{"1PiB": 1 << 50, "0.5PiB": 1 << 49, "2PB": 2e15, "64GiB": 64 << 30} {
		if got, err := ParseByteSize("l2-bytes", text); err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v, want %d", text, got, err, want)
		}
	}
}

// TestFlagBytesNeverSuggestsLess: the size a refusal suggests for a flag parses back to at least
// the bytes asked for, within a part in a thousand.
func TestFlagBytesNeverSuggestsLess(t *testing.T) {
	for _, bytes := range []int64{1, 1000, 1024, 1025, 262144 * 1152, 1 << 40, 1<<40 + 1, 5e12 + 3} {
		text := FlagBytes(bytes)
		got, err := ParseByteSize("device-bytes", text)
		if err != nil || got < bytes || float64(got) > float64(bytes)*1.001+1024 {
			t.Errorf("FlagBytes(%d) = %q, which reads %d (%v): want at least it, within 0.1%%", bytes, text, got, err)
		}
	}
}
