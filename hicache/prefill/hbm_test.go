package prefill

import "testing"

// TestEveryGPUHasItsHBM: every GPU --gpu takes has its HBM capacity, between the smallest and the
// largest of the datasheets (80 and 288 GB).
func TestEveryGPUHasItsHBM(t *testing.T) {
	for _, name := range GPUNames() {
		bytes, source, err := HBMBytes(name)
		if err != nil || bytes < 80e9 || bytes > 288e9 || source == "" {
			t.Errorf("%s: %g bytes of HBM (%q, %v)", name, bytes, source, err)
		}
	}
	if got, _, _ := HBMBytes("H200"); got != 141e9 {
		t.Errorf("h200: %g bytes of HBM, want its datasheet's 141 GB", got)
	}
}
