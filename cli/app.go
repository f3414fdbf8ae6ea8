package cli

// The app: its commands, and the way a command ends (exit statuses, the one way a fatal error is
// printed).

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/mpi"
)

// version is the build's: main.version, which the Makefile sets at link time (-X main.version=...)
// and Main stores here before the app is built.
var version = "dev"

// usageError is a command line that does not parse. Every rank sees the same command line, so it is
// printed once.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() + " (see --help)" }

// Scope: every rank parses the same command line.
func (e usageError) Scope() spmd.Scope { return spmd.JobScope }

func newApp() *cli.App {
	app := &cli.App{
		Name:    "cphicache",
		Usage:   "a CP-shared physical L2 KV-cache pool for context-parallel LLM serving (run it under mpirun)",
		Version: version,
		Description: "Every rank of a CP group runs the same deterministic page allocator over the same event stream, " +
			"so all ranks place every KV page identically in one shared-memory slab per node without a broadcast.\n" +
			"Launch with e.g.: mpirun -np 8 cphicache run --cp 8",
		EnableBashCompletion: true,
		OnUsageError:         onUsageError,
		Commands: []*cli.Command{
			runCommand(),
			validateCommand(),
			genTraceCommand(),
			sweepCommand(),
			l3Command(),
			simCommand(),
			topoCommand(),
			versionCommand(),
			benchCommand(),
			completionCommand(),
			manCommand(),
		},
	}
	harden(app)
	return app
}

// jobIDFlag is --job-id: a leak check on a node that other jobs share (a test suite's) must know
// which segments in /dev/shm are its own, so it names the job itself.
func jobIDFlag(dest *string) cli.Flag {
	return &cli.StringFlag{
		Name:        "job-id",
		EnvVars:     []string{"CPHICACHE_JOB_ID"},
		Category:    "output",
		Destination: dest,
		DefaultText: "$SLURM_JOB_ID, else p and the process id",
		Usage:       "the job's name in its shared-memory segments' names, /dev/shm/cphicache-<job-id>-g<CP group>-<random> (characters other than letters, digits, '.' and '_' become '_')",
	}
}

// jobID names the job in shared-memory segment names: --job-id, else Slurm's job id, else this
// process's id.
func jobID(given string) string {
	if given != "" {
		return given
	}
	if id := os.Getenv("SLURM_JOB_ID"); id != "" {
		return id
	}
	return fmt.Sprintf("p%d", os.Getpid())
}

// withJob starts MPI and the topology, runs fn, and ends the process the way the job's error
// requires.
func withJob(g globalOptions, fn func(*spmd.Job) error) error {
	job, err := spmd.StartJob(g.cp, g.dp, g.logLevel, jobSettings())
	if err != nil {
		return err
	}
	if err := fn(job); err != nil {
		os.Exit(job.Fail(annotateError(err)))
	}
	return job.Close()
}

// Main runs the command line of the build whose version is given (main.version), and exits with the
// status its error calls for (exitStatus); a job that fails ends the process itself (withJob).
func Main(buildVersion string) {
	version = buildVersion
	if err := newApp().Run(os.Args); err != nil {
		reportError(err)
		os.Exit(exitStatus(err))
	}
}

// exitStatus is the exit status of an error that ended the command before or outside a job:
// ExitUsage for a command line that does not parse or a flag at fault, 128 + N for a benchmark that
// signal N ended (once it cleaned up), ExitFailure for anything else.
func exitStatus(err error) int {
	if errors.As(err, new(usageError)) {
		return spmd.ExitUsage
	}
	if ie, ok := asInterrupted(err); ok {
		return ie.exitStatus()
	}
	return spmd.ExitStatus(err)
}

// exitStatusHelp lists every exit status, for --help, the README and the man page
// (TestExitStatusesAreListed).
const exitStatusHelp = "EXIT STATUS:\n" +
	"   0      success: every check passed (a result line \"OK, but ...\" says what was not covered)\n" +
	"   1      a check failed (placement divergence, a wrong byte, a failed copy, a validate row) or a run-time error\n" +
	"   2      usage: an unknown command or flag, a stray argument, an invalid --flag or CPHICACHE_* value, or ranks given different settings\n" +
	"   3      the watchdog ended the job: a collective or a drain waited longer than --watchdog-timeout\n" +
	"   4      a rank exited on purpose (--inject-exit)\n" +
	"   5      --strict: nothing failed, but not everything was checked (a result line \"OK, but ...\", a skipped validate check)\n" +
	"   128+N  ended by signal N (130: SIGINT, Ctrl-C; 143: SIGTERM, scancel)\n"

// reportError prints a fatal error that ended the command before or outside a job (a bad flag, a
// usage error) the one way every error is printed (spmd.Report): once for an error every rank
// shares, with the rank otherwise. A rank that stays silent waits, so that mpirun does not end the
// speaker before its message is out.
func reportError(err error) {
	if printError(os.Stderr, err) {
		time.Sleep(spmd.SilentGrace())
	}
}

// printError prints err as reportError does and says whether this rank must wait before it exits.
func printError(w io.Writer, err error) (wait bool) {
	if errors.As(err, new(*spmd.ReportedError)) {
		// every rank printed it and met the others after (ranks given different settings): exit now
		return false
	}
	// Ranks given different settings each print their own values: each waits too, or the first to
	// exit has mpirun end the others before they print.
	return !spmd.Report(w, err, spmd.Where{WorldRank: mpi.LauncherRank()}) ||
		errors.As(err, new(*spmd.SettingsError))
}
