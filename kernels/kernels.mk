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

.PHONY: deps-cuda gpu test-cuda-build gpu-check kernels-ptx

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
