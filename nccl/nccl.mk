# nccl/: the NCCL binding's tests run against ncclshim, a stand-in libnccl.so.2 built from
# nccl/testdata/ncclshim.c with mpicc (NCCL over MPI on host memory; no GPU needed). Two builds: the current one
# and a legacy one posing as NCCL 2.7.8 without ncclGetLastError, which the tests expect beside it at
# legacy/libnccl.so.2. CPHICACHE_NCCL_LIB tells the tests where the shim is; with it set, a shim that does not
# load fails the tests instead of skipping them.

MPI_TEST_PKGS += nccl

MPICC            ?= mpicc
NCCL_SHIM_DIR    := $(BUILD)/ncclshim
NCCL_SHIM        := $(NCCL_SHIM_DIR)/libnccl.so.2
NCCL_SHIM_LEGACY := $(NCCL_SHIM_DIR)/legacy/libnccl.so.2
NCCL_SHIM_CFLAGS := -shared -fPIC -O2 -Wall -Wextra -Werror -fvisibility=hidden -Wl,-soname,libnccl.so.2

export CPHICACHE_NCCL_LIB := $(abspath $(NCCL_SHIM))

.PHONY: nccl-shim

nccl-shim: $(NCCL_SHIM) $(NCCL_SHIM_LEGACY)

# Both test targets load the shim, so it is built first.
test-unit-pkgs test-unit-cli test-mpi: nccl-shim

$(NCCL_SHIM): nccl/testdata/ncclshim.c nccl/testdata/ncclshim_redop.h | deps
	@mkdir -p $(@D)
	$(MPICC) $(NCCL_SHIM_CFLAGS) -o $@ $<

$(NCCL_SHIM_LEGACY): nccl/testdata/ncclshim.c nccl/testdata/ncclshim_redop.h | deps
	@mkdir -p $(@D)
	$(MPICC) -DNCCLSHIM_LEGACY $(NCCL_SHIM_CFLAGS) -o $@ $<
