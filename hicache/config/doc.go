// Package config owns what a job is asked to do before it starts: the options of `cphicache run`,
// `validate` and `sweep` (Options, with the L3's and the serving clock's), the fault injections and
// their parsing, the sizing that turns a model and byte capacities into the geometry once the CP
// size is known (Size), and every check of them that needs no MPI, so that a bad flag fails before
// any shared memory exists, naming the flag.
//
// Data flows one way: the command (cli) fills Options, config checks and sizes them, the runner
// (hicache/runner) runs them. config imports no MPI, NCCL, kernels, shared memory, transport or
// runner, and holds no test hook: a test's levers on a run are the runner's (runner.Testing),
// passed in beside the options.
package config
