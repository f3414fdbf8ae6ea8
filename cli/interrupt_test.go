package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"
)

// TestInterruptedSaysWhatItCouldNotCleanUp: a signal's message claims the clean-up only when the
// cancelled work returned nothing but its cancellation; a directory it could not remove is said,
// not hidden behind "removed".
func TestInterruptedSaysWhatItCouldNotCleanUp(t *testing.T) {
	launch := fmt.Errorf("bench replay: mpirun ended: %w", context.Canceled)
	stuck := &fs.PathError{Op: "unlinkat", Path: "/l3/cphicache-bench-replay-1", Err: syscall.EBUSY}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"cancelled", launch, "received SIGTERM; the L3 directories removed"},
		{"cancelled and removed", errors.Join(launch, nil), "received SIGTERM; the L3 directories removed"},
		{"not removed", errors.Join(launch, stuck), "received SIGTERM; the benchmark stopped, but: unlinkat /l3/cphicache-bench-replay-1"},
		{"not removed, wrapped", fmt.Errorf("bench: %w", errors.Join(launch, stuck)), "but: unlinkat"},
	} {
		e := &interruptedError{
			sig:  syscall.SIGTERM,
			what: "the L3 directories removed",
			err:  tc.err,
		}
		if got := e.Error(); !strings.HasPrefix(got, tc.want) && !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
		if strings.Contains(tc.name, "not removed") && strings.Contains(e.Error(), "removed") &&
			!strings.Contains(e.Error(), "unlinkat") {
			t.Errorf("%s: claims the clean-up: %q", tc.name, e.Error())
		}
		if e.exitStatus() != 128+int(syscall.SIGTERM) {
			t.Errorf("%s: exit status %d", tc.name, e.exitStatus())
		}
	}
}
