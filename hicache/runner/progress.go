package runner

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/hicache/workload"
)

// progress shows rank 0's progress: a bar on a terminal, a plain line every 10% in a log file
// (Slurm).
type progress struct {
	on, tty    bool
	total      int64
	lastDecile int64
	start      time.Time
}

func newProgress(on bool, totalEvents int64) *progress {
	p := &progress{on: on, total: totalEvents, start: time.Now()}
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		p.tty = true
	}
	return p
}

func (p *progress) update(steps, requests int64) {
	if !p.on || p.total == 0 {
		return
	}
	frac := float64(requests) / float64(p.total)
	if p.tty {
		const width = 40
		filled := int(frac * width)
		fmt.Fprintf(
			os.Stderr,
			"\r[%s%s] %3.0f%% step %d, %d requests",
			strings.Repeat("#", filled),
			strings.Repeat(".", max(0, width-filled)),
			100*frac,
			steps,
			requests,
		)
		return
	}
	if decile := int64(frac * 10); decile > p.lastDecile {
		p.lastDecile = decile
		fmt.Fprintf(
			os.Stderr,
			"cphicache: progress %3d%%: step %d, %d requests of group 0, %.1f s\n",
			decile*10,
			steps,
			requests,
			time.Since(p.start).Seconds(),
		)
	}
}

func (p *progress) done() {
	if p.on && p.tty {
		fmt.Fprintln(os.Stderr)
	}
}

// copyWarningBytes is the bound on a run's copies above which world rank 0 says, before the replay,
// how much it will copy: a real model's KV at its real size (--model at default sizes) copies tens
// of GiB a rank here.
const copyWarningBytes = 1 << 30

// sayCopyBytes tells, before the replay, the most a rank copies device-to-host (every prompt token
// of world rank 0's replica backed up once) when that is over copyWarningBytes, and how to copy
// less.
func sayCopyBytes(events []workload.Event, opts *config.Options, cp int) {
	var tokens int64
	for i := range events {
		if !events[i].Flush {
			tokens += int64(events[i].Request.Tokens())
		}
	}
	perToken := opts.Capacity(cp, cp).CopiedTokenBytes / int64(cp)
	if tokens*perToken < copyWarningBytes {
		return
	}
	fmt.Fprintf(
		os.Stderr,
		"cphicache: this run copies up to %s device-to-host per rank (%d prompt tokens of its replica, each backed up at most once, x %s of KV a token per rank); "+
			"--copy-token-bytes 8 copies 8 B a token per rank per layer per payload instead, keeping every capacity in tokens and bytes\n",
		sizing.FormatBytes(tokens*perToken),
		tokens,
		sizing.FormatBytes(perToken),
	)
}
