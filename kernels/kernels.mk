# kernels/: page gather/scatter copies. Included by the top-level Makefile.
#
#   make deps-cuda         install the CUDA toolkit (Debian non-free nvidia-cuda-toolkit), only when missing
#   make kernels/cuda/pagecopy.ptx   regenerate the PTX from kernels/cuda/pagecopy.cu (nvcc -arch=sm_90 -ptx)
#   make gpu               build bin/cphicache-gpu with the cuda build tag
#   make test-cuda-build   compile the cuda build and check the committed PTX equals a fresh nvcc run
#   make gpu-check         build build/kernels-cuda.test for kernels/gpu-check.sh, to carry to a GPU machine

NVCC          ?= nvcc
NVCC_FLAGS    ?= -arch=sm_90 -ptx -O3
KERNELS_PTX   := kernels/cuda/pagecopy.ptx
KERNELS_CU    := kernels/cuda/pagecopy.cu
GPU_BIN       := bin/cphicache-gpu

.PHONY: deps-cuda gpu test-cuda-build gpu-check kernels-ptx test-kernels-race

# The toolkit lives in Debian's non-free component, which a fresh machine does not enable
# (../shared/ENVIRONMENT.md); the edit of the sources file is itself idempotent.
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

# Compiles everything the cuda build has (there is no GPU here to run it) and checks the committed PTX is what
# nvcc makes of the committed .cu. Not in EXTRA_TESTS: the toolkit install alone took 4.5 minutes on a fresh
# machine of this kind, over the budget for `make test`.
test-cuda-build: deps deps-cuda
	@mkdir -p $(BUILD)
	$(NVCC) $(NVCC_FLAGS) -o $(BUILD)/pagecopy.ptx $(KERNELS_CU)
	@cmp -s $(BUILD)/pagecopy.ptx $(KERNELS_PTX) || { \
		diff $(KERNELS_PTX) $(BUILD)/pagecopy.ptx | head -20; \
		echo "FAIL: $(KERNELS_PTX) is stale: run make $(KERNELS_PTX) and commit it"; exit 1; }
	$(GO) build -tags cuda ./...
	$(GO) vet -tags cuda ./kernels/
	$(GO) test -c -tags cuda -o $(BUILD)/kernels-cuda.test ./kernels
	@echo "ok   cuda build compiles, PTX up to date"

# gpu-check builds what kernels/gpu-check.sh runs on a GPU machine (which needs no Go toolchain): carry
# build/kernels-cuda.test and kernels/gpu-check.sh there and run `kernels/gpu-check.sh` from the repo root.
gpu-check: test-cuda-build
	@echo "gpu-check: ready: on the GPU machine run kernels/gpu-check.sh $(BUILD)/kernels-cuda.test (under 10 minutes)"

# The concurrency tests under the race detector, small: several callers on one engine, whose workers share
# per-call state.
test-kernels-race: deps
	timeout 600 $(GO) test -race -count=1 -run 'Concurrent|Close|RoundTrip/layer_first/part=48B' ./kernels

EXTRA_TESTS += test-kernels-race
