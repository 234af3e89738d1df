# SPDX-License-Identifier: BSD-3-Clause
# bench/: side-by-side comparisons run by hand, not built by make: compare-openmpi compiles mpi_bench.c with mpicc,
# compare-nccl compiles nccl_bench.c against CUDA and NCCL (both with bench_common.c and bench_report.c).
EXTRA_DIST += bench/README.md bench/compare-openmpi bench/compare-nccl bench/compare-nccl-report.sh \
	bench/compare.sh bench/mpi_bench.c bench/nccl_bench.c bench/torch_bench.py bench/bench_common.c \
	bench/bench_common.h bench/bench_report.c bench/inflight_mpi.c bench/inflight_ucp.c

# fsdp_bench (CUDA): the FSDP runtime's overlap benchmark, run by bench/compare-fsdp beside PyTorch FSDP2
# (bench/fsdp2_step.py). Built by 'make' when nvcc, cuBLAS and NCCL are found; -no-install gives a real binary, so
# a build tree carried to a GPU machine runs it without libtool. The C++ placeholder (never compiled) makes automake
# link with the C++ driver, which nvcc objects need.
EXTRA_DIST += bench/compare-fsdp bench/fsdp2_step.py bench/kernel-trace bench/kernel_trace.c bench/kernel_overlap.py \
	bench/torch_hostcost.py
if HAVE_CUBLAS
if BUILD_NCCL
noinst_PROGRAMS += bench/fsdp_bench
bench_fsdp_bench_SOURCES = bench/fsdp_bench.cu bench/fsdp_kernels.cuh bench/fsdp_opts.cuh bench/fsdp_timeline.cuh
nodist_EXTRA_bench_fsdp_bench_SOURCES = bench/fsdp_link.cxx
bench_fsdp_bench_LDFLAGS = -no-install
bench_fsdp_bench_LDADD = lib/libtcomms.la $(CUDA_LDFLAGS) -lcublas -lcudart
# The .cu.o rule (Makefile.am) tracks no headers: name them, or an edited header leaves a stale object.
bench/fsdp_bench.$(OBJEXT): $(srcdir)/bench/fsdp_kernels.cuh $(srcdir)/bench/fsdp_opts.cuh \
	$(srcdir)/bench/fsdp_timeline.cuh $(top_srcdir)/include/tcomms/tcomms.h $(top_srcdir)/include/tcomms/fsdp.h
endif
endif
