# mpi/: the MPICH-family build (MPICH, Cray MPICH, Intel MPI and MVAPICH share its ABI) beside the default
# OpenMPI one. Included by the top-level Makefile.
#
#   make mpich        bin/cphicache-mpich, built against MPICH (-tags mpich, cgo flags from pkg-config mpich)
#   make test-mpich   install MPICH beside OpenMPI, keeping OpenMPI what plain mpirun, mpicc and pkg-config
#                     ompi-c name; build bin/cphicache-mpich and the SPMD test binaries with -tags mpich; run those
#                     (mpi at np 1, 2 and 8, hicache at np 1 and 2) and `cphicache run` at np 1, 2 and 8 under
#                     mpiexec.mpich, with the shared-memory leak check and a tiny `bench allreduce` whose every side
#                     must give the right MIN (in EXTRA_TESTS: about a minute here, plus about 1.5 minutes to
#                     install MPICH once)
#   make test-mpich MPICH_HICACHE_NPS="1 2 8"   hicache's SPMD tests at np 8 under MPICH too (about 65 s more)
#
# With more ranks than CPUs on a node, the mpich build's collectives wait by yielding the core by themselves
# (mpi/yield.go: MPICH 4's ch4 device has no yield setting of its own), so mpiexec needs no extra flag.

MPICH_PACKAGES  := libmpich-dev mpich
MPICH_BIN       := bin/cphicache-mpich
MPICH_BUILD     := $(BUILD)/mpich
MPIEXEC_MPICH   ?= mpiexec.mpich
MPICH_TEST_PKGS := mpi hicache/runner hicache/validate
MPICH_TEST_NPS  := 1 2 8
# What differs under MPICH is the binding (mpi/: every collective, split, yield and error path), which its own
# tests and `cphicache run` cover at every rank count. hicache's SPMD tests are the layer above it, the same
# code whatever the library, and run at np 1, 2, 8 and 16 under OpenMPI; under MPICH at np 1 and 2 they show
# it driving the runner, the NCCL shim and the failure paths. At np 8 they took 65 s of the suite's two cores
# (86 s of CPU, over half of it MPICH's ch4 device polling inside MPI_Comm_split and MPI_Comm_split_type, which
# have no non-blocking twin to yield in: a split of 8 ranks on 2 cores costs about 100 ms), so np 8 is
# MPICH_HICACHE_NPS's to ask for.
MPICH_HICACHE_NPS ?= 1 2
mpich_nps = $(if $(filter hicache/runner hicache/validate,$(1)),$(MPICH_HICACHE_NPS),$(MPICH_TEST_NPS))
# The L3 tests exercise files, not the MPI: they run under OpenMPI at every rank count, and leaving them out here
# halves the MPICH suite (39 s to 19 s at np 8 on this machine).
MPICH_TEST_SKIP := ^TestL3
# `cphicache run` under MPICH shows the binary launched by mpiexec.mpich driving the whole runner: 40 of the default
# workload's 180 conversations still evict from the L2 (90 at np 8), load back (31,224 pages verified) and audit
# 167 objects, for half the CPU (np 8: 14 to 7 CPU-s); the whole workload runs under OpenMPI at every rank count.
MPICH_RUN_CONVERSATIONS := 40
MPICC_MPICH     ?= mpicc.mpich
# hicache's tests drive --collective nccl through the NCCL shim (nccl/nccl.mk), which must link the same MPI.
MPICH_NCCL_SHIM := $(MPICH_BUILD)/ncclshim/libnccl.so.2
# The alternatives both MPIs register (mpicc and friends, mpirun and mpiexec, the mpi.h and mpi.pc links).
MPI_ALTERNATIVES := mpi mpirun mpi-x86_64-linux-gnu

.PHONY: deps-mpich mpich test-mpich check-mpi-default

