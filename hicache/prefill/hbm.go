package prefill

import (
	"fmt"
	"strings"
)

// hbmBytes is each GPU's HBM capacity (decimal bytes, as the datasheets count), which the table's
// rows (gpu.go) cite beside their rates: what a deployment's weights and KV cache share on one
// GPU. Kept beside the rows, by name, so that the published-figures rows stay as they are; every
// row has one (TestEveryGPUHasItsHBM).
var hbmBytes = map[string]struct {
	bytes  float64
	source string
}{
	// H20: 96 GB HBM3 (its product brief, as InferSim's hardware table gives it)
	"h20": {96e9, "H20 product brief: 96 GB HBM3"},
	// H20-3e: 141 GB HBM3e (aiconfigurator's h20_3e system file: mem_capacity 141 GB)
	"h20-3e": {141e9, "aiconfigurator's h20_3e: 141 GB HBM3e"},
	// H100 SXM: 80 GB HBM3 (the H100 datasheet)
	"h100": {80e9, "H100 datasheet (SXM): 80 GB HBM3"},
	// H800 SXM: H100 SXM's 80 GB
	"h800": {80e9, "H800 SXM: 80 GB HBM3"},
	// H200 SXM: 141 GB HBM3e (the H200 datasheet)
	"h200": {141e9, "H200 datasheet (SXM): 141 GB HBM3e"},
	// HGX B200: 1.4 TB of HBM3e over 8 GPUs (the HGX platform specifications), 1,440 GB as DGX
	// B200's specifications print it: 180 GB a GPU
	"b200": {1440e9 / 8, "DGX B200 specifications: 1,440 GB HBM3e over 8 GPUs"},
	// GB200 NVL72: up to 13.4 TB of HBM3e over 72 GPUs (its specifications): 186 GB a GPU
	"gb200": {13.4e12 / gb200NVL72GPUs, "GB200 NVL72 specifications: 13.4 TB HBM3e over 72 GPUs"},
	// Blackwell Ultra (B300): 288 GB HBM3e a GPU (HGX B300: up to 2.3 TB over 8)
	"b300": {288e9, "Blackwell Ultra datasheet: 288 GB HBM3e a GPU"},
	// MI300X: 192 GB HBM3 (its datasheet)
	"mi300x": {192e9, "AMD Instinct MI300X datasheet: 192 GB HBM3"},
	// MI355X: 288 GB HBM3e (its datasheet)
	"mi355x": {288e9, "AMD Instinct MI355X datasheet: 288 GB HBM3e"},
}

// HBMBytes is a GPU's HBM capacity in bytes and its source; the error names --gpu.
func HBMBytes(gpu string) (float64, string, error) {
	g, err := LookupGPU(gpu)
	if err != nil {
		return 0, "", err
	}
	h, ok := hbmBytes[strings.ToLower(g.Name)]
	if !ok {
		return 0, "", fmt.Errorf("prefill: %s has no HBM capacity in the table", g.Name)
	}
	return h.bytes, h.source, nil
}
