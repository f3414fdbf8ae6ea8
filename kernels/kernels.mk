# kernels/: page gather/scatter copies. Included by the top-level Makefile.
#
#   make deps-cuda         install the CUDA toolkit (Debian non-free nvidia-cuda-toolkit), only when missing
#   make kernels-ptx       regenerate kernels/cuda/pagecopy.fatbin (sm_90 SASS and PTX, embedded) and
#                          pagecopy.ptx (its PTX, readable) from kernels/cuda/pagecopy.cu
#   make gpu               build bin/cphicache-gpu with the cuda build tag
#   make test-cuda-build   compile and vet the cuda build, build bin/cphicache-gpu and the GPU test binaries, and
#                          check the committed PTX equals a fresh nvcc run (in EXTRA_TESTS; alias test-gpu-build)
#   make gpu-check         test-cuda-build, then build/gpu-check-kit: the one folder to carry to a GPU machine, with
#                          the one script to run there (gpu-check.sh); checks the kit's size and contents
#                          (test-gpu-kit) and prints the command to run there, what to carry and the timeout

NVCC          ?= nvcc
NVCC_FLAGS    ?= -arch=sm_90 -ptx -O3
# The fatbin the engine loads: sm_90 SASS (no JIT at load on an H100/H200) and compute_90 PTX (JIT on newer GPUs).
NVCC_FATBIN_FLAGS ?= -fatbin -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 -O3
KERNELS_PTX   := kernels/cuda/pagecopy.ptx
KERNELS_FATBIN := kernels/cuda/pagecopy.fatbin
KERNELS_CU    := kernels/cuda/pagecopy.cu
GPU_BIN       := bin/cphicache-gpu
# gpu-check strips the kit's GPU binary (binutils) and test-gpu-kit checks each binary is stripped (file).
DEB_PACKAGES  += binutils file

.PHONY: deps-cuda gpu test-cuda-build test-gpu-build gpu-check test-gpu-kit test-gpu-check-script kernels-ptx test-kernels-race

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

# The fatbin (embedded, kernels/fatbin.go) and the PTX (its readable form, for review) are committed, so that
# `go build -tags cuda` works without nvcc, and regenerated from the .cu here; test-cuda-build checks both agree
# with it. nvcc writes the same bytes for the same source and flags (no path or time inside).
$(KERNELS_PTX): $(KERNELS_CU) | deps-cuda
	$(NVCC) $(NVCC_FLAGS) -o $@ $<

$(KERNELS_FATBIN): $(KERNELS_CU) | deps-cuda
	$(NVCC) $(NVCC_FATBIN_FLAGS) -o $@ $<

kernels-ptx: $(KERNELS_PTX) $(KERNELS_FATBIN)

gpu: deps deps-cuda $(KERNELS_PTX) $(KERNELS_FATBIN)
	$(GO) build -tags cuda -ldflags '$(GO_LDFLAGS)' -o $(GPU_BIN) .

# Compiles everything the cuda build has (there is no GPU here to run it), so that GPU code never rots: checks
# the committed PTX is what nvcc makes of the committed .cu, vets every package with the cuda tag, builds
# bin/cphicache-gpu and the test binaries kernels/gpu-check.sh runs. In EXTRA_TESTS: about 1 minute with the
# toolkit installed, plus about 3-5 minutes on a fresh machine for deps-cuda (an 860 MB download).
# The PTX is compiled to $(BUILD) and compared, never regenerated in place, so a stale commit cannot pass.
#
# The test binaries are linked without symbol tables or DWARF (-s -w): they only travel to a GPU machine, whose
# working tree is bounded (64 MiB), and a panic's stack trace still names every function. The two that run the
# production start-up (transport, hicache) are built with the mpiself tag too (mpi/cgo_self.go): a one-process
# MPI with no library, so that they run at one rank on a GPU machine that has no MPI installed.
GPU_KIT_LDFLAGS := -s -w
GPU_CHECK_TESTS := $(BUILD)/kernels-cuda.test $(BUILD)/ncclcheck-cuda.test $(BUILD)/transport-cuda.test $(BUILD)/hicache-cuda.test

