package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/cphicache/cphicache/hicache/spmd"
)

// Meta is what every benchmark's header and JSON say about the run: enough to reproduce it and to
// judge it (the machine is shared, so the load average at the start is part of the record).
type Meta struct {
	Benchmark   string          `json:"benchmark"`
	Version     string          `json:"version"` // git describe of the build (main.version)
	StartedAt   time.Time       `json:"started_at"`
	GoVersion   string          `json:"go_version"`
	GOMAXPROCS  int             `json:"gomaxprocs"`
	CPUs        int             `json:"cpus"`
	LoadAverage string          `json:"load_average"` // /proc/loadavg at the start
	MPILibrary  string          `json:"mpi_library,omitempty"`
	Config      []Setting       `json:"config"`
	Ranks       []spmd.RankInfo `json:"ranks"`
}

// Setting is one line of the configuration, in the order it was set.
type Setting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// NewMeta records the build and the machine; the caller adds the configuration and the ranks.
func NewMeta(benchmark, version string) *Meta {
	load, _ := os.ReadFile("/proc/loadavg")
	return &Meta{
		Benchmark: benchmark, Version: version, StartedAt: time.Now().UTC().Truncate(time.Second),
		GoVersion: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0), CPUs: runtime.NumCPU(),
		LoadAverage: strings.TrimSpace(string(load)),
	}
}

// Set appends one configuration value.
func (m *Meta) Set(name string, value any) {
	m.Config = append(m.Config, Setting{Name: name, Value: fmt.Sprint(value)})
}

// SingleRank records the rank map of a benchmark that runs without MPI: one rank on this host.
func (m *Meta) SingleRank() {
	host, _ := os.Hostname()
	m.Ranks = []spmd.RankInfo{{Host: host}}
}

// WriteHeader prints the '#' header: build, machine, configuration and the rank -> host map.
func (m *Meta) WriteHeader(w io.Writer) {
	fmt.Fprintf(w, "# cphicache bench %s\n", m.Benchmark)
	fmt.Fprintf(
		w,
		"# version %s, %s, started %s\n",
		m.Version,
		m.GoVersion,
		m.StartedAt.Format(time.RFC3339),
	)
	fmt.Fprintf(
		w,
		"# machine: %d CPUs, GOMAXPROCS %d, load average %s (shared machine: compare the ratios, not the absolutes)\n",
		m.CPUs,
		m.GOMAXPROCS,
		m.LoadAverage,
	)
	if m.MPILibrary != "" {
		fmt.Fprintf(w, "# MPI library: %s\n", firstLine(m.MPILibrary))
	}
	fmt.Fprintf(w, "# configuration:\n")
	for _, s := range m.Config {
		fmt.Fprintf(w, "#   %-24s %s\n", s.Name, s.Value)
	}
	fmt.Fprintf(w, "# ranks: %d\n", len(m.Ranks))
	for _, r := range m.Ranks {
		nodeRank := fmt.Sprint(r.NodeRank)
		if r.NodeRank < 0 {
			nodeRank = "-" // not recorded (the e2e reports name hosts, not node ranks)
		}
		fmt.Fprintf(
			w,
			"#   rank %3d  host %-24s node-rank %3s  cp-group %3d  cp-rank %3d\n",
			r.WorldRank,
			r.Host,
			nodeRank,
			r.CPGroup,
			r.CPRank,
		)
	}
	fmt.Fprintf(w, "#\n")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// result is the JSON document of one benchmark run.
type result struct {
	Meta  *Meta `json:"meta"`
	Rows  any   `json:"rows"`
	Wrong int64 `json:"wrong"`
}

// WriteJSON writes the header and rows as one JSON document.
func WriteJSON(path string, meta *Meta, rows any, wrong int64) error {
	b, err := json.MarshalIndent(result{Meta: meta, Rows: rows, Wrong: wrong}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// WrongError is a benchmark whose validation found wrong results: the command exits non-zero on it.
type WrongError struct {
	Benchmark string
	Wrong     int64
}

func (e *WrongError) Error() string {
	return fmt.Sprintf("bench %s: %d wrong results (see the #wrong column)", e.Benchmark, e.Wrong)
}

// CheckWrong returns a *WrongError when wrong is not zero.
func CheckWrong(benchmark string, wrong int64) error {
	if wrong != 0 {
		return &WrongError{Benchmark: benchmark, Wrong: wrong}
	}
	return nil
}

// column is one fixed-width column of a table: its name, its unit (the second header line) and the
// fmt verb of its values, without width.
type column struct {
	name, unit, verb string
	width            int
}

// table prints fixed-width rows under a two-line header (names, then units), as nccl-tests does.
type table []column

func (t table) writeHeader(w io.Writer) {
	var names, units strings.Builder
	names.WriteString("#")
	units.WriteString("#")
	for _, c := range t {
		fmt.Fprintf(&names, " %*s", c.width, c.name)
		fmt.Fprintf(&units, " %*s", c.width, c.unit)
	}
	fmt.Fprintln(w, names.String())
	fmt.Fprintln(w, units.String())
}

func (t table) writeRow(w io.Writer, values ...any) {
	var line strings.Builder
	line.WriteString(" ")
	for i, c := range t {
		fmt.Fprintf(&line, " %*s", c.width, fmt.Sprintf(c.verb, values[i]))
	}
	fmt.Fprintln(w, line.String())
}
