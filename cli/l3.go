package cli

// `cphicache l3 stat|clear`: look at and empty an L3 directory (hicache/l3). They read and remove
// files only, so they need no mpirun and start no MPI; a job may be using the directory meanwhile
// (a block removed under it is that job's miss).

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/l3"
	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/internal/errscope"
)

// l3Options are the flags of the l3 commands.
type l3Options struct {
	dir, fingerprintHex string

	// fingerprintHex in lower case without 0x, by check; "" for every namespace
	fingerprintPrefix string
}

// l3DirFlag is --l3-dir, the one definition every command that uses the L3 takes.
func l3DirFlag(dest *string) cli.Flag {
	return &cli.StringFlag{
		Name:        "l3-dir",
		EnvVars:     []string{"CPHICACHE_L3_DIR"},
		Category:    "L3",
		Destination: dest,
		Usage:       "the L3 tier's directory, local or on a shared filesystem; it must exist (one subdirectory per namespace fingerprint)",
	}
}

// check refuses a missing directory and a fingerprint that is not 1 to 16 hexadecimal digits.
func (o *l3Options) check(*cli.Context) error {
	if err := l3.CheckDir(o.dir); err != nil {
		return err
	}
	if o.fingerprintHex == "" {
		return nil
	}
	hex := strings.TrimPrefix(strings.ToLower(o.fingerprintHex), "0x")
	if _, err := strconv.ParseUint(hex, 16, 64); err != nil || len(hex) > 16 {
		return &errscope.ConfigError{
			Flag: "l3-namespace-fingerprint",
			Reason: fmt.Sprintf(
				"%q is not a 64-bit hexadecimal fingerprint, or the start of one (l3 stat lists them)",
				o.fingerprintHex,
			),
		}
	}
	o.fingerprintPrefix = hex
	return nil
}

// namespaceByPrefix is the one namespace under dir whose fingerprint (16 hexadecimal digits, as l3
// stat prints it) starts with prefix, as git takes the start of a commit's hash: a value is never
// padded into another namespace's fingerprint (0ba3d4fb is not 000000000ba3d4fb). None, or more
// than one, is an error of the flag that lists the namespaces there are, or those that match.
func namespaceByPrefix(dir, prefix string) (uint64, error) {
	usage, err := l3.Usage(dir)
	if err != nil {
		return 0, oneProcess(err)
	}
	var matches, all []string
	var fingerprint uint64
	for _, u := range usage {
		name := fmt.Sprintf("%016x", u.Fingerprint)
		if u.Description != "" {
			name += " (" + u.Description + ")"
		}
		all = append(all, name)
		if strings.HasPrefix(fmt.Sprintf("%016x", u.Fingerprint), prefix) {
			matches, fingerprint = append(matches, name), u.Fingerprint
		}
	}
	reason := ""
	switch {
	case len(matches) == 1:
		return fingerprint, nil
	case len(matches) > 1:
		reason = fmt.Sprintf(
			"%q is the start of %d namespaces' fingerprints: %s; give more of its digits",
			prefix,
			len(matches),
			strings.Join(matches, "; "),
		)
	case len(all) == 0:
		reason = fmt.Sprintf(
			"no namespace starts with %q under %s: it holds no namespace",
			prefix,
			dir,
		)
	default:
		reason = fmt.Sprintf(
			"no namespace starts with %q under %s; it holds %s: %s",
			prefix,
			dir,
			errscope.Plural(len(all), "namespace"),
			strings.Join(all, "; "),
		)
	}
	return 0, &errscope.ConfigError{Flag: "l3-namespace-fingerprint", Reason: reason}
}

func l3Command() *cli.Command {
	return &cli.Command{
		Name:         "l3",
		Usage:        "look at or empty the L3 tier's directory (needs no mpirun)",
		OnUsageError: onUsageError,
		Subcommands:  []*cli.Command{l3StatCommand(), l3ClearCommand()},
	}
}

func l3StatCommand() *cli.Command {
	o := &l3Options{}
	return &cli.Command{
		Name:         "stat",
		Usage:        "print the L3 directory's blocks and bytes, per namespace: its fingerprint and fields, blocks, bytes, oldest and newest use",
		Flags:        []cli.Flag{l3DirFlag(&o.dir)},
		OnUsageError: onUsageError,
		Before:       o.check,
		Action: func(c *cli.Context) error {
			usage, err := l3.Usage(o.dir)
			if err != nil {
				return oneProcess(err)
			}
			newProvenance(c).WriteHeader(os.Stdout)
			writeL3Usage(os.Stdout, o.dir, usage)
			return nil
		},
	}
}