test-cuda-build: deps deps-cuda
	@mkdir -p $(BUILD)
	$(NVCC) $(NVCC_FLAGS) -o $(BUILD)/pagecopy.ptx $(KERNELS_CU)
	@cmp -s $(BUILD)/pagecopy.ptx $(KERNELS_PTX) || { \
		diff $(KERNELS_PTX) $(BUILD)/pagecopy.ptx | head -20; \
		echo "FAIL: $(KERNELS_PTX) is stale: run make $(KERNELS_PTX) and commit it"; exit 1; }
	$(NVCC) $(NVCC_FATBIN_FLAGS) -o $(BUILD)/pagecopy.fatbin $(KERNELS_CU)
	@cmp -s $(BUILD)/pagecopy.fatbin $(KERNELS_FATBIN) || { \
		echo "FAIL: $(KERNELS_FATBIN) is stale: run make $(KERNELS_FATBIN) and commit it"; exit 1; }
	$(GO) vet -tags cuda ./...
	$(GO) vet -tags cuda,mpiself ./mpi ./hicache/...
	$(GO) build -tags cuda -ldflags '$(GO_LDFLAGS)' -o $(GPU_BIN) .
	kernels/gpu-start-test.sh $(GPU_BIN)
	$(GO) build -tags cuda,mpiself -ldflags '$(GO_LDFLAGS) $(GPU_KIT_LDFLAGS)' -o $(BUILD)/cphicache-gpu-self .
	$(GO) test -c -tags cuda -ldflags '$(GPU_KIT_LDFLAGS)' -o $(BUILD)/kernels-cuda.test ./kernels
	$(GO) test -c -tags cuda -ldflags '$(GPU_KIT_LDFLAGS)' -o $(BUILD)/ncclcheck-cuda.test ./nccl/devicecheck
	$(GO) test -c -tags cuda,mpiself -ldflags '$(GPU_KIT_LDFLAGS)' -o $(BUILD)/transport-cuda.test ./hicache/transport
	$(GO) test -c -tags cuda,mpiself -ldflags '$(GPU_KIT_LDFLAGS)' -o $(BUILD)/hicache-cuda.test ./hicache/runner
	@echo "ok   cuda build compiles and vets, $(GPU_BIN) built, PTX and fatbin up to date"

test-gpu-build: test-cuda-build

EXTRA_TESTS += test-cuda-build

# gpu-check assembles $(GPU_CHECK_KIT), everything kernels/gpu-check.sh runs on a GPU machine (which needs no
# Go toolchain and no MPI): the scripts, the cuda build's test binaries, two builds of the GPU binary gzipped
# (the kit must fit 64 MiB beside the tree; the script unpacks each for its step): cphicache-gpu-self (cuda and
# mpiself: no launcher, no MPI library) for e2e-np1 and the MPI-linked one, stripped, for e2e-np2; hicache's test
# data and build-info.txt (what was built, and the newest glibc symbol version the binaries need, which the
# script compares with the machine's). No library is carried: the binaries link only glibc, and load the
# driver's libcuda (kernels/cudadriver) and NCCL at run time. It prints the one command to run there, with what
# to carry and the timeout to give, and checks the kit's size (test-gpu-kit).
GPU_CHECK_KIT      := $(BUILD)/gpu-check-kit
GPU_CHECK_SCRIPT   := kernels/gpu-check.sh
# The device machine takes a working tree (tracked and untracked files, plus what is carried) of at most 64 MiB;
# the kit must leave room for the tree to grow. GPU_CHECK_TIMEOUT_S is the timeout to give the command: the
# script's worst case (its bounds add up to at most 300 s) and 20 s to spare. A device session has 15 minutes
# (GPU_DEVICE_SESSION_S), each machine start taking 1-2 of them (GPU_DEVICE_START_S): two tries, each on a fresh
# machine, fit (2 x (120 + 320) = 880 s), which test-gpu-check-script checks.
GPU_CARRY_LIMIT_MIB := 64
GPU_KIT_BUDGET_MIB  := 48
GPU_CHECK_TIMEOUT_S := 320
GPU_DEVICE_START_S  := 120
GPU_DEVICE_SESSION_S := 900

