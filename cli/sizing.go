package cli

// The sizing flags run, validate and sweep share: a real model (--model), capacities in bytes
// (--l2-bytes per node, --device-bytes per rank) or in pages (--l2-slots), and scaled-down copies
// (--copy-token-bytes). How a model maps to --layers, --payloads and --token-bytes is in
// hicache/sizing/models.go.
//
// --l2-slots and --l2-bytes are text, not numbers, because sweep reads the same flags as lists (a
// flag is defined once, whatever command takes it: TestEveryFlagIsDefinedOnce); run and validate
// take one value.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/hicache/sweep"
	"github.com/cphicache/cphicache/internal/errscope"
)

type sizingOptions struct {
	model                         string
	copyTokenBytes                int
	l2Slots, l2Bytes, deviceBytes string
	syncCopies                    bool
}

func (o *sizingOptions) modelFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{
			Name:        "model",
			EnvVars:     []string{"CPHICACHE_MODEL"},
			Category:    "model",
			Destination: &o.model,
			Usage: "a real model's KV size in bf16, one of " + strings.Join(
				sizing.ModelNames(),
				", ",
			) + ": sets --layers, --payloads and --token-bytes (the model's bytes per token per layer per payload divided among the cp ranks, rounded up to 8; hicache/sizing/models.go); empty = those flags. A real model copies its real KV size (about 128 KiB a token for llama-3.1-8b): --copy-token-bytes 8 keeps its capacities and copies far less",
		},
		&cli.IntFlag{
			Name:        "copy-token-bytes",
			EnvVars:     []string{"CPHICACHE_COPY_TOKEN_BYTES"},
			Category:    "model",
			Destination: &o.copyTokenBytes,
			Usage:       "copy only this many bytes per token per rank per layer per payload (a multiple of 8, at most --token-bytes or the model's), while capacities in tokens and bytes stay the real size's: a 512GiB L2 of a real model on a machine without 512 GiB; 0 = copy the real size",
		},
	}
}

func (o *sizingOptions) capacityFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{
			Name:        "l2-slots",
			Value:       "2048",
			EnvVars:     []string{"CPHICACHE_L2_SLOTS"},
			Category:    "cache",
			Destination: &o.l2Slots,
			Usage:       "L2 capacity: pages in the CP group's shared slab (one slot holds a page for every rank, layer and payload); sweep takes a comma-separated list",
		},
		&cli.StringFlag{
			Name:        "l2-bytes",
			EnvVars:     []string{"CPHICACHE_L2_BYTES"},
			Category:    "cache",
			Destination: &o.l2Bytes,
			Usage:       "L2 capacity in bytes per node, instead of --l2-slots (e.g. 512GiB, 1.5TiB, 500GB), shared by the node's CP groups; with a model (--model, or the serving clock's --prefill-model over a scaled-down geometry) the bytes are the model's KV (68.6 KiB a token for deepseek-v3), whatever the copies replay; without one, the geometry's (--token-bytes x --layers x --payloads x cp a token); sweep takes a comma-separated list, each a node's holding one CP group of --group-gpus",
		},
		&cli.StringFlag{
			Name:        "device-bytes",
			EnvVars:     []string{"CPHICACHE_DEVICE_BYTES"},
			Category:    "cache",
			Destination: &o.deviceBytes,
			Usage:       "L1 capacity in bytes of KV per rank (one GPU), instead of --device-pages (e.g. 40GiB); a rank holds 1/cp of each page, so a CP group's L1 is cp times it in tokens; with a model (--model, or the serving clock's --prefill-model) the bytes are the model's KV, whatever the copies replay; without one, the geometry's",
		},
	}
}

func (o *sizingOptions) syncCopiesFlag() cli.Flag {
	return &cli.BoolFlag{
		Name:        "sync-copies",
		EnvVars:     []string{"CPHICACHE_SYNC_COPIES"},
		Category:    "checks",
		Destination: &o.syncCopies,
		Usage:       "drain every step's copies before its consensus, so every backup commits in the step that made it and hit counts are the same from run to run (sweep always does)",
	}
}