func writeL3Usage(w io.Writer, dir string, usage []l3.NamespaceUsage) {
	var blocks int
	var bytes int64
	for _, u := range usage {
		blocks, bytes = blocks+u.Blocks, bytes+u.Bytes
	}
	fmt.Fprintf(
		w,
		"# cphicache l3 stat: %s\n  %s, %s, %s\n",
		dir,
		errscope.Plural(len(usage), "namespace"),
		errscope.Plural(int(blocks), "block"),
		l3Bytes(bytes),
	)
	for _, u := range usage {
		fmt.Fprintf(w, "  namespace %016x: %s", u.Fingerprint, errscope.Plural(u.Blocks, "block"))
		if u.PartFiles > 0 {
			fmt.Fprintf(
				w,
				" (in %s, a part a node of its CP group",
				errscope.Plural(u.PartFiles, "part-file"),
			)
			if u.Incomplete > 0 {
				fmt.Fprintf(w, "; %d missing a part, which no reader finds whole", u.Incomplete)
			}
			fmt.Fprint(w, ")")
		}
		fmt.Fprintf(w, ", %s", l3Bytes(u.Bytes))
		if u.Blocks > 0 {
			fmt.Fprintf(
				w,
				", oldest %s, newest %s",
				u.Oldest.UTC().Format(time.RFC3339),
				u.Newest.UTC().Format(time.RFC3339),
			)
		}
		if u.TemporaryFiles > 0 {
			fmt.Fprintf(
				w,
				", %d temporary files (writes in flight, or a dead writer's)",
				u.TemporaryFiles,
			)
		}
		description := u.Description
		if description == "" {
			description = "(no namespace.txt)"
		}
		fmt.Fprintf(w, "\n    %s\n", description)
	}
}

// l3Bytes is a size both readable and exact, for comparing with a budget (--l3-bytes) or du.
func l3Bytes(bytes int64) string {
	return fmt.Sprintf("%s (%d bytes)", sizing.FormatBytes(bytes), bytes)
}

// oneProcess marks an error of a command that runs without mpirun, as one process: it is printed
// plainly, not as a rank's.
func oneProcess(err error) error { return &spmd.JobWide{Err: err} }

func l3ClearCommand() *cli.Command {
	o := &l3Options{}
	return &cli.Command{
		Name:  "clear",
		Usage: "empty the L3 directory: every namespace, or the one --l3-namespace-fingerprint names",
		Flags: []cli.Flag{l3DirFlag(&o.dir),
			&cli.StringFlag{
				Name:        "l3-namespace-fingerprint",
				EnvVars:     []string{"CPHICACHE_L3_NAMESPACE_FINGERPRINT"},
				Category:    "L3",
				Destination: &o.fingerprintHex,
				Usage:       "remove only this namespace: its fingerprint as l3 stat prints it, or the start of it (as a git hash), which must match one namespace",
			}},
		OnUsageError: onUsageError,
		Before:       o.check,
		Action: func(*cli.Context) error {
			var fingerprint *uint64
			if o.fingerprintPrefix != "" {
				fp, err := namespaceByPrefix(o.dir, o.fingerprintPrefix)
				if err != nil {
					return err
				}
				fingerprint = &fp
			}
			removed, err := l3.Clear(o.dir, fingerprint)
			for _, fp := range removed {
				fmt.Printf("removed namespace %016x\n", fp)
			}
			if err != nil {
				fmt.Printf(
					"# cphicache l3 clear: %s: %s removed, and not all\n",
					o.dir,
					errscope.Plural(len(removed), "namespace"),
				)
				return oneProcess(fmt.Errorf("l3 clear: %w", err))
			}
			if fingerprint != nil &&
				len(removed) == 0 { // cleared meanwhile: it must not pass for one cleared now
				return &errscope.ConfigError{
					Flag:   "l3-namespace-fingerprint",
					Reason: fmt.Sprintf("no namespace %016x under %s", *fingerprint, o.dir),
				}
			}
			fmt.Printf(
				"# cphicache l3 clear: %s: %s removed\n",
				o.dir,
				errscope.Plural(len(removed), "namespace"),
			)
			return nil
		},
	}
}

