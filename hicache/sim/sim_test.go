package sim

import "testing"

// TestBoundedSimulationFindsNothing runs a fixed number of jobs from a fixed seed: the cache as it is must break
// no invariant in any of them.
func TestBoundedSimulationFindsNothing(t *testing.T) {
	res := Run(Options{Seed: 1, Jobs: 200})
	if res.Violation != nil {
		t.Fatal(res.Violation)
	}
	t.Logf("%d jobs, %d steps, outcomes %v, %d with an L3, %d with a fault", res.Jobs, res.Steps, res.Outcomes, res.L3Jobs, res.FaultJobs)
}