# deps-mpich installs MPICH only when missing. Debian gives OpenMPI the higher alternatives priority (50 to 40),
# but an alternative an administrator set by hand could move: each is put back where it pointed before.
deps-mpich: deps
	@missing=$$($(call DEB_MISSING,$(MPICH_PACKAGES))); \
	if [ -n "$$missing" ]; then \
		echo "deps-mpich: installing" $$missing; \
		before=$$(for a in $(MPI_ALTERNATIVES); do echo "$$a $$(update-alternatives --query $$a 2>/dev/null | awk '/^Value:/ {print $$2}')"; done); \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get -o DPkg::Lock::Timeout=600 update -qq && \
			apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends $$missing >/dev/null; \
		echo "$$before" | while read -r name value; do \
			now=$$(update-alternatives --query $$name 2>/dev/null | awk '/^Value:/ {print $$2}'); \
			if [ -n "$$value" ] && [ "$$now" != "$$value" ]; then \
				echo "deps-mpich: putting alternative $$name back to $$value"; update-alternatives --set $$name $$value; \
			fi; \
		done; \
	fi
	@$(MAKE) --no-print-directory check-mpi-default

# check-mpi-default fails when plain mpirun, mpicc or pkg-config ompi-c no longer name OpenMPI, which the rest of
# the suite builds and runs with.
check-mpi-default:
	@mpirun --version 2>&1 | grep -q 'Open MPI' || { echo "FAIL: mpirun is not OpenMPI's: $$(readlink -f $$(command -v mpirun))"; exit 1; }
	@mpicc -showme:version 2>&1 | grep -q 'Open MPI' || { echo "FAIL: mpicc is not OpenMPI's: $$(readlink -f $$(command -v mpicc))"; exit 1; }
	@pkg-config --exists ompi-c || { echo "FAIL: pkg-config finds no ompi-c"; exit 1; }

mpich: deps-mpich
	$(GO) build -tags mpich -ldflags '$(GO_LDFLAGS)' -o $(MPICH_BIN) .

# Test binaries of the mpich build go to their own folder: the OpenMPI ones keep their names in $(BUILD).
$(MPICH_BUILD)/%.test: deps-mpich FORCE
	@mkdir -p $(@D)
	$(GO) test -c -tags mpich -o $@ ./$*

$(MPICH_NCCL_SHIM): nccl/testdata/ncclshim.c nccl/testdata/ncclshim_redop.h | deps-mpich
	@mkdir -p $(@D)
	$(MPICC_MPICH) $(NCCL_SHIM_CFLAGS) -o $@ $<

test-mpich: export CPHICACHE_NCCL_LIB := $(abspath $(MPICH_NCCL_SHIM))
test-mpich: mpich $(MPICH_NCCL_SHIM) $(foreach p,$(MPICH_TEST_PKGS),$(MPICH_BUILD)/$(p).test)
	@$(MPICH_BIN) version > $(MPICH_BUILD)/version.txt && grep -q '^MPI library: MPICH' $(MPICH_BUILD)/version.txt \
		|| { cat $(MPICH_BUILD)/version.txt; echo "FAIL: $(MPICH_BIN) version does not name MPICH"; exit 1; }
	@$(SHM_DECOY); \
	$(foreach p,$(MPICH_TEST_PKGS),for n in $(call mpich_nps,$(p)); do p=$(p); \
		echo "== $(MPIEXEC_MPICH) -n $$n $(MPICH_BUILD)/$$p.test"; \
		$(call SHM_JOB_ID,mpich $$p np$$n); \
		( cd $$p && timeout $(call LOADED,360) $(MPIEXEC_MPICH) -n $$n $(abspath $(MPICH_BUILD))/$$p.test -test.count=1 -test.skip '$(MPICH_TEST_SKIP)' \
			-test.timeout $(call LOADED,300)s ) > $(MPICH_BUILD)/$$p.np$$n.log 2>&1 \
			|| { cat $(MPICH_BUILD)/$$p.np$$n.log; echo "FAIL: mpich $$p at np $$n"; exit 1; }; \
		passed=$$(grep -c '^PASS$$' $(MPICH_BUILD)/$$p.np$$n.log || true); \
		[ "$$passed" = "$$n" ] || { cat $(MPICH_BUILD)/$$p.np$$n.log; echo "FAIL: mpich $$p at np $$n: $$passed of $$n ranks passed"; exit 1; }; \
		leaked=$$($(SHM_JOB_LEAKS)); \
		[ -z "$$leaked" ] || { echo "FAIL: mpich $$p at np $$n left shared memory behind: $$leaked"; exit 1; }; \
		echo "ok   mpich $$p np=$$n ($$passed ranks passed, no shared memory left)"; \
	done;)
	@$(SHM_DECOY); \
	for n in $(MPICH_TEST_NPS); do \
		log=$(MPICH_BUILD)/run.np$$n.log; \
		$(call SHM_JOB_ID,mpich run np$$n); \
		timeout $(call LOADED,300) $(MPIEXEC_MPICH) -n $$n $(MPICH_BIN) run --conversations $(MPICH_RUN_CONVERSATIONS) > $$log 2>&1 || { cat $$log; echo "FAIL: mpich run at np $$n"; exit 1; }; \
		grep -qE '^  placement: (.*, 0 divergences|assert skipped)' $$log && grep -qE '^  verify: ([0-9]+) load-back pages checked of \1 loaded back, 0 mismatches; .*, 0 wrong$$' $$log \
			&& grep -q '^  result: OK' $$log \
			|| { cat $$log; echo "FAIL: mpich run at np $$n: divergences, mismatches or no OK"; exit 1; }; \
		leaked=$$($(SHM_JOB_LEAKS)); \
		[ -z "$$leaked" ] || { echo "FAIL: mpich run at np $$n left shared memory behind: $$leaked"; exit 1; }; \
		echo "ok   mpich run np=$$n (step consensus $$(grep -o 'p50 [0-9.]* us' $$log | head -1), no shared memory left)"; \
	done
	@timeout $(call LOADED,120) $(MPIEXEC_MPICH) -n 2 $(MPICH_BIN) bench allreduce --max-size 64 --iters 50 --iters-large 5 --warmup 5 --rounds 2 \
		--gap-us 1 --json $(MPICH_BUILD)/allreduce.json > $(MPICH_BUILD)/allreduce.txt \
		&& grep -q '^# wrong results: 0$$' $(MPICH_BUILD)/allreduce.txt \
		|| { cat $(MPICH_BUILD)/allreduce.txt; echo "FAIL: mpich bench allreduce: an error or a wrong MIN on some side"; exit 1; }
	@echo "ok   mpich bench allreduce (ours, cgo floor and C: #wrong 0)"
	@$(MAKE) --no-print-directory check-mpi-default
	@echo "ok   mpich build: SPMD tests$(foreach p,$(MPICH_TEST_PKGS), ($(p) at np $(call mpich_nps,$(p)))) and run at np $(MPICH_TEST_NPS), bench smoke, OpenMPI still the default"

