package prefill

import "io"

// Options are the flags that choose a prefill model: --prefill-profile when given, else the
// roofline of --model on --gpu in --prefill-dtype at --prefill-efficiency over the group's GPUs
// (the CP size).
type Options struct {
	Model     string // --model
	GPU       string // --gpu (DefaultGPU)
	GroupGPUs int    // the GPUs that prefill one request together: the CP size
	// DType is --prefill-dtype: bf16, fp8 or fp4; "" for the model's served precision.
	DType string
	// Efficiency is --prefill-efficiency's value (DefaultEfficiency) and EfficiencyText the value
	// as the user gave it ("1/0.116"), which the summary prints; "" prints the value.
	Efficiency     float64
	EfficiencyText string
	ProfilePath    string // --prefill-profile; "" for the roofline
	// Open opens the profile (os.Open's shape, wrapped by the caller): this package opens no file
	// itself.
	Open func(path string) (io.ReadCloser, error)
}

// New builds the model the options choose. A profile replaces the roofline whole (the GPU and the
// efficiency are then not used, and the model's Describe says it is the profile). Errors are
// *errscope.ConfigError naming the flag.
func New(o Options) (Model, error) {
	// Each branch returns a nil Model, not a typed nil pointer, with its error.
	if o.ProfilePath != "" {
		p, err := OpenProfile(o.ProfilePath, o.Open)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
	r, err := newRoofline(o)
	if err != nil {
		return nil, err
	}
	return r, nil
}
