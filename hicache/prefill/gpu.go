package prefill

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/internal/errscope"
)

// GPU is one accelerator's datasheet rates, the roofline's ceilings. Rates are per GPU, in FLOP/s
// and bytes/s (decimal: 1 TB/s = 1e12 bytes/s, as the datasheets count).
type GPU struct {
	Name string
	// Dense is the tensor cores' FLOP/s by precision without structured sparsity: the datasheets
	// print twice these "with sparsity", and dense GEMMs and attention get none of it. 0: the part
	// has no such rate (fp4 before Blackwell and CDNA 4).
	Dense             DenseRates
	HBMBytesPerSecond float64
	// HostBytesPerSecond is the GPU's link to host memory, each way: a load-back from the L2 (host
	// to device) and a backup (device to host) each have one direction to themselves. The
	// datasheet's rate; measured copies reach less (nvbandwidth: about 35 GB/s host to device on
	// an H100 SXM's 64), which --host-link-rate gives (HostLink).
	HostBytesPerSecond float64
	HostLink           string // the link's kind: "PCIe Gen5 x16", "NVLink-C2C"
	Source             string // the datasheet the numbers come from
}

// DenseRates are a GPU's dense tensor-core FLOP/s in each precision the roofline takes.
type DenseRates struct{ BF16, FP8, FP4 float64 }

// Of is the rate for d; 0 when the part has none.
func (r DenseRates) Of(d sizing.DType) float64 {
	switch d {
	case sizing.BF16:
		return r.BF16
	case sizing.FP8:
		return r.FP8
	case sizing.FP4:
		return r.FP4
	}
	return 0
}

// The host links, one way. PCIe counts 128b/130b-encoded lanes: Gen5 x16 is 32 GT/s x 16 lanes,
// 64 GB/s each way, which NVIDIA's and AMD's datasheets print as 128 GB/s both ways together; Gen6
// x16 doubles it. NVLink-C2C (Grace to Blackwell) is 900 GB/s both ways together, 450 each way.
const (
	pcieGen5Each  = 64e9
	pcieGen6Each  = 128e9
	nvlinkC2CEach = 450e9
	pcieGen5x16   = "PCIe Gen5 x16"
	pcieGen6x16   = "PCIe Gen6 x16"
	nvlinkC2C     = "NVLink-C2C"
)

// Rates that several rows share, dense: the datasheets' "with sparsity" figures halved.
const (
	hopperBF16 = 1979e12 / 2 // H100, H800, H200 SXM: BF16 1,979 TFLOPS with sparsity
	hopperFP8  = 3958e12 / 2 // FP8 3,958 TFLOPS with sparsity
	// HGX B200 and B300, 8 GPUs: FP16/BF16 36 PFLOPS and FP8/FP6 72 PFLOPS with sparsity
	hgxBlackwellBF16 = 36e15 / 8 / 2
	hgxBlackwellFP8  = 72e15 / 8 / 2
	gb200NVL72GPUs   = 72 // GB200 NVL72's specifications are the rack's: 72 GPUs
)

