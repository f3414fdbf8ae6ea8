# bench/: benchmarks beside their references (bench/PERFORMANCE.md). Included by the top-level Makefile.
#
#   make bench         the full set (a few minutes): allreduce and step at np 2 and 8, copy, reserve, l3 (in BENCH_L3_DIR),
#                      e2e at np 1 2 4 8 with the placement assert on and at the end only; text, JSON and PNG into build/bench/
#   make bench-c       build/bench/allreduce_ref: the C reference loop as a standalone mpicc program
#   make bench-allreduce-mpich   allreduce at np 2 and 8 under MPICH (bin/cphicache-mpich, mpiexec.mpich)
#   make bench-smoke   every benchmark, tiny, checking exit 0 and #wrong 0 (in `make test`; never asserts a time)
#   make bench-replay  the L3's targets (bench/PERFORMANCE.md): BENCH_REPLAY_TRACE (the repository's 200-request excerpt) at BENCH_REPLAY_NP ranks, L2 only,
#                      L2 + L3 empty and L2 + L3 filled, median of 3 each (several minutes; not part of make bench)

BENCH_DIR         := $(BUILD)/bench
BENCH_REF         := $(BENCH_DIR)/allreduce_ref
MPICC             ?= mpicc
BENCH_ALLREDUCE_NPS ?= 2 8
BENCH_STEP_NPS    ?= 2 8
BENCH_E2E_NPS     ?= 1,2,4,8
BENCH_E2E_REPEATS ?= 5
# mpirun as the Makefile runs it, for the e2e benchmark's own launches.
BENCH_MPIRUN      := $(MPIRUN) $(MPIRUN_FLAGS)

.PHONY: bench bench-c bench-smoke bench-allreduce bench-allreduce-mpich bench-step bench-copy bench-reserve bench-l3 bench-e2e bench-replay

$(BENCH_REF): bench/c/allreduce_ref.c bench/ref_allreduce.c bench/ref_allreduce.h | deps
	@mkdir -p $(BENCH_DIR)
	$(MPICC) -O2 -Wall -o $@ bench/c/allreduce_ref.c bench/ref_allreduce.c

bench-c: $(BENCH_REF)

bench: bench-allreduce bench-step bench-copy bench-reserve bench-l3 bench-e2e
	@echo "bench: results in $(BENCH_DIR)/ (*.txt, *.json, *.png)"

# The C column is measured inside the Go binary; the standalone program is run after it, under the same flags,
# to show that the C column is what a plain C program gets.
bench-allreduce: build $(BENCH_REF)
	@mkdir -p $(BENCH_DIR)
	@for n in $(BENCH_ALLREDUCE_NPS); do \
		timeout 600 $(MPIRUN) -np $$n $(MPIRUN_FLAGS) $(BIN) bench allreduce \
			--json $(BENCH_DIR)/allreduce-np$$n.json --plot $(BENCH_DIR)/allreduce-np$$n.png | tee $(BENCH_DIR)/allreduce-np$$n.txt; \
		timeout 300 $(MPIRUN) -np $$n $(MPIRUN_FLAGS) $(BENCH_REF) | tee $(BENCH_DIR)/allreduce-ref-np$$n.txt; \
	done

# The same under MPICH (mpi/mpi.mk): bin/cphicache-mpich, and the C program built with MPICH's mpicc. With more
# ranks than CPUs every side of the benchmark waits by yielding (mpi/yield.go); the standalone C program reads
# no "auto" and is told so with CPHICACHE_MPI_YIELD=1.
BENCH_MPICH_DIR := $(BENCH_DIR)/mpich
BENCH_REF_MPICH := $(BENCH_MPICH_DIR)/allreduce_ref

$(BENCH_REF_MPICH): bench/c/allreduce_ref.c bench/ref_allreduce.c bench/ref_allreduce.h | deps-mpich
	@mkdir -p $(@D)
	$(MPICC_MPICH) -O2 -Wall -o $@ bench/c/allreduce_ref.c bench/ref_allreduce.c

