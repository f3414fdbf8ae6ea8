package report

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// Provenance is what produced a result, so that a result can be filed and reproduced from itself
// (nccl-tests and OSU print as much): the build, the MPI library, the command line, every flag's
// effective value (given, from a CPHICACHE_* variable, or the default), the hosts, the start and
// the trace's checksum. The command fills it as the job starts, before the work (the runner's
// Options.Provenance), and never changes it after, so that cphicache_run_info is one series for the
// whole job; world rank 0 prints it as the '#' header, writes it into the JSON report and as
// cphicache_run_info's labels.
type Provenance struct {
	Command     string   `json:"command"` // the subcommand: run, validate, sweep, ...
	Version     string   `json:"version"`
	GoVersion   string   `json:"go_version"`
	MPILibrary  string   `json:"mpi_library"`
	CommandLine []string `json:"command_line"` // os.Args
	// every flag of the command by name, as it took effect
	Config map[string]string `json:"config"`
	// "host (N ranks)", in world rank order of their first rank
	Hosts       []string `json:"hosts"`
	StartTime   string   `json:"start_time"` // RFC 3339, UTC
	TraceSHA256 string   `json:"trace_sha256,omitempty"`
}

// configLineBytes is where the header wraps the configuration: a terminal's width, a little less.
const configLineBytes = 110

// WriteHeader prints the provenance as '#' lines, before a command's own header.
func (p *Provenance) WriteHeader(w io.Writer) {
	if p == nil {
		return
	}
	fmt.Fprintf(w, "# cphicache %s (%s), MPI library: %s\n", p.Version, p.GoVersion, p.MPILibrary)
	fmt.Fprintf(w, "# command line: %s\n", strings.Join(p.CommandLine, " "))
	hosts := ""
	if len(p.Hosts) > 0 {
		hosts = " on " + strings.Join(p.Hosts, ", ")
	}
	fmt.Fprintf(w, "# started %s%s\n", p.StartTime, hosts)
	if p.TraceSHA256 != "" {
		fmt.Fprintf(w, "# trace %s, sha256 %s\n", p.Config["trace"], p.TraceSHA256)
	}
	line := "# configuration:"
	for _, kv := range p.configPairs() {
		if len(line)+1+len(kv) > configLineBytes && line != "#  " {
			fmt.Fprintln(w, line)
			line = "#  "
		}
		line += " " + kv
	}
	fmt.Fprintln(w, line)
}

// configPairs are the configuration's name=value words, by name; an empty value is said as "".
func (p *Provenance) configPairs() []string {
	names := make([]string, 0, len(p.Config))
	for name := range p.Config {
		names = append(names, name)
	}
	sort.Strings(names)
	pairs := make([]string, len(names))
	for i, name := range names {
		v := p.Config[name]
		if v == "" || strings.ContainsAny(v, " \t") {
			v = fmt.Sprintf("%q", v)
		}
		pairs[i] = "--" + name + "=" + v
	}
	return pairs
}

// infoLabels are cphicache_run_info's label names and values.
func (p *Provenance) infoLabels() (names, values []string) {
	return []string{
			"command",
			"version",
			"go_version",
			"mpi_library",
			"command_line",
			"hosts",
			"start_time",
			"trace_sha256",
			"configuration",
		},
		[]string{
			p.Command,
			p.Version,
			p.GoVersion,
			p.MPILibrary,
			strings.Join(p.CommandLine, " "),
			strings.Join(p.Hosts, ", "),
			p.StartTime,
			p.TraceSHA256,
			strings.Join(p.configPairs(), " "),
		}
}

// SetHosts names each host once, with its ranks, in world rank order of its first rank.
func (p *Provenance) SetHosts(hostOfRank []string) {
	if p == nil {
		return
	}
	counts := map[string]int{}
	var order []string
	for _, h := range hostOfRank {
		if counts[h] == 0 {
			order = append(order, h)
		}
		counts[h]++
	}
	p.Hosts = p.Hosts[:0]
	for _, h := range order {
		ranks := "ranks"
		if counts[h] == 1 {
			ranks = "rank"
		}
		p.Hosts = append(p.Hosts, fmt.Sprintf("%s (%d %s)", h, counts[h], ranks))
	}
}

// SetTraceChecksum records the SHA-256 of the trace at path (a run's --trace, or the file --trace -
// was kept in).
func (p *Provenance) SetTraceChecksum(path string) error {
	if p == nil || path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	p.TraceSHA256 = hex.EncodeToString(h.Sum(nil))
	return nil
}
