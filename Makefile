# cphicache: build, test and run.
#
#   make run    the main job: 8 ranks of the default workload under mpirun
#   make test   the whole test suite: unit tests, SPMD tests under mpirun at 1, 2, 8 and 16 ranks and the rest,
#               in stages three at a time (TEST_JOBS), longest first, each stage timed
#
# Both install what they need first (make deps), so they work on a fresh Debian 12 machine.
#
#   make install PREFIX=...   the binary (and the GPU and MPICH builds when built), the man page and bash and zsh
#                             completion under PREFIX (default /usr/local; DESTDIR for staging); make uninstall

SHELL       := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
GO          ?= go
BIN         := bin/cphicache
BUILD       := build
VERSION     := $(shell git describe --always --dirty 2>/dev/null || echo dev)
GO_LDFLAGS  := -X main.version=$(VERSION)
# -trimpath: what is built records module paths, not this checkout's directory, so a build is the same wherever
# the tree was cloned and names no path outside the repository; and the keys of Go's build cache then hold no
# directory either, so a fresh clone reuses what an earlier clone compiled on the same machine (a make test
# from a clone in a new directory otherwise compiled everything again: 18% of its CPU, perf record -a).
export GOFLAGS := -trimpath $(filter-out -trimpath,$(GOFLAGS))

# OpenMPI refuses to run as root without these, and 8 or 16 ranks on 2 cores need oversubscription with
# yielding, or busy-polling ranks starve each other.
export OMPI_ALLOW_RUN_AS_ROOT         := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1
MPIRUN       ?= mpirun
MPIRUN_FLAGS ?= --oversubscribe --mca mpi_yield_when_idle 1
NP           ?= 8
RUN_ARGS     ?=

DEB_PACKAGES := libopenmpi-dev openmpi-bin pkg-config gcc make
# Packages whose tests are SPMD: compiled once, run under mpirun at each rank count below. A folder's own
# make fragment (*/*.mk, included below) may add packages here, Debian packages to DEB_PACKAGES, and targets to
# EXTRA_TESTS, which `make test` runs after the SPMD tests.
MPI_TEST_PKGS := mpi hicache/runner hicache/validate hicache/spmd
MPI_TEST_NPS  := 1 2 8 16
EXTRA_TESTS   :=

# LOADED is a step's bound in seconds, written for a quiet machine, scaled for a node loaded far beyond its cores
# (load average 20 on two cores stretches a job four to five times; hicache's SPMD tests at np 2 ran past 300 s
# at load 45): the bounds only turn a hang into a failure. A shell expression; cli/main_test.go's loaded() agrees.
LOADED_FACTOR := 5
LOADED         = $$(( $(1) * $(LOADED_FACTOR) ))

