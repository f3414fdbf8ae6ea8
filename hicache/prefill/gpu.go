package prefill

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cphicache/cphicache/internal/errscope"
)

// GPU is one accelerator's datasheet rates, the roofline's ceilings. Rates are per GPU, in FLOP/s
// and bytes/s (decimal: 1 TB/s = 1e12 bytes/s, as the datasheets count).
type GPU struct {
	Name string
	// DenseBF16FLOPsPerSecond: bf16 tensor-core FLOP/s without structured sparsity (the datasheets
	// print twice this "with sparsity"; dense GEMMs and attention get none of it).
	DenseBF16FLOPsPerSecond float64
	HBMBytesPerSecond       float64
	// The host link, each way: PCIe Gen5 x16, which the datasheets print as 128 GB/s both ways
	// together. A load-back from the L2 (host to device) and a backup (device to host) each have
	// one direction to themselves. Measured copies reach about 80 to 90% of it; the model takes the
	// datasheet's.
	H2DBytesPerSecond, D2HBytesPerSecond float64
	Source                               string // the datasheet the numbers come from
}

// pcieGen5Each is PCIe Gen5 x16 one way: 128 GB/s both ways, as NVIDIA's datasheets print it,
// halved.
const pcieGen5Each = 64e9

// gpus is the table --gpu reads (SXM parts, the ones serving nodes use).
var gpus = []GPU{
	// NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: BF16 Tensor Core 1,979 TFLOPS with sparsity,
	// GPU memory bandwidth 3.35 TB/s, PCIe Gen5 128 GB/s.
	{
		Name:                    "h100",
		DenseBF16FLOPsPerSecond: 989.5e12,
		HBMBytesPerSecond:       3.35e12,
		H2DBytesPerSecond:       pcieGen5Each,
		D2HBytesPerSecond:       pcieGen5Each,
		Source:                  "NVIDIA H100 datasheet (SXM)",
	},
	// NVIDIA H800 SXM: H100 SXM's compute, memory and PCIe with NVLink cut to 400 GB/s (the export
	// part DeepSeek reports on, whose figures PREFILL.md compares with the model).
	{
		Name:                    "h800",
		DenseBF16FLOPsPerSecond: 989.5e12,
		HBMBytesPerSecond:       3.35e12,
		H2DBytesPerSecond:       pcieGen5Each,
		D2HBytesPerSecond:       pcieGen5Each,
		Source:                  "NVIDIA H800 SXM (H100 SXM's compute and HBM3)",
	},
	// NVIDIA H200 Tensor Core GPU datasheet, H200 SXM: BF16 1,979 TFLOPS with sparsity, 4.8 TB/s,
	// PCIe Gen5 128 GB/s.
	{
		Name:                    "h200",
		DenseBF16FLOPsPerSecond: 989.5e12,
		HBMBytesPerSecond:       4.8e12,
		H2DBytesPerSecond:       pcieGen5Each,
		D2HBytesPerSecond:       pcieGen5Each,
		Source:                  "NVIDIA H200 datasheet (SXM)",
	},
	// NVIDIA HGX B200 datasheet, per GPU: FP16/BF16 Tensor Core 4.5 PFLOPS with sparsity, 180 GB
	// HBM3E at 7.7 TB/s, PCIe Gen5 128 GB/s.
	{
		Name:                    "b200",
		DenseBF16FLOPsPerSecond: 2.25e15,
		HBMBytesPerSecond:       7.7e12,
		H2DBytesPerSecond:       pcieGen5Each,
		D2HBytesPerSecond:       pcieGen5Each,
		Source:                  "NVIDIA HGX B200 datasheet",
	},
}

// DefaultGPU is --gpu's default: the part most published serving figures were taken on.
const DefaultGPU = "h100"

// GPUNames lists the table's names, for --help.
func GPUNames() []string {
	names := make([]string, len(gpus))
	for i, g := range gpus {
		names[i] = g.Name
	}
	return names
}

// LookupGPU finds a GPU by name (case-insensitive); the error names --gpu and the choices.
func LookupGPU(name string) (GPU, error) {
	i := slices.IndexFunc(gpus, func(g GPU) bool { return strings.EqualFold(g.Name, name) })
	if i < 0 {
		return GPU{}, &errscope.ConfigError{
			Flag:   "gpu",
			Reason: fmt.Sprintf("%q is not one of %s", name, strings.Join(GPUNames(), ", ")),
		}
	}
	return gpus[i], nil
}
