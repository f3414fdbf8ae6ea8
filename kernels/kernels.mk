# kernels/: page gather/scatter copies. Included by the top-level Makefile.
#
#   make deps-cuda         install the CUDA toolkit (Debian non-free nvidia-cuda-toolkit), only when missing
#   make kernels/cuda/pagecopy.ptx   regenerate the PTX from kernels/cuda/pagecopy.cu (nvcc -arch=sm_90 -ptx)
#   make gpu               build bin/cphicache-gpu with the cuda build tag
#   make test-cuda-build   compile and vet the cuda build, build bin/cphicache-gpu and the GPU test binaries, and
#                          check the committed PTX equals a fresh nvcc run (in EXTRA_TESTS; alias test-gpu-build)
#   make gpu-check         test-cuda-build, then build/gpu-check-kit: the one folder to carry to a GPU machine, with
#                          the one script to run there (gpu-check.sh)

NVCC          ?= nvcc
NVCC_FLAGS    ?= -arch=sm_90 -ptx -O3
KERNELS_PTX   := kernels/cuda/pagecopy.ptx
KERNELS_CU    := kernels/cuda/pagecopy.cu
GPU_BIN       := bin/cphicache-gpu

.PHONY: deps-cuda gpu test-cuda-build test-gpu-build gpu-check kernels-ptx test-kernels-race

# The toolkit lives in Debian's non-free component, which a fresh machine does not enable
# on Debian 12; the edit of the sources file is itself idempotent.
deps-cuda:
	@if ! command -v $(NVCC) >/dev/null 2>&1; then \
		echo "deps-cuda: installing nvidia-cuda-toolkit"; \
		src=/etc/apt/sources.list.d/debian.sources; \
		if [ -f $$src ] && ! grep -q '^Components:.*non-free' $$src; then \
			sed -i 's/^Components: main$$/Components: main contrib non-free/' $$src; \
		fi; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get -o DPkg::Lock::Timeout=600 update -qq && apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends nvidia-cuda-toolkit >/dev/null; \
	fi

# The PTX is committed (so that `go build -tags cuda` works without nvcc) and regenerated from the .cu here;
# test-cuda-build checks the two agree.
$(KERNELS_PTX): $(KERNELS_CU) | deps-cuda
	$(NVCC) $(NVCC_FLAGS) -o $@ $<

kernels-ptx: $(KERNELS_PTX)

gpu: deps deps-cuda $(KERNELS_PTX)
	$(GO) build -tags cuda -ldflags '$(GO_LDFLAGS)' -o $(GPU_BIN) .

# Compiles everything the cuda build has (there is no GPU here to run it), so that GPU code never rots: checks
# the committed PTX is what nvcc makes of the committed .cu, vets every package with the cuda tag, builds
# bin/cphicache-gpu and the test binaries kernels/gpu-check.sh runs. In EXTRA_TESTS: about 1 minute with the
# toolkit installed, plus about 3-5 minutes on a fresh machine for deps-cuda (an 860 MB download).
# The PTX is compiled to $(BUILD) and compared, never regenerated in place, so a stale commit cannot pass.
GPU_CHECK_TESTS := $(BUILD)/kernels-cuda.test $(BUILD)/hicache-cuda.test $(BUILD)/ncclcheck-cuda.test

test-cuda-build: deps deps-cuda
	@mkdir -p $(BUILD)
	$(NVCC) $(NVCC_FLAGS) -o $(BUILD)/pagecopy.ptx $(KERNELS_CU)
	@cmp -s $(BUILD)/pagecopy.ptx $(KERNELS_PTX) || { \
		diff $(KERNELS_PTX) $(BUILD)/pagecopy.ptx | head -20; \
		echo "FAIL: $(KERNELS_PTX) is stale: run make $(KERNELS_PTX) and commit it"; exit 1; }
	$(GO) vet -tags cuda ./...
	$(GO) build -tags cuda -ldflags '$(GO_LDFLAGS)' -o $(GPU_BIN) .
	$(GO) test -c -tags cuda -o $(BUILD)/kernels-cuda.test ./kernels
	$(GO) test -c -tags cuda -o $(BUILD)/hicache-cuda.test ./hicache
	$(GO) test -c -tags cuda -o $(BUILD)/ncclcheck-cuda.test ./nccl/devicecheck
	@echo "ok   cuda build compiles and vets, $(GPU_BIN) built, PTX up to date"

test-gpu-build: test-cuda-build

EXTRA_TESTS += test-cuda-build

# gpu-check assembles $(GPU_CHECK_KIT), everything kernels/gpu-check.sh runs on a GPU machine (which needs no
# Go toolchain): the script itself, the cuda build's binary and test binaries, and hicache's test data. Carry
# the folder there and run $(GPU_CHECK_KIT)/gpu-check.sh. No library is carried: steps 1-3 link only glibc and
# the driver's libcuda (package nccl links no MPI), and the MPI steps run only where an MPI is installed, with
# that MPI. The binaries need the glibc version printed here, which the script checks on the machine with
# ldd, binary by binary, before each step.
GPU_CHECK_KIT := $(BUILD)/gpu-check-kit

gpu-check: test-cuda-build
	@rm -rf $(GPU_CHECK_KIT) && mkdir -p $(GPU_CHECK_KIT)/bin $(GPU_CHECK_KIT)/hicache
	@cp kernels/gpu-check.sh $(GPU_CHECK_KIT)/
	@cp $(GPU_BIN) $(GPU_CHECK_KIT)/bin/
	@cp $(GPU_CHECK_TESTS) $(GPU_CHECK_KIT)/
	@mkdir -p $(GPU_CHECK_KIT)/hicache/workload && cp -r hicache/workload/testdata $(GPU_CHECK_KIT)/hicache/workload/
	@glibc=$$(for f in $(GPU_CHECK_KIT)/bin/* $(GPU_CHECK_KIT)/*.test; do objdump -T $$f | grep -o 'GLIBC_[0-9.]*'; done | sort -uV | tail -1); \
	echo "gpu-check: ready: $(GPU_CHECK_KIT) ($$(du -sh $(GPU_CHECK_KIT) | cut -f1), needs $$glibc or later); on the GPU machine run $(GPU_CHECK_KIT)/gpu-check.sh (under 7 minutes)"

# The concurrency tests under the race detector, small: several callers on one engine, whose workers share
# per-call state.
test-kernels-race: deps
	timeout 600 $(GO) test -race -count=1 -run 'Concurrent|Close|RoundTrip/layer_first/part=48B' ./kernels

EXTRA_TESTS += test-kernels-race
