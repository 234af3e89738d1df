# bench/: side-by-side comparisons run by hand, not built by make: compare-openmpi compiles mpi_bench.c with mpicc,
# compare-nccl compiles nccl_bench.c against CUDA and NCCL (both with bench_common.c and bench_report.c).
EXTRA_DIST += bench/README.md bench/compare-openmpi bench/compare-nccl bench/compare-nccl-report.sh \
	bench/compare.sh bench/mpi_bench.c bench/nccl_bench.c bench/torch_bench.py bench/bench_common.c \
	bench/bench_common.h bench/bench_report.c
