package cli

// What produced a result (report.Provenance): the build, the MPI library, the command line and
// every flag's effective value, taken as the command starts; the hosts and the trace's checksum
// once its job has started. Each command prints it as the '#' lines that open its output, and
// writes it into its JSON and metrics.

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/sweep"
	"github.com/cphicache/cphicache/mpi"
)

// newProvenance is the command's provenance as it starts. MPI_Get_library_version and
// MPI_Get_version are among the calls MPI allows before MPI_Init.
func newProvenance(c *cli.Context) *report.Provenance {
	library := "unknown"
	if lib, err := mpi.LibraryVersion(); err == nil {
		library = strings.TrimSpace(
			strings.SplitN(lib, ",", 2)[0],
		) // Open MPI's is a paragraph; its first clause names it
		if major, minor, err := mpi.Version(); err == nil {
			library += fmt.Sprintf(" (MPI %d.%d)", major, minor)
		}
	}
	config := map[string]string{}
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if name == "help" {
			continue
		}
		switch v := c.Value(name).(type) {
		case nil:
			config[name] = ""
		case cli.StringSlice:
			config[name] = strings.Join(v.Value(), ",")
		default:
			config[name] = fmt.Sprint(v)
		}
	}
	host, _ := os.Hostname()
	return &report.Provenance{
		Command:     commandPath(c),
		Version:     version,
		GoVersion:   runtime.Version(),
		MPILibrary:  library,
		CommandLine: os.Args,
		Config:      config,
		Hosts:       []string{host + " (1 rank)"},
		StartTime:   time.Now().UTC().Format(time.RFC3339),
	}
}

// startProvenance completes p once the job has started: every rank's host (a World collective every
// rank calls) and, on world rank 0, which writes the output, the SHA-256 of the trace at tracePath
// (none: "").
func startProvenance(job *spmd.Job, p *report.Provenance, tracePath string) error {
	rows, err := job.Topo.Gather("")
	if err != nil {
		return err
	}
	hosts := make([]string, len(rows))
	for i, row := range rows {
		hosts[i] = row.Host
	}
	p.SetHosts(hosts)
	// --cp and --dp left unset are derived from the launch: the configuration says what they
	// became.
	for name, size := range map[string]int{"cp": job.Topo.CPSize, "dp": job.Topo.DPSize} {
		if _, ok := p.Config[name]; ok {
			p.Config[name] = fmt.Sprint(size)
		}
	}
	if job.Topo.WorldRank == 0 {
		if err := p.SetTraceChecksum(tracePath); err != nil {
			p.TraceSHA256 = "unreadable: " + err.Error() // the run says more when it reads it
		}
	}
	return nil
}

// sizeProvenance sets, in p's configuration, the geometry flags' values that opts make on job's
// layout (Options.SizedFlags), so that the configuration records the job that ran (the command
// line, not the whole configuration, is what reruns it: a --model and the --layers it sets are
// exclusive). Options that cannot be sized keep the flags as parsed; the run refuses them with
// their own error.
func sizeProvenance(job *spmd.Job, p *report.Provenance, opts *config.Options) {
	sized, err := opts.SizedFlags(job.Topo.CPSize, job.Topo.NodeSize, job.Topo.GroupNodes)
	if err != nil {
		return
	}
	for name, value := range sized {
		if _, ok := p.Config[name]; ok {
			p.Config[name] = value
		}
	}
}

// sizeSweepProvenance sets, in p's configuration, the geometry a sweep runs, as sizeProvenance does
// for run: the flags' values that opts make for the CP group it models (Options.SizedFlags at cp
// group.GPUs on one node: its L1's --device-pages, sized from the model and the GPU when none was
// given), and --l2-slots the slots of its sizes, one a size. Options that cannot be sized keep the
// flags as parsed; the sweep refuses them with their own error.
func sizeSweepProvenance(
	p *report.Provenance,
	opts *config.Options,
	group sweep.Group,
	sizes []sweep.Size,
) {
	gpus := max(1, group.GPUs)
	sized, err := opts.SizedFlags(gpus, gpus, 1)
	if err != nil {
		return
	}
	slots, err := sweep.SlotsOf(opts, sizes, group)
	if err != nil {
		return
	}
	list := make([]string, len(slots))
	for i, n := range slots {
		list[i] = strconv.Itoa(n)
	}
	sized["l2-slots"] = strings.Join(list, ",")
	for name, value := range sized {
		if _, ok := p.Config[name]; ok {
			p.Config[name] = value
		}
	}
}