// gpus is the table --gpu reads: SXM, OAM and Grace superchip parts, the ones serving nodes use.
// Each row's numbers are checked against its datasheet's printed figures
// (TestGPUTableMatchesDatasheets).
var gpus = []GPU{
	// NVIDIA H20 (the China part; no public NVIDIA datasheet page: its product brief's figures as
	// published by the press and by alibaba/InferSim's hardware/gpu.py): BF16 148 TFLOPS and FP8
	// 296 TFLOPS dense, 96 GB HBM3 at 4.0 TB/s, PCIe Gen5 x16.
	{
		Name:               "h20",
		Dense:              DenseRates{BF16: 148e12, FP8: 296e12},
		HBMBytesPerSecond:  4.0e12,
		HostBytesPerSecond: pcieGen5Each,
		HostLink:           pcieGen5x16,
		Source:             "NVIDIA H20 product brief (as published; InferSim's hardware table)",
	},
	// NVIDIA H20-3e, the 141 GB HBM3e H20 of SGLang's shared-KV figures (GLM-5.2-FP8 at CP8): H20's
	// compute, 4,917 GB/s of HBM3e, PCIe Gen5, as NVIDIA's own ai-dynamo/aiconfigurator gives it
	// (src/aiconfigurator/systems/h20_3e.yaml: float16_tc_flops 148 TFLOPS, fp8_tc_flops 296,
	// mem_bw 4917GB/s, pcie_bw 64 GB/s single direction).
	{
		Name:               "h20-3e",
		Dense:              DenseRates{BF16: 148e12, FP8: 296e12},
		HBMBytesPerSecond:  4.917e12,
		HostBytesPerSecond: pcieGen5Each,
		HostLink:           pcieGen5x16,
		Source:             "NVIDIA H20-3e (aiconfigurator's h20_3e system file)",
	},
	// NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: BF16 Tensor Core 1,979 TFLOPS and FP8 3,958
	// TFLOPS with sparsity, GPU memory bandwidth 3.35 TB/s, PCIe Gen5 128 GB/s.
	{
		Name:               "h100",
		Dense:              DenseRates{BF16: hopperBF16, FP8: hopperFP8},
		HBMBytesPerSecond:  3.35e12,
		HostBytesPerSecond: pcieGen5Each,
		HostLink:           pcieGen5x16,
		Source:             "NVIDIA H100 datasheet (SXM)",
	},
	// NVIDIA H800 SXM: H100 SXM's compute, memory and PCIe with NVLink cut to 400 GB/s (the export
	// part DeepSeek reports on, whose figures PREFILL.md compares with the model).
	{
		Name:               "h800",
		Dense:              DenseRates{BF16: hopperBF16, FP8: hopperFP8},
		HBMBytesPerSecond:  3.35e12,
		HostBytesPerSecond: pcieGen5Each,
		HostLink:           pcieGen5x16,
		Source:             "NVIDIA H800 SXM (H100 SXM's compute and HBM3)",
	},
	// NVIDIA H200 Tensor Core GPU datasheet, H200 SXM: BF16 1,979 TFLOPS and FP8 3,958 TFLOPS with
	// sparsity, 141 GB HBM3e at 4.8 TB/s, PCIe Gen5 128 GB/s.
	{
		Name:               "h200",
		Dense:              DenseRates{BF16: hopperBF16, FP8: hopperFP8},
		HBMBytesPerSecond:  4.8e12,
		HostBytesPerSecond: pcieGen5Each,
		HostLink:           pcieGen5x16,
		Source:             "NVIDIA H200 datasheet (SXM)",
	},
	// NVIDIA HGX B200 (nvidia.com, HGX platform specifications), 8 GPUs: FP4 Tensor Core 144
	// PFLOPS with sparsity and 72 without, FP8/FP6 72 PFLOPS and FP16/BF16 36 PFLOPS with sparsity,
	// 1.4 TB HBM3e at 62 TB/s (7.7 TB/s a GPU), PCIe Gen5 x16 a GPU (MLPerf's B200 system
	// descriptions: "accelerator_host_interconnect": "PCIe Gen5 x16").
	{
		Name:               "b200",
		Dense:              DenseRates{BF16: hgxBlackwellBF16, FP8: hgxBlackwellFP8, FP4: 9e15},
		HBMBytesPerSecond:  7.7e12,
		HostBytesPerSecond: pcieGen5Each,
		HostLink:           pcieGen5x16,
		Source:             "NVIDIA HGX B200 specifications (per GPU)",
	},
	// NVIDIA GB200 NVL72 specifications, 72 GPUs: FP4 Tensor Core 1,440 PFLOPS, FP8/FP6 720 PFLOPS
	// and FP16/BF16 360 PFLOPS, all with sparsity (halved for dense), HBM3e at 576 TB/s (8 TB/s a
	// GPU). Its host is the Grace CPU over NVLink-C2C, 900 GB/s bidirectional (LMSYS's GB200 part
	// II: "GB200's fast bandwidth between CPUs and GPUs (900GB/s, bidirectional)"), taken here as
	// each GPU's, 450 GB/s each way. NVIDIA names it the superchip's link between one Grace and its
	// two GPUs; if both GPUs load at once and share it, each gets half: measure, and give
	// --host-link-rate.
	{
		Name: "gb200",
		Dense: DenseRates{
			BF16: 360e15 / gb200NVL72GPUs / 2,
			FP8:  720e15 / gb200NVL72GPUs / 2,
			FP4:  1440e15 / gb200NVL72GPUs / 2,
		},
		HBMBytesPerSecond:  576e12 / gb200NVL72GPUs,
		HostBytesPerSecond: nvlinkC2CEach,
		HostLink:           nvlinkC2C,
		Source:             "NVIDIA GB200 NVL72 specifications (per GPU)",
	},
	// NVIDIA Blackwell Ultra datasheet, HGX B300 (1,100 W), as NVIDIA's own ai-dynamo/aiconfigurator
	// transcribes it (src/aiconfigurator/systems/b300_sxm.yaml, citing the datasheet): FP16/BF16 4.5
	// PFLOPS and FP8 9 PFLOPS with sparsity, "FP4 ... 18 PFLOPS sparse | 14 PFLOPS dense" (FP4's
	// sparse is not twice its dense on Blackwell Ultra; other transcriptions give 13.125 or 13.5, and
	// the GB300's higher-power part 15), 62 TB/s of HBM3e over 8 GPUs (7.75 a GPU), PCIe Gen6 x16,
	// 128 GB/s each way (NVIDIA, "Inside NVIDIA Blackwell Ultra": the first part with PCIe Gen6). A
	// host whose root ports are Gen5 (DGX B300's Xeon 6776P) caps it at Gen5's 64: measure, and give
	// --host-link-rate.
	{
		Name:               "b300",
		Dense:              DenseRates{BF16: hgxBlackwellBF16, FP8: hgxBlackwellFP8, FP4: 14e15},
		HBMBytesPerSecond:  62e12 / 8,
		HostBytesPerSecond: pcieGen6Each,
		HostLink:           pcieGen6x16,
		Source:             "NVIDIA Blackwell Ultra datasheet, HGX B300 (per GPU)",
	},
	// AMD Instinct MI300X datasheet (OAM): peak FP16/BF16 1,307.4 TFLOPS and FP8 2,614.9 TFLOPS
	// dense (twice with sparsity), 192 GB HBM3 at 5.3 TB/s, PCIe Gen5 x16 (128 GB/s). The FP8 rate
	// is 304 CUs x 2,100 MHz x 4,096 FP8 FLOPs a clock a CU.
	{
		Name:               "mi300x",
		Dense:              DenseRates{BF16: 1307.4e12, FP8: 2614.9e12},
		HBMBytesPerSecond:  5.3e12,
		HostBytesPerSecond: pcieGen5Each,
		HostLink:           pcieGen5x16,
		Source:             "AMD Instinct MI300X datasheet",
	},
	// AMD Instinct MI355X datasheet (OAM): peak FP16/BF16 2.5 PFLOPS, FP8 5.0 PFLOPS and MXFP4 10
	// PFLOPS dense, 288 GB HBM3e at 8 TB/s, PCIe Gen5 x16. The exact rates are 256 CUs x 2,400 MHz x
	// 8,192 FP8 FLOPs a clock a CU (AMD at ISSCC 2026: twice MI300X's 4,096), BF16 half of it and
	// MXFP4 twice it.
	{
		Name:               "mi355x",
		Dense:              DenseRates{BF16: 2516.6e12, FP8: 5033.2e12, FP4: 10066.4e12},
		HBMBytesPerSecond:  8e12,
		HostBytesPerSecond: pcieGen5Each,
		HostLink:           pcieGen5x16,
		Source:             "AMD Instinct MI355X datasheet",
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

// CheckDType refuses a --prefill-dtype the GPU has no dense rate for (fp4 on a Hopper or an
// MI300X), naming the GPUs that have one.
func CheckDType(g GPU, d sizing.DType) error {
	if g.Dense.Of(d) > 0 {
		return nil
	}
	var have, with []string
	for _, t := range sizing.DTypes() {
		if g.Dense.Of(t) > 0 {
			have = append(have, t.String())
		}
	}
	for _, other := range gpus {
		if other.Dense.Of(d) > 0 {
			with = append(with, other.Name)
		}
	}
	return &errscope.ConfigError{
		Flag: "prefill-dtype",
		Reason: fmt.Sprintf(
			"%s has no dense %s rate (its datasheet gives %s): give one of those, or a --gpu with %s (%s)",
			g.Name,
			d,
			strings.Join(have, " and "),
			d,
			strings.Join(with, ", "),
		),
	}
}