// runL3Options are run's and validate's --l3-* flags (--l3-dir is l3DirFlag, shared with the l3
// commands).
type runL3Options struct {
	dir, bytes, namespace          string
	blockTokens, prefetchThreshold int
	writePolicy, prefetchPolicy    string
	fsync                          bool
}

func (o *runL3Options) flags() []cli.Flag {
	env := func(name string) []string {
		return []string{"CPHICACHE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))}
	}
	return []cli.Flag{
		l3DirFlag(&o.dir),
		&cli.StringFlag{
			Name:        "l3-bytes",
			Value:       "64GiB",
			EnvVars:     env("l3-bytes"),
			Category:    "L3",
			Destination: &o.bytes,
			Usage:       "the L3's capacity (e.g. 2TiB, 500GB): each CP group keeps the blocks it knows of in this namespace within it, least recently used first out; with a model (--model, or the serving clock's --prefill-model) the bytes are the model's KV, so scaled-down copies keep as many blocks as the model's bytes hold; without one, the block files' bytes; with --l3-dir",
		},
		&cli.StringFlag{
			Name:        "l3-namespace",
			EnvVars:     env("l3-namespace"),
			Category:    "L3",
			Destination: &o.namespace,
			DefaultText: "--model's name",
			Usage:       "what else makes two jobs' KV differ (model, weights version, dtype): blocks are shared only within a namespace, which also fingerprints the layers, payloads, page tokens, bytes per token, CP size and --seed",
		},
		&cli.IntFlag{
			Name:        "l3-block-tokens",
			Value:       512,
			EnvVars:     env("l3-block-tokens"),
			Category:    "L3",
			Destination: &o.blockTokens,
			Usage:       "tokens per L3 block, a multiple of --page-tokens; blocks are aligned to the start of the prompt and keyed by every token up to their end, so an L3 hit is always a prefix",
		},
		&cli.StringFlag{
			Name:        "l3-write-policy",
			Value:       "write_through",
			EnvVars:     env("l3-write-policy"),
			Category:    "L3",
			Destination: &o.writePolicy,
			Usage:       "when a block is written: write_through (once its L2 objects are committed) or write_back (when the L2 is about to evict them)",
		},
		&cli.BoolFlag{
			Name:        "l3-fsync",
			EnvVars:     env("l3-fsync"),
			Category:    "L3",
			Destination: &o.fsync,
			Usage:       "fsync each block file and its directory before the block counts as stored",
		},
		&cli.StringFlag{
			Name:        "l3-prefetch-policy",
			Value:       "timeout",
			EnvVars:     env("l3-prefetch-policy"),
			Category:    "L3",
			Destination: &o.prefetchPolicy,
			Usage:       "how long a step waits for its L3 reads before its consensus: best_effort (not at all), wait_complete (until all are read), timeout (2 s + 0.1 s per 1K tokens, at most 30 s); a request whose blocks are not read by then computes them",
		},
		&cli.IntFlag{
			Name:        "l3-prefetch-threshold",
			Value:       256,
			EnvVars:     env("l3-prefetch-threshold"),
			Category:    "L3",
			Destination: &o.prefetchThreshold,
			Usage:       "tokens: a request prefetches from the L3 only when at least this many of its prompt tokens are not cached in L1 or L2",
		},
	}
}

// options converts the flags; an --l3-* flag without --l3-dir is refused, since it would silently
// do nothing.
func (o *runL3Options) options(c *cli.Context, model string) (opts config.L3Options, err error) {
	if o.dir == "" {
		for _, f := range o.flags()[1:] {
			if name := f.Names()[0]; c.IsSet(name) {
				return opts, &errscope.ConfigError{Flag: name, Reason: "needs --l3-dir"}
			}
		}
		return opts, nil
	}
	opts = config.L3Options{
		Dir:               o.dir,
		Namespace:         o.namespace,
		BlockTokens:       o.blockTokens,
		Fsync:             o.fsync,
		PrefetchThreshold: o.prefetchThreshold,
	}
	if !c.IsSet("l3-namespace") {
		opts.Namespace = model
	}
	if opts.Bytes, err = sizing.ParseByteSize("l3-bytes", o.bytes); err != nil {
		return opts, err
	}
	if opts.WritePolicy, err = cache.ParseL3WritePolicy(o.writePolicy); err != nil {
		return opts, err
	}
	opts.PrefetchPolicy, err = cache.ParsePrefetchPolicy(o.prefetchPolicy)
	return opts, err
}