EXTRA_TESTS += test-mpich

# test-mpiself: the one-process build (mpi/cgo_self.go, -tags mpiself) that the GPU check's transport and
# hicache test binaries use on a GPU machine without MPI: it must link no MPI library, and the spmd, shm,
# transport and hicache tests must pass at one rank without mpirun (the NCCL ones skip: ncclshim needs MPI).
# About 10 s.
MPISELF_BUILD := $(BUILD)/mpiself

.PHONY: test-mpiself

# Its segments are named by a job id of its own (the hicache tests create the only ones), and the leak check looks
# at those alone: make test runs other stages beside it, whose jobs hold segments of theirs meanwhile.
test-mpiself: export CPHICACHE_JOB_ID = mpiself$(MAKE_SHELL_PID)
test-mpiself: deps
	@mkdir -p $(MPISELF_BUILD)
	$(GO) test -c -tags mpiself -o $(MPISELF_BUILD)/hicache.test ./hicache/runner
	@! ldd $(MPISELF_BUILD)/hicache.test | grep -E 'libmpi|libopen-' || { echo "FAIL: the mpiself build links an MPI library"; exit 1; }
	env -u CPHICACHE_NCCL_LIB $(GO) test -count=1 -tags mpiself ./hicache/spmd ./hicache/shm ./hicache/transport
	@( cd hicache/runner && env -u CPHICACHE_NCCL_LIB -u OMPI_COMM_WORLD_RANK timeout $(call LOADED,360) $(abspath $(MPISELF_BUILD))/hicache.test -test.count=1 -test.timeout $(call LOADED,300)s ) > $(MPISELF_BUILD)/hicache.log 2>&1 \
		|| { tail -40 $(MPISELF_BUILD)/hicache.log; echo "FAIL: hicache tests in the mpiself build"; exit 1; }
	@leaked=$$($(SHM_JOB_LEAKS)); [ -z "$$leaked" ] || { echo "FAIL: the mpiself hicache tests left shared memory behind: $$leaked"; exit 1; }
	@echo "ok   mpiself build: no MPI library linked; spmd, shm, transport and hicache tests pass at one rank without mpirun"

EXTRA_TESTS += test-mpiself
