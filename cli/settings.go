package cli

// The settings every rank of a job agrees on at start-up (spmd.AgreeOnSettings, in spmd.StartJob):
// the command, the build, every flag's effective value, the environment values the job reads alike,
// and the identity of each input file, so that ranks started with different flags stop with exit
// status 2 instead of hanging or running.

import (
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/transport"
)

// jobSettings are the running command's settings (set by harden's Action, as annotateError is);
// withJob and topo hand them to spmd.StartJob.
var jobSettings = func() []spmd.Setting { return nil }

// rankOwnFlags are the one list of the flags a rank may hold its own value of, each with why: they
// change only what a rank prints, or end the command before a job starts. Every other flag of every
// command is compared (TestEveryFlagOfEveryCommandIsComparedUnlessRankOwn walks them all).
var rankOwnFlags = []struct{ name, why string }{
	{"help", "prints the help and ends the command before any job starts"},
	{"version", "the app's own: prints the build and ends before any command runs"},
	{"log-level", "changes only what a rank logs on stderr, never what the job does"},
}

// rankOwn says whether name is one of rankOwnFlags.
func rankOwn(name string) bool {
	return slices.ContainsFunc(rankOwnFlags, func(f struct{ name, why string }) bool {
		return f.name == name
	})
}

// inputFileFlags name files whose content is part of the job: their identity is compared, not only
// their names.
var inputFileFlags = []string{"trace", "prefill-profile"}

// jobEnvironment are the variables (other than the flags') that change what every rank does alike.
var jobEnvironment = []string{transport.NCCLHostBuffersEnv}

// commandSettings lists c's settings in the command's own order, which every rank running the same
// build and command shares.
func commandSettings(c *cli.Context, commandLine []string) []spmd.Setting {
	settings := []spmd.Setting{
		{Name: "the command", Value: commandPath(c)},
		{Name: "the build", Value: version},
	}
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if rankOwn(name) || settingLeftOut(name) { // settingLeftOut: a deliberate bug, simbugs only
			continue
		}
		s := spmd.Setting{
			Name:   "--" + name,
			Value:  settingValue(c.Value(name)),
			Source: flagSource(f, commandLine),
		}
		settings = append(settings, s)
		if slices.Contains(inputFileFlags, name) {
			settings = append(settings, contentSetting(s))
		}
	}
	for _, env := range jobEnvironment {
		settings = append(settings, spmd.Setting{Name: env, Value: os.Getenv(env)})
	}
	return settings
}

// settingValue is a flag's effective value (c.Value) as text. A slice flag's value prints as its
// struct, which holds whether it was set: a list given on one rank and left at its default (the
// same list) on another differed. Its elements are the setting.
func settingValue(v any) string {
	switch v := v.(type) {
	case cli.IntSlice:
		return fmt.Sprint(v.Value())
	case cli.Int64Slice:
		return fmt.Sprint(v.Value())
	case cli.StringSlice:
		return fmt.Sprint(v.Value())
	}
	return fmt.Sprint(v)
}

// contentSetting is the identity of the file an input file flag's setting s names. Every rank holds
// it, known or not, so that a rank given the file and one given none hold the same list of names:
// the comparison then names the flag alone, where a list one longer made every setting after it
// differ and said the ranks ran different builds. No file ("") and "-" (broadcast from rank 0) have
// nothing to identify.
func contentSetting(s spmd.Setting) spmd.Setting {
	content := spmd.Setting{Name: s.Name + "'s content", Unknown: true}
	if s.Value != "" && s.Value != "-" {
		identity, err := fileIdentity(s.Value)
		content.Value, content.Unknown = identity, err != nil
	}
	return content
}

// flagSource names the environment variable that gave f's value, when the command line did not.
func flagSource(f cli.Flag, commandLine []string) string {
	if onCommandLine(commandLine, f.Names()) {
		return ""
	}
	if withEnv, ok := f.(interface{ GetEnvVars() []string }); ok {
		for _, env := range withEnv.GetEnvVars() {
			if _, set := os.LookupEnv(env); set {
				return env
			}
		}
	}
	return ""
}

// identityBytes is how much of each end of a file fileIdentity reads: a trace of many GiB costs two
// reads.
const identityBytes = 1 << 20

// fileIdentity is a file's size and the CRC-32C of its first and last identityBytes (all of it when
// smaller). A rank that cannot read the file (only the ranks that read the workload need it) does
// not know it, nor one whose path is not a regular file (a pipe, <(zcat trace.gz), which reading
// here would empty).
func fileIdentity(path string) (string, error) {
	if info, err := os.Stat(path); err != nil || !info.Mode().IsRegular() {
		return "", fmt.Errorf("%s: not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", err
	}
	crc := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	if _, err := io.Copy(crc, io.LimitReader(f, identityBytes)); err != nil {
		return "", err
	}
	if tail := max(info.Size()-identityBytes, identityBytes); tail < info.Size() {
		if _, err := io.Copy(crc, io.NewSectionReader(f, tail, info.Size()-tail)); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%d bytes, CRC-32C of its ends %08x", info.Size(), crc.Sum32()), nil
}
