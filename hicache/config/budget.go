package config

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/prefill"
	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/internal/errscope"
)

// A deployment's geometry when the user gives none (run and sweep with the serving clock and a
// model): L1 is what a serving engine leaves a GPU's KV cache, and L2 what SGLang's HiCache gives
// the host by default. So a run replays the geometry the modelled deployment would have, not the
// flags' toy defaults, and says so in its summary.
const (
	// GPUMemoryUtilization is the share of a GPU's HBM the engine takes for its weights and its KV
	// cache: vLLM's gpu_memory_utilization (0.9 by default; vllm/config/cache.py, CacheConfig),
	// the KV cache getting what the weights leave of it; TensorRT-LLM's free_gpu_memory_fraction
	// is 0.9 too. The activations' peak and CUDA graphs, which vLLM also takes from it, are left
	// out: the budget is an upper bound by a few GB.
	GPUMemoryUtilization = 0.9
	// HiCacheRatio is SGLang's --hicache-ratio default: the host KV pool twice the device pool
	// (docs.sglang.io, "SGLang HiCache Best Practices": --hicache-ratio 2, host memory 2x GPU
	// memory).
	HiCacheRatio = 2
)

// DeviceBudget is one GPU's KV memory in a CP group of gpus that shards the model's weights over
// them (tensor or expert parallel within the group, as SGLang's prefill CP runs them):
// GPUMemoryUtilization of its HBM less its share of the weights in the deployed precision.
type DeviceBudget struct {
	Bytes                      int64 // a GPU's KV
	HBMBytes, WeightBytesOfGPU float64
	// Describe says the rule and its inputs, for the summary.
	Describe string
}

// DeviceBudget is the KV budget of one GPU of --gpu for model over gpus GPUs; the error, naming
// --device-bytes, says when the weights leave the GPU no KV.
func (o *ServingOptions) DeviceBudget(model string, gpus int) (DeviceBudget, error) {
	m, err := sizing.LookupModel(model)
	if err != nil {
		return DeviceBudget{}, err
	}
	hbm, source, err := prefill.HBMBytes(o.Prefill.GPU)
	if err != nil {
		return DeviceBudget{}, err
	}
	dtype, err := prefill.DTypeFor(m, o.Prefill.DType)
	if err != nil {
		return DeviceBudget{}, err
	}
	gpus = max(1, gpus)
	b := DeviceBudget{
		HBMBytes:         hbm,
		WeightBytesOfGPU: float64(m.Params) * dtype.WeightBytes() / float64(gpus),
	}
	kv := GPUMemoryUtilization*hbm - b.WeightBytesOfGPU
	if kv < float64(m.TokenBytes()) {
		return DeviceBudget{}, &errscope.ConfigError{
			Flag: "device-bytes",
			Reason: fmt.Sprintf(
				"no L1 geometry was given, and %s's weights in %s over %d x %s (%s a GPU) leave no KV in %g of its %s of HBM: give --device-bytes or --device-pages, or a larger CP group",
				m.Name, dtype, gpus, o.Prefill.GPU, gigabytes(b.WeightBytesOfGPU),
				GPUMemoryUtilization, gigabytes(hbm),
			),
		}
	}
	b.Bytes = int64(kv)
	b.Describe = fmt.Sprintf(
		"L1 %s (%s) a GPU = %g x %s of HBM (%s) less %s's %s weights over %d GPUs, %s a GPU "+
			"(vLLM's gpu_memory_utilization rule, activations left out)",
		gigabytes(kv), sizing.FormatBytes(b.Bytes), GPUMemoryUtilization, gigabytes(hbm),
		source, m.Name, dtype, gpus, gigabytes(b.WeightBytesOfGPU),
	)
	return b, nil
}

// gigabytes writes bytes in decimal GB, as the datasheets print HBM: 141 GB, 83.88 GB.
func gigabytes(bytes float64) string { return sizing.Significant(bytes/1e9, 4) + " GB" }