include $(sort $(wildcard */*.mk))

# After the fragments' tests (test-install is defined below, with install).
EXTRA_TESTS += test-sim test-install

.PHONY: all deps build run test test-unit test-unit-pkgs test-unit-cli test-mpi vet fuzz clean install uninstall test-install sim sim-bugs sim-runner test-sim test-prepare

all: build

# deps installs the Debian packages the build and the tests need, only when one is missing; quiet otherwise.
# DEB_MISSING lists those of the packages given that are not installed: one dpkg-query for them all, since every
# stage of make test and every test binary's build checks deps (a dpkg-query a package took 7 s of the suite's CPU).
# dpkg-query exits 1 when a package was never installed; under pipefail that must not end the recipe unheard.
DEB_MISSING = { dpkg-query -W -f='$${Package} $${Status}\n' $(1) 2>/dev/null || true; } | awk '$$NF == "installed" { ok[$$1] = 1 } END { n = split("$(strip $(1))", want, " "); for (i = 1; i <= n; i++) if (!(want[i] in ok)) print want[i] }'

deps:
	@missing=$$($(call DEB_MISSING,$(DEB_PACKAGES))); \
	if [ -n "$$missing" ]; then \
		echo "deps: installing" $$missing; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

# test-deps-missing pins DEB_MISSING under this Makefile's shell flags (pipefail): a package never installed is
# listed, not the end of the recipe (dpkg-query exits 1 for it, and deps once ended there, silently, before it
# installed anything on a fresh machine).
test-deps-missing:
	@got=$$($(call DEB_MISSING,make cphicache-no-such-package)); \
	[ "$$got" = cphicache-no-such-package ] || { echo "FAIL: DEB_MISSING of an installed and a missing package gave '$$got'"; exit 1; }; \
	echo "ok   deps lists a package that was never installed (and not one that is)"

EXTRA_TESTS += test-deps-missing

build: deps
	$(GO) build -ldflags '$(GO_LDFLAGS)' -o $(BIN) .

run: build
	$(MPIRUN) -np $(NP) $(MPIRUN_FLAGS) $(BIN) run $(RUN_ARGS)

vet: deps
	$(GO) vet ./...

# make test runs every stage of the suite (vet, test-unit, test-mpi and EXTRA_TESTS) TEST_JOBS at a time, after
# test-prepare has installed and built what several of them share, so that no two stages install a package or
# write one file at once. Make starts the stages in TEST_STAGES's order, each as a slot frees (longest first:
# the schedule that leaves the least at the end), so the stages that mostly wait (mpirun sleeping before it
# signals failed ranks, the GPU kit's bounds, Slurm) overlap the ones that compute. Each stage's output comes
# whole as it ends (under a lock), then its wall and CPU time and when it started; a failed stage prints its log
# and FAIL. Every stage is a target of its own too; test-gpu-check-script runs test-cuda-build and gpu-check
# first, as their prerequisites. The CPU a stage's time shows is its own processes': the ranks of a Slurm job
# are slurmd's children, not the stage's.
TEST_JOBS   ?= 3
TEST_FIRST  := test-mpi test-unit-cli test-slurm test-unit-pkgs test-gpu-check-script test-mpich
TEST_STAGES := $(TEST_FIRST) $(filter-out $(TEST_FIRST) test-cuda-build gpu-check,vet $(EXTRA_TESTS))
# Both build bin/cphicache-mpich (make mpich), which one build at a time may write.
test-stage-test-slurm-mpich: | test-stage-test-mpich
# The shell's parent is this make: a number no other make running now has.
MAKE_SHELL_PID  := $(shell echo $$PPID)

# The last line says how busy the machine's CPUs were meanwhile (/proc/stat, every process's, not only the
# suite's): near 100% the suite is CPU-bound, and only less CPU shortens it, not more overlap.
test: test-prepare
	@cpu() { awk '/^cpu / { print $$2 + $$3 + $$4 + $$7 + $$8 + $$9, $$5 + $$6 }' /proc/stat; }; \
	read -r busy0 idle0 < <(cpu); start=$$(date +%s); mkdir -p $(BUILD)/stages; echo $$start > $(BUILD)/stages/.start; \
	$(MAKE) --no-print-directory -j$(TEST_JOBS) $(addprefix test-stage-,$(TEST_STAGES)); \
	read -r busy1 idle1 < <(cpu); \
	echo "ok   make test: every stage passed in $$(( $$(date +%s) - start )) s after its prepare step; the machine's CPUs $$(( 100 * (busy1 - busy0) / (busy1 - busy0 + idle1 - idle0 + 1) ))% busy meanwhile"

test-prepare: deps deps-cuda deps-mpich build nccl-shim

# (test-stage-NAME runs stage NAME, timed; a pattern rule, which make does not apply to a .PHONY target.)
test-stage-%: test-prepare
	@mkdir -p $(BUILD)/stages; log=$(BUILD)/stages/$*.log; \
	at=$$(( $$(date +%s) - $$(cat $(BUILD)/stages/.start 2>/dev/null || date +%s) )); \
	TIMEFORMAT="%R %U %S"; { time $(MAKE) --no-print-directory $* > $$log 2>&1; } 2> $$log.time && rc=0 || rc=$$?; \
	read -r wall user sys < <(tail -n 1 $$log.time); \
	flock $(BUILD)/stages/.output bash -c 'cat "$$1"; echo "== $$2: $$3: $$4 s wall from +$$5 s, $$6 s CPU ($$7 user + $$8 sys)"' _ \
		$$log $* $$([ $$rc = 0 ] && echo ok || echo FAIL) $$wall $$at $$(awk "BEGIN { print $$user + $$sys }") $$user $$sys; \
	exit $$rc

# Unit tests run as plain `go test`; the MPI packages start as singletons (one rank). Four parallel tests at a
# time, not GOMAXPROCS's two: the CLI's parallel tests (cli/) are failing mpirun jobs of the binary built here
# (CPHICACHE_BIN), mostly mpirun sleeping before it signals the ranks (cli/parallel_test.go). -timeout 30m, not go
# test's 10 minutes: the CLI package takes about 3.5 minutes here, and over 10 beside a CPU hog at load average 20.
# test-unit is the CLI's package (test-unit-cli, the longest) and every other (test-unit-pkgs).
test-unit: test-unit-pkgs test-unit-cli

test-unit-pkgs: build
	CPHICACHE_BIN=$(abspath $(BIN)) $(GO) test -count=1 -parallel 4 -timeout 30m $$($(GO) list ./... | grep -v '/cli$$')

test-unit-cli: build
	CPHICACHE_BIN=$(abspath $(BIN)) $(GO) test -count=1 -parallel 4 -timeout 30m ./cli/

# Leak checks on a shared machine: each job of the suite gets its own id (CPHICACHE_JOB_ID, which the binary and
# the SPMD tests put in their segments' names, /dev/shm/cphicache-<id>-g<group>-<random>), and a check lists only
# that job's segments, since another engineer's jobs may hold theirs meanwhile. SHM_JOB_ID sets the id from the
# job's parts (the shell's pid keeps two suites apart; letters, digits and '_' keep the name as given);
# SHM_JOB_LEAKS lists what is left of it; SHM_DECOY plants another job's segment for the recipe's duration, so
# that a check which listed every segment would fail the suite at once.
SHM_JOB_ID    = export CPHICACHE_JOB_ID=mk$$$$_$$(tr -c 'A-Za-z0-9_\n' _ <<< "$(1)")
SHM_JOB_LEAKS = ls /dev/shm | grep "^cphicache-$$CPHICACHE_JOB_ID-g" || true
SHM_DECOY     = decoy=/dev/shm/cphicache-decoy$$$$-g0-0123456789abcdef; : > $$decoy; trap 'rm -f "$$decoy"' EXIT

# SPMD tests: every rank runs every test; a rank's failure fails the job. Each runs in its package's folder,
# as `go test` would, so that testdata/ paths resolve.
test-mpi: $(foreach p,$(MPI_TEST_PKGS),$(BUILD)/$(p).test)
	@$(SHM_DECOY); \
	for p in $(MPI_TEST_PKGS); do for n in $(MPI_TEST_NPS); do \
		echo "== mpirun -np $$n $(BUILD)/$$p.test"; \
		$(call SHM_JOB_ID,$$p np$$n); \
		( cd $$p && timeout $(call LOADED,360) $(MPIRUN) -np $$n $(MPIRUN_FLAGS) $(abspath $(BUILD))/$$p.test -test.count=1 \
			-test.timeout $(call LOADED,300)s ) > $(BUILD)/$$p.np$$n.log 2>&1 \
			|| { cat $(BUILD)/$$p.np$$n.log; echo "FAIL: $$p at np $$n"; exit 1; }; \
		passed=$$(grep -c '^PASS$$' $(BUILD)/$$p.np$$n.log || true); \
		[ "$$passed" = "$$n" ] || { cat $(BUILD)/$$p.np$$n.log; echo "FAIL: $$p at np $$n: $$passed of $$n ranks passed"; exit 1; }; \
		leaked=$$($(SHM_JOB_LEAKS)); \
		[ -z "$$leaked" ] || { echo "FAIL: $$p at np $$n left shared memory behind: $$leaked"; exit 1; }; \
		echo "ok   $$p np=$$n ($$passed ranks passed, no shared memory left)"; \
	done; done

# The SPMD test binaries carry the core's deliberate bugs (-tags simbugs: off unless a test turns one on), so
# that the tests which show a check catching a bug run under mpirun too.
MPI_TEST_TAGS ?= simbugs

$(BUILD)/%.test: deps FORCE
	@mkdir -p $(dir $@)
	$(GO) test -c -tags '$(MPI_TEST_TAGS)' -o $@ ./$*

FORCE:

# The deterministic simulator (hicache/sim, `cphicache sim`). make test runs a bounded simulation from a fixed
# seed (SIM_TEST_STEPS steps, about 12 s here) and shows every deliberate bug of the core caught (sim-bugs,
# about 10 s, and the runner's unbounded_load_wait, no_read_deadline and verify_skips_last_page caught by its
# harness on simulated time, about 1 s, and a flag left out of the settings ranks compare caught by the walk of
# every flag, about 2 s; it runs no binary, and CPHICACHE_BIN spares its TestMain a build); make sim runs longer,
# from a fresh seed, for SIM_SECONDS, in SIM_MODE (all; serving for the serving clock's jobs).
SIM_SEED       ?= $(shell date +%s)
SIM_SECONDS    ?= 60
SIM_MODE       ?= all
SIM_TEST_STEPS ?= 100000

sim: build
	$(BIN) sim --seed $(SIM_SEED) --seconds $(SIM_SECONDS) --mode $(SIM_MODE)

sim-bugs: deps
	$(GO) test -count=1 -tags simbugs ./hicache/sim -run '^TestEveryDeliberateBugIsCaught$$' -v | grep -E '^(=== RUN|--- |    bugs_test|ok|FAIL|PASS)'
	$(GO) test -count=1 -tags simbugs ./hicache/runner -run '^TestRunnerHarnessCatches' -v | grep -E '^(=== RUN|--- |    envsim_bugs_test|ok|FAIL|PASS)'
	CPHICACHE_BIN=$(BIN) $(GO) test -count=1 -tags simbugs ./cli -run '^TestTheSettingsWalkCatchesAFlagLeftOut$$' -v | grep -E '^(=== RUN|--- |    settingsbugs_test|ok|FAIL|PASS)'

# sim-runner runs the runner's own Env under simulation (docs/SIMULATOR.md) for SIM_SECONDS of jobs drawn from SIM_SEED
# (wall time; each job runs on a simulated clock of its own, so the run keeps a core busy: 40 to 80 jobs a second
# here, where the real clock's sleeps ran 5). The first violation ends it, with its job's seed. SIM_BUG, deliberate
# bugs (the runner's or the core's, comma-separated), puts them in every job (a simbugs build).
SIM_BUG ?=
sim-runner: deps
	$(GO) test -count=1 $(if $(SIM_BUG),-tags simbugs) ./hicache/runner -run '^TestRunnerEnvUnderSimulation$$' -v \
		-envsim.seed $(SIM_SEED) -envsim.seconds $(SIM_SECONDS) $(if $(SIM_BUG),-envsim.bug $(SIM_BUG))

# test-sim runs sim-bugs beside the bounded simulation (one goroutine: the other core is free), its output after.
test-sim: build
	@mkdir -p $(BUILD); \
	$(MAKE) --no-print-directory sim-bugs > $(BUILD)/sim-bugs.log 2>&1 & bugs=$$!; \
	echo "$(BIN) sim --seed 20261201 --steps $(SIM_TEST_STEPS) | tail -n 3"; \
	$(BIN) sim --seed 20261201 --steps $(SIM_TEST_STEPS) | tail -n 3 || { wait $$bugs; exit 1; }; \
	wait $$bugs || { cat $(BUILD)/sim-bugs.log; echo "FAIL: sim-bugs"; exit 1; }; \
	cat $(BUILD)/sim-bugs.log

# fuzz runs each fuzz target for FUZZTIME (the suite runs their seed corpora only).
FUZZTIME ?= 30s
fuzz: deps
	$(GO) test ./hicache/workload -run '^$$' -fuzz FuzzReadTrace -fuzztime $(FUZZTIME)
	$(GO) test ./hicache/workload -run '^$$' -fuzz FuzzReadMooncakeTrace -fuzztime $(FUZZTIME)
	$(GO) test ./hicache/workload -run '^$$' -fuzz FuzzDecodeEvents -fuzztime $(FUZZTIME)
	$(GO) test ./pool -run '^$$' -fuzz FuzzAllocatorAgainstModel -fuzztime $(FUZZTIME)
	$(GO) test ./kernels -run '^$$' -fuzz FuzzCoalesce -fuzztime $(FUZZTIME)
	$(GO) test ./hicache/sim -run '^$$' -fuzz FuzzSimulatedJob -fuzztime $(FUZZTIME)
	$(GO) test ./hicache/cache -run '^$$' -fuzz FuzzEvictionQueueAgainstModel -fuzztime $(FUZZTIME)
	$(GO) test ./hicache/l3 -run '^$$' -fuzz FuzzParseHeader -fuzztime $(FUZZTIME)
	$(GO) test ./hicache/prefill -run '^$$' -fuzz FuzzRooflineAgainstPerTokenSum -fuzztime $(FUZZTIME)
	$(GO) test ./hicache/prefill -run '^$$' -fuzz FuzzParseProfile -fuzztime $(FUZZTIME)

# install: the man page and the completion scripts are generated by the binary from its own command definitions
# (cphicache man, cphicache completion) into $(INSTALL_GEN), then copied with the binaries.
PREFIX       ?= /usr/local
DESTDIR      ?=
INSTALL_GEN  := $(BUILD)/install
BIN_DIR      := $(DESTDIR)$(PREFIX)/bin
MAN1_DIR     := $(DESTDIR)$(PREFIX)/share/man/man1
BASH_CPL_DIR := $(DESTDIR)$(PREFIX)/share/bash-completion/completions
ZSH_CPL_DIR  := $(DESTDIR)$(PREFIX)/share/zsh/site-functions
# test-install renders the man page with groff and loads the zsh script in zsh.
DEB_PACKAGES += groff-base zsh
# Builds other than the default one, installed when they were built (make gpu, make mpich).
OPTIONAL_BINS := bin/cphicache-gpu bin/cphicache-mpich

install: build
	@mkdir -p $(INSTALL_GEN)
	$(BIN) man > $(INSTALL_GEN)/cphicache.1
	$(BIN) completion bash > $(INSTALL_GEN)/cphicache.bash
	$(BIN) completion zsh > $(INSTALL_GEN)/_cphicache
	install -d $(BIN_DIR) $(MAN1_DIR) $(BASH_CPL_DIR) $(ZSH_CPL_DIR)
	install -m 0755 $(BIN) $(BIN_DIR)/cphicache
	@for b in $(OPTIONAL_BINS); do if [ -x $$b ]; then echo "install -m 0755 $$b $(BIN_DIR)/"; install -m 0755 $$b $(BIN_DIR)/; fi; done
	install -m 0644 $(INSTALL_GEN)/cphicache.1 $(MAN1_DIR)/cphicache.1
	install -m 0644 $(INSTALL_GEN)/cphicache.bash $(BASH_CPL_DIR)/cphicache
	install -m 0644 $(INSTALL_GEN)/_cphicache $(ZSH_CPL_DIR)/_cphicache
	@# bash-completion loads a command's script by the command's name: the other builds' names lead to the same one.
	@for b in $(OPTIONAL_BINS); do if [ -x $$b ]; then ln -sf cphicache $(BASH_CPL_DIR)/$$(basename $$b); fi; done

uninstall:
	rm -f $(BIN_DIR)/cphicache $(foreach b,$(OPTIONAL_BINS),$(BIN_DIR)/$(notdir $(b)) $(BASH_CPL_DIR)/$(notdir $(b))) \
		$(MAN1_DIR)/cphicache.1 $(BASH_CPL_DIR)/cphicache $(ZSH_CPL_DIR)/_cphicache

# test-install installs into a temporary prefix and uses what it installed: the binary runs, the man page
# renders and names every command, bash completion offers the commands and a command's flags, the zsh script
# loads and registers its function; then uninstall must leave no file behind. About 5 s.
INSTALL_TEST_CMDS := run validate gen-trace sweep topo version bench completion

test-install: build
	@prefix=$$(mktemp -d /tmp/cphicache-install.XXXXXX); trap 'rm -rf "$$prefix"' EXIT; \
	$(MAKE) --no-print-directory -s install PREFIX=$$prefix >/dev/null; \
	grep -q '^MPI library: ' <<< "$$($$prefix/bin/cphicache version)" || { echo "FAIL: the installed binary does not run"; exit 1; }; \
	man=$$prefix/share/man/man1/cphicache.1; \
	text=$$(groff -man -Tutf8 $$man 2>&1 | sed 's/.\x08//g'); \
	grep -q '^\.TH cphicache 1' $$man || { echo "FAIL: $$man is not a section 1 man page"; exit 1; }; \
	for c in $(INSTALL_TEST_CMDS); do grep -q "^ *$$c\b" <<< "$$text" || { echo "FAIL: the man page does not list $$c"; exit 1; }; done; \
	grep -q -- 'l2-slots' <<< "$$text" || { echo "FAIL: the man page lists no flag of run"; exit 1; }; \
	complete() { PATH=$$prefix/bin:$$PATH bash -c 'source "$$1"; shift; COMP_WORDS=("$$@"); COMP_CWORD=$$(($$# - 1)); _cphicache_complete; printf "%s\n" "$${COMPREPLY[@]}"' _ \
		$$prefix/share/bash-completion/completions/cphicache "$$@"; }; \
	offered=$$(complete cphicache ""); flags=$$(complete cphicache run --l2); \
	for c in $(INSTALL_TEST_CMDS); do grep -qx $$c <<< "$$offered" || { echo "FAIL: bash completion does not offer $$c"; exit 1; }; done; \
	grep -qx -- --l2-slots <<< "$$flags" || { echo "FAIL: bash completion does not offer run's --l2-slots"; exit 1; }; \
	: "compinit -D: no dump file; with -d /dev/null its compdump moved a file over /dev/null (as root), which then \
	   failed later runs' compinit (bad math expression) and filled with every write meant for /dev/null"; \
	zsh -f -c 'autoload -U compinit && compinit -u -D && source "$$1" && [[ $${_comps[cphicache]} == _cphicache && $${_comps[cphicache-mpich]} == _cphicache ]]' _ \
		$$prefix/share/zsh/site-functions/_cphicache || { echo "FAIL: the zsh script does not load or register _cphicache"; exit 1; }; \
	$(MAKE) --no-print-directory -s uninstall PREFIX=$$prefix >/dev/null; \
	left=$$(find $$prefix \( -type f -o -type l \)); [ -z "$$left" ] || { echo "FAIL: uninstall left $$left"; exit 1; }; \
	[ -c /dev/null ] || { echo "FAIL: /dev/null is no longer a character device"; exit 1; }; \
	echo "ok   install and uninstall in a temporary prefix: binary runs, man page, bash and zsh completion"

clean:
	rm -rf bin $(BUILD)