gpu-check: test-cuda-build
	@rm -rf $(GPU_CHECK_KIT) && mkdir -p $(GPU_CHECK_KIT)/bin $(GPU_CHECK_KIT)/hicache/workload
	@cp $(GPU_CHECK_SCRIPT) $(GPU_CHECK_KIT)/gpu-check.sh
	@cp kernels/gpu-check-env.sh kernels/gpu-check-nccl.sh kernels/gpu-check-shm.sh kernels/gpu-check-late.sh $(GPU_CHECK_KIT)/
	@strip -o $(BUILD)/cphicache-gpu.stripped $(GPU_BIN) && gzip -9 -n -c $(BUILD)/cphicache-gpu.stripped > $(GPU_CHECK_KIT)/bin/cphicache-gpu.gz
	@gzip -9 -n -c $(BUILD)/cphicache-gpu-self > $(GPU_CHECK_KIT)/bin/cphicache-gpu-self.gz
	@cp $(GPU_CHECK_TESTS) $(GPU_CHECK_KIT)/
	@cp -r hicache/workload/testdata $(GPU_CHECK_KIT)/hicache/workload/
	@glibc=$$(for f in $(BUILD)/cphicache-gpu-self $(BUILD)/cphicache-gpu.stripped $(GPU_CHECK_KIT)/*.test; do objdump -T $$f | grep -o 'GLIBC_[0-9.]*'; done | sort -uV | tail -1); \
	{ echo "version: $(VERSION)"; echo "built: $$(date -u +%Y-%m-%dT%H:%M:%SZ) on $$(. /etc/os-release && echo $$PRETTY_NAME), $$($(GO) version)"; \
	  echo "needs: $$glibc"; } > $(GPU_CHECK_KIT)/build-info.txt
	@$(MAKE) --no-print-directory test-gpu-kit
	@echo "gpu-check: ready: $(GPU_CHECK_KIT) ($$(du -sm $(GPU_CHECK_KIT) | cut -f1) MiB, $$(grep -o 'GLIBC_[0-9.]*' $(GPU_CHECK_KIT)/build-info.txt) or later)"
	@echo "  on the GPU machine, from the repository root (the kit folder carried beside the tree):"
	@echo "    bash $(GPU_CHECK_KIT)/gpu-check.sh"
	@echo "  with the device tool: status() first; run(command=\"bash $(GPU_CHECK_KIT)/gpu-check.sh\", carry=[\"$(GPU_CHECK_KIT)\"], timeout_s=$(GPU_CHECK_TIMEOUT_S)); give_back() after, unless rerunning at once"
	@echo "  it writes exactly two files to \$$OUT (or $(GPU_CHECK_KIT)/results): summary.txt and gpu-check-logs.tar.gz"

# test-gpu-kit checks the assembled kit against what the device machine takes: the working tree that travels
# (tracked and untracked, not ignored, files, and a shared/ folder where the checkout has one) plus the kit
# within GPU_KIT_BUDGET_MIB of the 64 MiB limit, every
# binary stripped, and the kit holding exactly the files gpu-check assembles (a results/ folder or a stray
# binary left in it would travel too). Needs the kit (make gpu-check).
GPU_KIT_FILES := gpu-check.sh gpu-check-env.sh gpu-check-nccl.sh gpu-check-shm.sh gpu-check-late.sh build-info.txt bin/cphicache-gpu.gz \
	bin/cphicache-gpu-self.gz $(notdir $(GPU_CHECK_TESTS))

test-gpu-kit:
	@[ -d $(GPU_CHECK_KIT) ] || { echo "FAIL: $(GPU_CHECK_KIT) is missing: run make gpu-check"; exit 1; }
	@tree_b=$$( { git ls-files -z --cached --others --exclude-standard; [ ! -d shared ] || find shared -type f -print0; } \
		| xargs -0 stat -c %s 2>/dev/null | awk '{ s += $$1 } END { print s + 0 }'); \
	kit_b=$$(find $(GPU_CHECK_KIT) -type f -printf '%s\n' | awk '{ s += $$1 } END { print s + 0 }'); \
	total_mib=$$(( (tree_b + kit_b + 1048575) / 1048576 )); \
	[ $$total_mib -le $(GPU_KIT_BUDGET_MIB) ] || { echo "FAIL: tree $$((tree_b >> 20)) MiB + kit $$((kit_b >> 20)) MiB = $$total_mib MiB, over the kit's budget of $(GPU_KIT_BUDGET_MIB) MiB (the device machine takes $(GPU_CARRY_LIMIT_MIB) MiB)"; exit 1; }; \
	for f in $(GPU_KIT_FILES); do [ -f $(GPU_CHECK_KIT)/$$f ] || { echo "FAIL: the kit lacks $$f"; exit 1; }; done; \
	extra=$$(cd $(GPU_CHECK_KIT) && find . -type f ! -path './hicache/workload/testdata/*' | sed 's|^\./||' | grep -vxF -f <(printf '%s\n' $(GPU_KIT_FILES)) || true); \
	[ -z "$$extra" ] || { echo "FAIL: the kit holds files gpu-check does not put there: $$extra"; exit 1; }; \
	for f in $(BUILD)/cphicache-gpu-self $(BUILD)/cphicache-gpu.stripped $(GPU_CHECK_KIT)/*.test; do \
		file $$f | grep -q ', stripped' || { echo "FAIL: $$f is not stripped"; exit 1; }; done; \
	echo "ok   gpu-check kit: tree $$((tree_b >> 20)) MiB + kit $$((kit_b >> 20)) MiB = $$total_mib MiB (budget $(GPU_KIT_BUDGET_MIB), limit $(GPU_CARRY_LIMIT_MIB)), $$(find $(GPU_CHECK_KIT) -type f | wc -l) files as assembled, binaries stripped"

EXTRA_TESTS += gpu-check

# test-gpu-check-script runs kernels/gpu-check-test.sh: the real kit here, where it must FAIL with the nccl step
# FAIL (no GPU, no NCCL); the budget (bounds of at most 300 s, the device call's timeout, two tries in a
# session); and a fake kit of stubs for the rest (every step PASS with NCCL where the cu13 wheel puts it, the
# facts in the summary, nvidia-smi once and no pip; no PASS that proves less than it says; no NCCL fails unless
# not expected; no benchmark after failed kernels; the summary after SIGTERM, and after SIGKILL every finished
# step in it; exactly two files in $OUT), and kernels/gpu-check-fallback-test.sh's cases of the machine's faults
# and their fallbacks (hung steps, NCCL elsewhere, its init failing, /dev/shm not a tmpfs, gVisor, a refused
# registration, two GPUs, NCCL either side of 2.30, benchmark timeouts). Its cases run side by side (they mostly
# wait on the script's bounds): 15 s wall at a load average of 3.3 on two cores, 18 s beside 4 busy loops.
test-gpu-check-script: gpu-check
	GPU_CHECK_TIMEOUT_S=$(GPU_CHECK_TIMEOUT_S) GPU_DEVICE_START_S=$(GPU_DEVICE_START_S) GPU_DEVICE_SESSION_S=$(GPU_DEVICE_SESSION_S) \
		kernels/gpu-check-test.sh $(GPU_CHECK_KIT)

EXTRA_TESTS += test-gpu-check-script

# The concurrency tests under the race detector, small: several callers on one engine, whose workers share
# per-call state.
test-kernels-race: deps
	timeout $(call LOADED,600) $(GO) test -race -count=1 -run 'Concurrent|Close|RoundTrip/layer_first/part=48B' ./kernels

EXTRA_TESTS += test-kernels-race
