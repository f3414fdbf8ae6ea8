package runner

import (
	"bytes"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/spmd"
)

// Running one simulated job of the runner's Env (envsim_test.go) and its end-of-job checks.

// envSimBound is how long a simulated job may take in all, on its simulated clock
// (envsim_bubble_test.go). Its replay takes a few milliseconds of it (the jitter's sleeps, the
// polls while every goroutine waits), and a hang ends within the watchdog's timeout
// (envHangTimeout) plus the collective grace; a job still running at its bound has a wait that
// nothing bounds, and fails as such instead of hanging the test.
const envSimBound = 10 * time.Second

// envSim is one simulated job in progress.
type envSim struct {
	job    *envSimJob
	bound  time.Duration
	fs     *simFS
	groups []*simGroup
	ranks  []*envRank // by world rank

	endedAt time.Time // when its last rank ended its replay

	// the harness's record of each group's work (envsim_env_test.go)
	models []*groupModel

	mu    sync.Mutex
	fires []envFire
	// what the models saw go wrong during the job
	modelViolations []string
	endOnce         sync.Once
}

// envFire is a watchdog that fired: the rank, its message.
type envFire struct {
	rank    int
	message string
	at      time.Time // on the job's simulated clock
}

// envSimResult is what a job did: its violations, and what it reached, for the run's tally.
type envSimResult struct {
	violations                      []string
	faultFired, endedByWatchdog     bool
	loadBacks, audits, reads, wrote int64
	readsGivenUp                    int64
	// audits probed part by part; lookups a split view answered "no such file"; write_back writes
	// that the model saw near eviction
	auditProbes, hidden, writeBacks int64
	// the wait the first watchdog that fired named ("" when none fired)
	watchdogNamed string
	// how long the job (with its warming run) took on its simulated clock
	simulated time.Duration
	// how long after a hang began its watchdog ended it (0: none did)
	hangEndedAfter time.Duration
}

// watchdogFor is a rank's watchdog: the runner's own, whose exit records its message and ends the
// job.
func (e *envSim) watchdogFor(world int) *spmd.Watchdog {
	var out bytes.Buffer // written by the watchdog's goroutine only, just before it calls exit
	return spmd.NewWatchdogTo(e.job.opts.WatchdogTimeout, world, &out, func(int) {
		e.mu.Lock()
		e.fires = append(
			e.fires,
			envFire{rank: world, message: strings.TrimSpace(out.String()), at: time.Now()},
		)
		e.mu.Unlock()
		e.end()
	})
}

// end ends the job as mpirun does once a rank exits: every collective returns errJobEnded, and what
// hung (a copy, a file) returns, as the processes' ends would end them.
func (e *envSim) end() {
	e.endOnce.Do(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, g := range e.groups {
			g.end()
		}
		e.fs.releaseHangs()
		for _, r := range e.ranks {
			r.engine.releaseHang()
		}
	})
}

func (e *envSim) build() error {
	j := e.job
	if err := e.fs.mem.MkdirAll(j.opts.L3.Dir, 0o755); j.opts.L3.Enabled() && err != nil {
		return err
	}
	g := j.opts.Geometry(j.cp)
	for group := range j.dp {
		slabsByNode := make(
			[][][]byte,
			max(1, g.Nodes),
		) // each node of the group maps a slab of its own
		for node := range slabsByNode {
			slabsByNode[node] = make([][]byte, g.SlabCount())
			for s := range slabsByNode[node] {
				slabsByNode[node][s] = make([]byte, g.SlabBytes(s))
			}
		}
		sg := newSimGroup(j.cp)
		e.groups, e.models = append(e.groups, sg), append(e.models, newGroupModel())
		for cpRank := range j.cp {
			comm := &simComm{g: sg, rank: cpRank, rng: newJitter(j.seed, group*j.cp+cpRank)}
			r, err := e.newEnvRank(group, cpRank, slabsByNode[j.place.Node[cpRank]], comm)
			if err != nil {
				return err
			}
			e.mu.Lock()
			e.ranks = append(e.ranks, r)
			e.mu.Unlock()
		}
	}
	// The filesystem's faults begin once every store is open: a start-up that cannot write its
	// directory is refused before any shared state (l3.OpenPart), which the SPMD tests cover.
	e.fs.mu.Lock()
	defer e.fs.mu.Unlock()
	e.fs.opens, e.fs.hangOpen, e.fs.failOpenPer, e.fs.failWritePer, e.fs.corruptPer = 0, 0, 0, 0, 0
	// A warm job's first run ended by releasing every hang: this run's must hang again until it
	// ends (without this, a warm job's hung open failed at once, and no read of a warm job ever
	// hung).
	e.fs.release, e.fs.releaseOnce = make(chan struct{}), sync.Once{}
	switch j.fault {
	case envFaultHungRead:
		e.fs.hangOpen = j.faultAt
	case envFaultL3Errors:
		e.fs.failOpenPer, e.fs.failWritePer, e.fs.corruptPer = 7, 9, 5
	}
	e.fs.view, e.fs.hid = j.view, 0
	if j.view.lag > 0 {
		e.fs.view.until = time.Now().Add(j.view.lag)
	}
	return nil
}

