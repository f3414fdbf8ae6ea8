package main

// `cphicache l3 stat|clear`: look at and empty an L3 directory (hicache/l3). They read and remove files only,
// so they need no mpirun and start no MPI; a job may be using the directory meanwhile (a block removed under it
// is that job's miss).

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache"
	"github.com/cphicache/cphicache/hicache/l3"
	"github.com/cphicache/cphicache/hicache/spmd"
)

// l3Options are the flags of the l3 commands.
type l3Options struct {
	dir, fingerprintHex string

	fingerprint *uint64 // from fingerprintHex, by check; nil for every namespace
}

// l3DirFlag is --l3-dir, the one definition every command that uses the L3 takes.
func l3DirFlag(dest *string) cli.Flag {
	return &cli.StringFlag{Name: "l3-dir", EnvVars: []string{"CPHICACHE_L3_DIR"}, Category: "L3", Destination: dest,
		Usage: "the L3 tier's directory, local or on a shared filesystem; it must exist (one subdirectory per namespace fingerprint)"}
}

// check refuses a missing directory and a fingerprint that is not 16 hexadecimal digits.
func (o *l3Options) check(*cli.Context) error {
	if err := l3.CheckDir(o.dir); err != nil {
		return err
	}
	if o.fingerprintHex == "" {
		return nil
	}
	hex := strings.TrimPrefix(strings.ToLower(o.fingerprintHex), "0x")
	fp, err := strconv.ParseUint(hex, 16, 64)
	if err != nil || len(hex) > 16 {
		return &spmd.ConfigError{Flag: "l3-namespace-fingerprint", Reason: fmt.Sprintf("%q is not a 64-bit hexadecimal fingerprint (l3 stat lists them)", o.fingerprintHex)}
	}
	o.fingerprint = &fp
	return nil
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
		Action: func(*cli.Context) error {
			usage, err := l3.Usage(o.dir)
			if err != nil {
				return err
			}
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
	fmt.Fprintf(w, "# cphicache l3 stat: %s\n  %d namespaces, %d blocks, %s\n", dir, len(usage), blocks, l3Bytes(bytes))
	for _, u := range usage {
		fmt.Fprintf(w, "  namespace %016x: %d blocks, %s", u.Fingerprint, u.Blocks, l3Bytes(u.Bytes))
		if u.Blocks > 0 {
			fmt.Fprintf(w, ", oldest %s, newest %s", u.Oldest.UTC().Format(time.RFC3339), u.Newest.UTC().Format(time.RFC3339))
		}
		if u.TemporaryFiles > 0 {
			fmt.Fprintf(w, ", %d temporary files (writes in flight, or a dead writer's)", u.TemporaryFiles)
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
	return fmt.Sprintf("%s (%d bytes)", hicache.FormatBytes(bytes), bytes)
}

func l3ClearCommand() *cli.Command {
	o := &l3Options{}
	return &cli.Command{
		Name:  "clear",
		Usage: "empty the L3 directory: every namespace, or the one --l3-namespace-fingerprint names",
		Flags: []cli.Flag{l3DirFlag(&o.dir),
			&cli.StringFlag{Name: "l3-namespace-fingerprint", EnvVars: []string{"CPHICACHE_L3_NAMESPACE_FINGERPRINT"}, Category: "L3",
				Destination: &o.fingerprintHex, Usage: "remove only this namespace (hexadecimal, as l3 stat prints it)"}},
		OnUsageError: onUsageError,
		Before:       o.check,
		Action: func(*cli.Context) error {
			removed, err := l3.Clear(o.dir, o.fingerprint)
			for _, fp := range removed {
				fmt.Printf("removed namespace %016x\n", fp)
			}
			if err != nil {
				return err
			}
			if o.fingerprint != nil && len(removed) == 0 {
				// A mistyped fingerprint must not pass for a cleared one.
				return &spmd.ConfigError{Flag: "l3-namespace-fingerprint", Reason: fmt.Sprintf("no namespace %016x under %s", *o.fingerprint, o.dir)}
			}
			fmt.Printf("# cphicache l3 clear: %s: %d namespaces removed\n", o.dir, len(removed))
			return nil
		},
	}
}