bench-allreduce-mpich: mpich $(BENCH_REF_MPICH)
	@for n in $(BENCH_ALLREDUCE_NPS); do \
		timeout 900 $(MPIEXEC_MPICH) -n $$n $(MPICH_BIN) bench allreduce \
			--json $(BENCH_MPICH_DIR)/allreduce-np$$n.json --plot $(BENCH_MPICH_DIR)/allreduce-np$$n.png | tee $(BENCH_MPICH_DIR)/allreduce-np$$n.txt; \
		yield=0; [ $$n -le $$(nproc) ] || yield=1; \
		CPHICACHE_MPI_YIELD=$$yield timeout 300 $(MPIEXEC_MPICH) -n $$n $(BENCH_REF_MPICH) | tee $(BENCH_MPICH_DIR)/allreduce-ref-np$$n.txt; \
	done

# One step's agreement: hicache's step consensus beside the seed design's four calls and the one fused call, in C.
bench-step: build
	@mkdir -p $(BENCH_DIR)
	@for n in $(BENCH_STEP_NPS); do \
		timeout 300 $(MPIRUN) -np $$n $(MPIRUN_FLAGS) $(BIN) bench step --json $(BENCH_DIR)/step-np$$n.json | tee $(BENCH_DIR)/step-np$$n.txt; \
	done

bench-copy: build
	@mkdir -p $(BENCH_DIR)
	timeout 600 $(BIN) bench copy --json $(BENCH_DIR)/copy.json --plot $(BENCH_DIR)/copy.png | tee $(BENCH_DIR)/copy.txt

bench-reserve: build
	@mkdir -p $(BENCH_DIR)
	timeout 600 $(BIN) bench reserve --json $(BENCH_DIR)/reserve.json | tee $(BENCH_DIR)/reserve.txt

# The L3 benchmark measures the filesystem of this directory (an existing one); it removes what it writes there.
BENCH_L3_DIR ?= $(BENCH_DIR)
bench-l3: build
	@mkdir -p $(BENCH_DIR)
	timeout 600 $(BIN) bench l3 --l3-dir $(BENCH_L3_DIR) --json $(BENCH_DIR)/l3.json | tee $(BENCH_DIR)/l3.txt

bench-e2e: build
	@mkdir -p $(BENCH_DIR)
	timeout 1200 $(BIN) bench e2e --np-list $(BENCH_E2E_NPS) --repeats $(BENCH_E2E_REPEATS) --mpirun "$(BENCH_MPIRUN)" \
		--out-dir $(BENCH_DIR)/e2e --json $(BENCH_DIR)/e2e.json | tee $(BENCH_DIR)/e2e.txt

# The replay's L3 directories are made (and removed) beside bench l3's, on the filesystem it measures.
BENCH_REPLAY_NP    ?= $(NP)
BENCH_REPLAY_TRACE ?= hicache/workload/testdata/mooncake/synthetic_first200.jsonl
BENCH_REPLAY_ARGS  ?= --cp $(BENCH_REPLAY_NP) --page-tokens 64 --token-bytes 8 --layers 1 --device-pages 4096 --l2-slots 32768
bench-replay: build
	@mkdir -p $(BENCH_DIR)
	timeout 3600 $(BIN) bench replay --np $(BENCH_REPLAY_NP) --mpirun "$(BENCH_MPIRUN)" --trace $(BENCH_REPLAY_TRACE) \
		--l3-parent $(BENCH_L3_DIR) --run-args "$(BENCH_REPLAY_ARGS)" --out-dir $(BENCH_DIR)/replay --json $(BENCH_DIR)/replay.json | tee $(BENCH_DIR)/replay.txt