// runEnvSim runs one job to its end, or to its bound, and checks it, in the caller's bubble
// (runEnvSimBubble); a warm job first runs without its fault over the same filesystem, and that run
// is checked too.
func runEnvSim(j *envSimJob, bound time.Duration) envSimResult {
	fs := newSimFS(j.seed)
	if j.warm {
		opts := *j.opts
		opts.InjectCopyError, opts.WatchdogTimeout = config.Injection{}, envCalmTimeout
		first := *j
		first.opts, first.fault, first.warm, first.view = &opts, envFaultNone, false, splitView{}
		if res := runEnvSimOn(&first, bound, fs); len(res.violations) > 0 {
			for i, v := range res.violations {
				res.violations[i] = "the warming run: " + v
			}
			return res
		}
	}
	return runEnvSimOn(j, bound, fs)
}

// runEnvSimOn runs one job over fs.
func runEnvSimOn(j *envSimJob, bound time.Duration, fs *simFS) envSimResult {
	e := &envSim{job: j, bound: bound, fs: fs}
	defer e.tearDown()
	if err := e.build(); err != nil {
		e.end()
		return envSimResult{violations: []string{"the job could not be built: " + err.Error()}}
	}
	finished := make(chan struct{})
	var wg sync.WaitGroup
	for _, r := range e.ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.err = runEnvRank(r.rs)
		}()
	}
	go func() {
		wg.Wait()
		close(finished)
	}()
	var res envSimResult
	if !e.await(finished, &res) {
		// Its ranks still hold their runStates, which tearDown would race with: they are left as
		// they are, and the bubble's end reports them (runEnvSimBubble).
		e.ranks = nil
		return res
	}
	e.endedAt = time.Now()
	e.end() // the job is over: a read hung past its deadline returns now, as at a process's end
	e.check(&res)
	return res
}

// await waits for the job's ranks to end, or for its bound (simulated time), then ends the job and
// waits as long again; false when its ranks did not end even then.
func (e *envSim) await(finished <-chan struct{}, res *envSimResult) bool {
	select {
	case <-finished:
		return true
	case <-time.After(e.bound):
	}
	e.mu.Lock()
	fired := len(e.fires)
	e.mu.Unlock()
	res.violations = append(
		res.violations,
		fmt.Sprintf(
			"the job did not end within its bound of %v (%d watchdogs fired): a wait nothing bounds",
			e.bound,
			fired,
		),
	)
	e.end()
	select {
	case <-finished:
		return true
	case <-time.After(e.bound):
		res.violations = append(res.violations, "its ranks did not end even when the job was ended")
		return false
	}
}

// runEnvRank is a rank's replay; a panic in it is the rank's failure, with its stack, not the
// test's end.
func runEnvRank(rs *runState) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return rs.core.Run()
}

// tearDown ends each rank's workers as the runner's own tearDown does; the slab is the harness's
// memory.
func (e *envSim) tearDown() {
	for _, r := range e.ranks {
		r.rs.slab = nil
		r.rs.tearDown()
	}
}
