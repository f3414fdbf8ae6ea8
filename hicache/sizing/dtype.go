package sizing

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cphicache/cphicache/internal/errscope"
)

// DType is the precision a deployment stores its weights in and runs its linear layers at: what a
// parameter costs to read from HBM, and which of a GPU's tensor-core rates its matrix multiplies
// get (hicache/prefill). The KV cache is not part of it: every model's KV stays in bf16 here
// (bf16Bytes), as the engines' default KV dtype is the model's activation dtype.
type DType int

const (
	BF16 DType = iota + 1 // bfloat16: 2 bytes a parameter
	// FP8 (e4m3) weights with per-block scales (DeepSeek-V3's 128 x 128 blocks): 1 byte a
	// parameter, the scales' fp32 per 16,384 weights left out.
	FP8
	// FP4 (NVFP4 or MXFP4): two parameters a byte, the block scales (one byte per 16 or 32
	// elements, 3 to 6% more) left out.
	FP4
)

// dtypeNames are the names --prefill-dtype takes, in DType order.
var dtypeNames = []string{"bf16", "fp8", "fp4"}

// DTypes lists every DType, in the order the tables print them.
func DTypes() []DType { return []DType{BF16, FP8, FP4} }

// DTypeNames lists the names --prefill-dtype takes, for --help and completion.
func DTypeNames() []string { return slices.Clone(dtypeNames) }

func (d DType) String() string {
	if d >= BF16 && d <= FP4 {
		return dtypeNames[d-1]
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// WeightBytes is the bytes one parameter takes in HBM at this precision: 2, 1 or 0.5.
func (d DType) WeightBytes() float64 {
	switch d {
	case BF16:
		return 2
	case FP8:
		return 1
	case FP4:
		return 0.5
	}
	panic(fmt.Sprintf("sizing: %v has no weight size", d))
}

// ParseDType reads a precision by name (case-insensitive); the error names flag and the choices.
func ParseDType(flag, s string) (DType, error) {
	i := slices.IndexFunc(dtypeNames, func(n string) bool {
		return strings.EqualFold(n, strings.TrimSpace(s))
	})
	if i < 0 {
		return 0, &errscope.ConfigError{
			Flag:   flag,
			Reason: fmt.Sprintf("%q is not one of %s", s, strings.Join(dtypeNames, ", ")),
		}
	}
	return DType(i + 1), nil
}