# The smoke test proves every benchmark runs and validates: exit 0 and a #wrong column of zeros (the last column
# of every data row). It never looks at a time. About 20 s here.
BENCH_SMOKE := $(BUILD)/bench-smoke
bench-smoke: build $(BENCH_REF)
	@mkdir -p $(BENCH_SMOKE)
	timeout $(call LOADED,120) $(MPIRUN) -np 2 $(MPIRUN_FLAGS) $(BIN) bench allreduce --max-size 64 --iters 50 --iters-large 5 --warmup 5 --rounds 2 --gap-us 1 \
		--json $(BENCH_SMOKE)/allreduce.json --plot $(BENCH_SMOKE)/allreduce.png > $(BENCH_SMOKE)/allreduce.txt
	timeout $(call LOADED,120) $(MPIRUN) -np 2 $(MPIRUN_FLAGS) $(BIN) bench step --iters 50 --warmup 5 --rounds 3 --json $(BENCH_SMOKE)/step.json > $(BENCH_SMOKE)/step.txt
	timeout $(call LOADED,120) $(BIN) bench copy --part-sizes 4096,65536 --total-bytes 1048576 --iters 1 --rounds 2 \
		--json $(BENCH_SMOKE)/copy.json --plot $(BENCH_SMOKE)/copy.png > $(BENCH_SMOKE)/copy.txt
	timeout $(call LOADED,120) $(BIN) bench reserve --slots-log2 10,14 --pages 1,16 --min-seconds 0.01 --json $(BENCH_SMOKE)/reserve.json > $(BENCH_SMOKE)/reserve.txt
	timeout $(call LOADED,120) $(BIN) bench l3 --l3-dir $(BENCH_SMOKE) --block-bytes 4096,65536 --blocks 4 --round-bytes 0 --rounds 1 --json $(BENCH_SMOKE)/l3.json > $(BENCH_SMOKE)/l3.txt
	timeout $(call LOADED,300) $(BIN) bench e2e --np-list 1,2 --assert-every-list 8,0 --repeats 1 --mpirun "$(BENCH_MPIRUN)" \
		--out-dir $(BENCH_SMOKE)/e2e --json $(BENCH_SMOKE)/e2e.json > $(BENCH_SMOKE)/e2e.txt
	timeout $(call LOADED,60) $(MPIRUN) -np 2 $(MPIRUN_FLAGS) $(BENCH_REF) 16 50 > $(BENCH_SMOKE)/allreduce-ref.txt
	@for f in allreduce step copy reserve l3 e2e; do \
		rows=$$(grep -vc '^#' $(BENCH_SMOKE)/$$f.txt || true); \
		bad=$$(grep -v '^#' $(BENCH_SMOKE)/$$f.txt | awk '$$NF != 0' | wc -l); \
		[ "$$rows" -gt 0 ] && [ "$$bad" = 0 ] || { cat $(BENCH_SMOKE)/$$f.txt; echo "FAIL: bench $$f: $$rows rows, $$bad with #wrong != 0"; exit 1; }; \
		test -s $(BENCH_SMOKE)/$$f.json || { echo "FAIL: bench $$f wrote no JSON"; exit 1; }; \
		echo "ok   bench $$f ($$rows rows, #wrong 0)"; \
	done
	@test -s $(BENCH_SMOKE)/allreduce.png && test -s $(BENCH_SMOKE)/copy.png || { echo "FAIL: bench wrote no plot"; exit 1; }
	@sides=$$(grep -v '^#' $(BENCH_SMOKE)/step.txt | awk '$$6 > 0 && $$6 < 1e9 {print $$1}' | LC_ALL=C sort | tr '\n' ' '); \
		[ "$$sides" = "C-fused C-seed cgo-floor ours " ] || { cat $(BENCH_SMOKE)/step.txt; echo "FAIL: bench step: sides with a finite positive ratio: $$sides"; exit 1; }
	@grep -qv '^#' $(BENCH_SMOKE)/allreduce-ref.txt || { echo "FAIL: allreduce_ref printed no rows"; exit 1; }
	@echo "ok   bench smoke: plots and the standalone C reference too"

EXTRA_TESTS += bench-smoke
