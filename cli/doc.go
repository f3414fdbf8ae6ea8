// Package cli is cphicache's command-line interface, an urfave/cli/v2 application: the commands,
// their flags, the flags' validation, and one call per command into the packages that do the work.
// main.go, at the module's root, only hands Main the build's version.
//
// Every command follows one pattern (urfave/cli's): its flags write into an options struct
// (Destination); its Before turns the struct into the packages' options and checks them, naming the
// flag (*errscope.ConfigError); its Action runs on the checked options. So a bad flag fails before
// MPI starts, and on every rank alike. No command runs a collective itself: a job's collectives
// belong to hicache/spmd (start-up, failure agreement, --trace -'s broadcast of a trace read once)
// and to the packages a command calls.
//
// It may import anything of the module; nothing but main imports it (DESIGN.md, "Code map").
//
// The files, one per command and one per piece several commands share (TestFileMapNamesEveryFile
// holds this list to the folder):
//
//   - doc.go: this map.
//   - app.go: the app and its list of commands; Main; how a command ends (exit statuses, the one
//     way a fatal error is printed, withJob for the commands that run a job).
//   - flags.go: the flag groups several commands share (--cp, --dp, --log-level, the synthetic
//     workload's, --seed) and the option structs they fill.
//   - sizing.go: the sizing flags run, validate and sweep share (--model, --l2-bytes, --l2-slots,
//     --device-bytes, --copy-token-bytes, --sync-copies).
//   - usage.go: the command line's own errors (unknown commands and flags, values that do not
//     parse, stray arguments), said with the flag's name and exit status 2.
//   - environment.go: a CPHICACHE_* variable that no flag or setting reads (a misspelling) is
//     refused, exit 2.
//   - interrupt.go: a signal during a long benchmark outside a job becomes a cancelled context, and
//     exit 128 + N.
//   - profile.go: --cpu-profile, a CPU profile per rank.
//   - provenance.go: what produced a result (the build, the MPI library, the command line, every
//     flag's value, the hosts, the trace's checksum), the '#' lines that open each command's output
//     and its JSON's provenance.
//   - settings.go: the settings every rank of a job agrees on at start-up (spmd.StartJob), from the
//     command's flags.
//   - settingsbugs_on.go, settingsbugs_off.go: the deliberate bug of the settings, a flag left out of
//     the comparison, compiled only with the simbugs tag (as the core's and the runner's are).
//   - runflags.go: run's flags (runOptions), which validate and sweep share, their conversion into
//     config.Options, and replayCommand (run's and validate's command).
//   - runflagsets.go: those flags by category (trace, model, cache, checks, outputs, metrics,
//     fault injections).
//   - tracestream.go: a --trace read once (-, a FIFO), read by world rank 0 and handed over to the
//     job.
//   - serving.go: the serving clock's flags, run's and sweep's (--gpu, --prefill-profile,
//     --prefill-model, --request-rate, --time-scale, --step-tokens, ...; SERVING.md).
//   - run.go: run, the main job.
//   - tracetime.go: world rank 0's scan of run's trace timestamps: those that go back (the report's
//     trace), and the warning at start-up for a replay that would outlast its Slurm job.
//   - validate.go: validate, the validation matrix.
//   - gentrace.go: gen-trace, the synthetic workload as a trace.
//   - sweep.go: sweep, the hit rate against the L2's capacity.
//   - sweepanswer.go: sweep's own flags (the group, the L2 designs, the answer's margin and TTFT
//     target) and the answer it prints: the L2 to buy and what it buys.
//   - sweeppolicy.go: sweep's --l2-policy, the policies it compares beside the OFFLINE bound, and
//     the lines it prints of them.
//   - l3.go: l3 stat and clear, and run's L3 flags (runL3Options).
//   - sim.go: sim, the deterministic simulator.
//   - topo.go: topo, the rank map.
//   - version.go: version.
//   - bench.go: bench, and what its subcommands share (--json, --plot, the header, the table and
//     the exit).
//   - bench_allreduce.go, bench_step.go: bench allreduce and step, under mpirun.
//   - bench_copy.go, bench_reserve.go, bench_l3.go: bench copy, reserve and l3, one process.
//   - bench_e2e.go, bench_replay.go: bench e2e and replay, which launch mpirun themselves.
//   - completion.go: completion bash|zsh, the shell completion scripts.
//   - man.go: man (hidden), the man page.
package cli
