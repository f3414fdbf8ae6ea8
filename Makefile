# cphicache: build, test and run.
#
#   make run    the main job: 8 ranks of the default workload under mpirun
#   make test   the whole test suite: unit tests, then SPMD tests under mpirun at 1, 2, 8 and 16 ranks
#
# Both install what they need first (make deps), so they work on a fresh Debian 12 machine.

SHELL       := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
GO          ?= go
BIN         := bin/cphicache
BUILD       := build
VERSION     := $(shell git describe --always --dirty 2>/dev/null || echo dev)
GO_LDFLAGS  := -X main.version=$(VERSION)

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
MPI_TEST_PKGS := mpi hicache
MPI_TEST_NPS  := 1 2 8 16
EXTRA_TESTS   :=

include $(sort $(wildcard */*.mk))

.PHONY: all deps build run test test-unit test-mpi vet fuzz clean

all: build

# deps installs the Debian packages the build and the tests need, only when one is missing; quiet otherwise.
deps:
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "deps: installing" $$missing; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

build: deps
	$(GO) build -ldflags '$(GO_LDFLAGS)' -o $(BIN) .

run: build
	$(MPIRUN) -np $(NP) $(MPIRUN_FLAGS) $(BIN) run $(RUN_ARGS)

vet: deps
	$(GO) vet ./...

test: deps vet test-unit test-mpi $(EXTRA_TESTS)

# Unit tests run as plain `go test`; the MPI packages start as singletons (one rank).
test-unit: build
	CPHICACHE_BIN=$(abspath $(BIN)) $(GO) test -count=1 ./...

# SPMD tests: every rank runs every test; a rank's failure fails the job. Each runs in its package's folder,
# as `go test` would, so that testdata/ paths resolve.
test-mpi: $(foreach p,$(MPI_TEST_PKGS),$(BUILD)/$(p).test)
	@for p in $(MPI_TEST_PKGS); do for n in $(MPI_TEST_NPS); do \
		echo "== mpirun -np $$n $(BUILD)/$$p.test"; \
		( cd $$p && timeout 300 $(MPIRUN) -np $$n $(MPIRUN_FLAGS) $(abspath $(BUILD))/$$p.test -test.count=1 ) > $(BUILD)/$$p.np$$n.log 2>&1 \
			|| { cat $(BUILD)/$$p.np$$n.log; echo "FAIL: $$p at np $$n"; exit 1; }; \
		passed=$$(grep -c '^PASS$$' $(BUILD)/$$p.np$$n.log || true); \
		[ "$$passed" = "$$n" ] || { cat $(BUILD)/$$p.np$$n.log; echo "FAIL: $$p at np $$n: $$passed of $$n ranks passed"; exit 1; }; \
		leaked=$$(ls /dev/shm | grep '^cphicache-' || true); \
		[ -z "$$leaked" ] || { echo "FAIL: $$p at np $$n left shared memory behind: $$leaked"; exit 1; }; \
		echo "ok   $$p np=$$n ($$passed ranks passed, no shared memory left)"; \
	done; done

$(BUILD)/%.test: deps FORCE
	@mkdir -p $(BUILD)
	$(GO) test -c -o $@ ./$*

FORCE:

# fuzz runs each fuzz target for FUZZTIME (the suite runs their seed corpora only).
FUZZTIME ?= 30s
fuzz: deps
	$(GO) test ./hicache -run '^$$' -fuzz FuzzReadTrace -fuzztime $(FUZZTIME)
	$(GO) test ./hicache -run '^$$' -fuzz FuzzDecodeEvents -fuzztime $(FUZZTIME)
	$(GO) test ./pool -run '^$$' -fuzz FuzzAllocatorAgainstModel -fuzztime $(FUZZTIME)
	$(GO) test ./kernels -run '^$$' -fuzz FuzzCoalesce -fuzztime $(FUZZTIME)

clean:
	rm -rf bin $(BUILD)