// exclusive refuses a size given twice: a model with the flags it sets, or a tier in both units.
func (o *sizingOptions) exclusive(c *cli.Context) error {
	if c.IsSet("model") {
		for _, flag := range []string{"layers", "payloads", "token-bytes"} {
			if c.IsSet(flag) {
				return &errscope.ConfigError{
					Flag: flag,
					Reason: fmt.Sprintf(
						"--model %s sets it; give one or the other (--copy-token-bytes copies fewer bytes of the model)",
						o.model,
					),
				}
			}
		}
	}
	for _, pair := range [][2]string{{"l2-slots", "l2-bytes"}, {"device-pages", "device-bytes"}} {
		if c.IsSet(pair[0]) && c.IsSet(pair[1]) {
			return &errscope.ConfigError{
				Flag: pair[1],
				Reason: fmt.Sprintf(
					"given with --%s: give the capacity once, in one unit",
					pair[0],
				),
			}
		}
	}
	return nil
}

// single fills opts for run and validate, which take one size per tier.
func (o *sizingOptions) single(opts *config.Options) (err error) {
	opts.Model, opts.CopyTokenBytes, opts.SyncCopies = o.model, o.copyTokenBytes, o.syncCopies
	for _, one := range []struct{ flag, value string }{{"l2-slots", o.l2Slots}, {"l2-bytes", o.l2Bytes}} {
		if strings.Contains(one.value, ",") {
			return &errscope.ConfigError{
				Flag: one.flag,
				Reason: fmt.Sprintf(
					"%q: run and validate take one size; cphicache sweep takes a list",
					one.value,
				),
			}
		}
	}
	if opts.L2Slots, err = parseSlots(o.l2Slots); err != nil {
		return err
	}
	if o.l2Bytes != "" {
		if opts.L2Bytes, err = sizing.ParseByteSize("l2-bytes", o.l2Bytes); err != nil {
			return err
		}
	}
	if o.deviceBytes != "" {
		opts.DeviceBytes, err = sizing.ParseByteSize("device-bytes", o.deviceBytes)
	}
	return err
}

// parseSlots reads one --l2-slots value; its range is Validate's and the geometry's to check.
func parseSlots(s string) (int, error) {
	slots, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, &errscope.ConfigError{
			Flag:   "l2-slots",
			Reason: fmt.Sprintf("%q is not a number of slots", s),
		}
	}
	return slots, nil
}

// sweepSizes fills opts for sweep and returns its points: --l2-bytes's list, else --l2-slots's;
// one of them must be given, since a sweep of the default size alone is one run, unless the sweep
// sizes its own (defaults: the serving clock with a model, sweep.DefaultSizes), when it returns
// none.
func (o *sizingOptions) sweepSizes(
	c *cli.Context,
	opts *config.Options,
	defaults bool,
) ([]sweep.Size, error) {
	opts.Model, opts.CopyTokenBytes, opts.SyncCopies = o.model, o.copyTokenBytes, true
	if o.deviceBytes != "" {
		var err error
		if opts.DeviceBytes, err = sizing.ParseByteSize("device-bytes", o.deviceBytes); err != nil {
			return nil, err
		}
	}
	var sizes []sweep.Size
	switch {
	case c.IsSet("l2-bytes"):
		bytes, err := sizing.ParseByteSizes("l2-bytes", o.l2Bytes)
		if err != nil {
			return nil, err
		}
		for _, b := range bytes {
			sizes = append(sizes, sweep.Size{Bytes: b})
		}
	case c.IsSet("l2-slots"):
		for _, item := range strings.Split(o.l2Slots, ",") {
			slots, err := parseSlots(item)
			if err != nil {
				return nil, err
			}
			if slots < 1 {
				return nil, &errscope.ConfigError{
					Flag:   "l2-slots",
					Reason: fmt.Sprintf("%d must be 1 or more", slots),
				}
			}
			sizes = append(sizes, sweep.Size{Slots: slots})
		}
	case defaults:
		opts.L2Slots = 1 // Validate's check; sweep.DefaultSizes gives each point its own
		return nil, nil
	default:
		return nil, &errscope.ConfigError{
			Flag:   "l2-bytes",
			Reason: "sweep needs the sizes to run: a list such as --l2-bytes 64GiB,128GiB,256GiB, or --l2-slots 1024,4096,16384 (with the serving clock and a model, it sizes its own)",
		}
	}
	opts.L2Slots = max(1, sizes[0].Slots) // Validate's check; each point sets its own
	return sizes, nil
}
