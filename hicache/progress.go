package hicache

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// progress shows rank 0's progress: a bar on a terminal, a plain line every 10% in a log file (Slurm).
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
		fmt.Fprintf(os.Stderr, "\r[%s%s] %3.0f%% step %d, %d requests", strings.Repeat("#", filled), strings.Repeat(".", max(0, width-filled)), 100*frac, steps, requests)
		return
	}
	if decile := int64(frac * 10); decile > p.lastDecile {
		p.lastDecile = decile
		fmt.Fprintf(os.Stderr, "cphicache: progress %3d%%: step %d, %d requests of group 0, %.1f s\n", decile*10, steps, requests, time.Since(p.start).Seconds())
	}
}

func (p *progress) done() {
	if p.on && p.tty {
		fmt.Fprintln(os.Stderr)
	}
}
