package pool

import "testing"

// TestAdviseHugePagesKeepsContents: the hint covers only the page-aligned inside of a table of any
// size and never changes what the table holds (tables are advised once, fresh, but the call must be
// harmless anyway).
func TestAdviseHugePagesKeepsContents(t *testing.T) {
	for _, n := range []int{0, 1, hugePageMinBytes/4 - 1, hugePageMinBytes/4 + 1023} {
		s := make([]uint32, n)
		for i := range s {
			s[i] = uint32(i) * 2654435761
		}
		adviseHugePages(s)
		for i := range s {
			if s[i] != uint32(i)*2654435761 {
				t.Fatalf("%d elements: element %d changed to %d", n, i, s[i])
			}
		}
	}
}
