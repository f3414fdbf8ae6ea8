package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/cphicache/cphicache/hicache/report"
)

// launchRun starts one `run` under the launcher (mpirun and its flags; args follow them), waits at
// most timeoutSec, keeps its output in logPath, and reads its --report at reportPath. what names
// the benchmark in errors (bench e2e, bench replay). Cancelling ctx (the benchmark's signal) ends
// the launch as its timeout does, and the error then wraps ctx's.
func launchRun(
	ctx context.Context,
	what string,
	launcher, args []string,
	timeoutSec float64,
	logPath, reportPath string,
) (*report.Report, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(timeoutSec*float64(time.Second)))
	defer cancel()
	cmd := exec.CommandContext(ctx, launcher[0], args...)
	// SIGTERM first: mpirun then ends its ranks; a SIGKILL would orphan them.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if werr := os.WriteFile(logPath, out.Bytes(), 0o644); werr != nil && err == nil {
		err = werr
	}
	if cerr := context.Cause(ctx); cerr != nil && errors.Is(cerr, context.Canceled) {
		return nil, fmt.Errorf("%s: %s ended: %w (output in %s)", what, launcher[0], cerr, logPath)
	}
	if err != nil {
		return nil, fmt.Errorf(
			"%s: %s %v: %w (output in %s)",
			what,
			launcher[0],
			args,
			err,
			logPath,
		)
	}
	return ReadReport(reportPath)
}
