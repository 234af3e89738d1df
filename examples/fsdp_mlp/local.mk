# SPDX-License-Identifier: BSD-3-Clause
# examples/fsdp_mlp: a small MLP trained with the FSDP runtime (built by 'make', not installed). The model and both
# trainers are a convenience library that tests/test_fsdp_train links; cli.c is the command line, main.c the host
# program.
noinst_LTLIBRARIES += examples/fsdp_mlp/libfsdpmlp.la
examples_fsdp_mlp_libfsdpmlp_la_SOURCES = \
	examples/fsdp_mlp/model.c examples/fsdp_mlp/model.h \
	examples/fsdp_mlp/train.c examples/fsdp_mlp/reference.c examples/fsdp_mlp/train.h \
	examples/fsdp_mlp/run.h examples/fsdp_mlp/cli.c
examples_fsdp_mlp_libfsdpmlp_la_LIBADD = -lm

noinst_PROGRAMS += examples/fsdp_mlp/fsdp_mlp
examples_fsdp_mlp_fsdp_mlp_SOURCES = examples/fsdp_mlp/main.c
examples_fsdp_mlp_fsdp_mlp_LDADD = examples/fsdp_mlp/libfsdpmlp.la lib/libtcomms.la -lm

# The CUDA variant (docs/fsdp_example.md): parameters on the GPU through the runtime, cuBLAS GEMMs as compute;
# run on a GPU machine by tests/gpu/fsdp.sh. -no-install: a real binary, so a carried build runs without libtool;
# -lstdc++ for the C++ runtime that nvcc's kernel launch stubs use (the program links as C).
if BUILD_NCCL
if HAVE_CUBLAS
noinst_PROGRAMS += examples/fsdp_mlp/fsdp_mlp_cuda
examples_fsdp_mlp_fsdp_mlp_cuda_SOURCES = examples/fsdp_mlp/cuda_main.c examples/fsdp_mlp/cuda_train.c \
	examples/fsdp_mlp/cuda_reference.c examples/fsdp_mlp/cuda_train.h examples/fsdp_mlp/cuda_model.cu \
	examples/fsdp_mlp/cuda_model.h
examples_fsdp_mlp_fsdp_mlp_cuda_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
examples_fsdp_mlp_fsdp_mlp_cuda_LDFLAGS = -no-install
examples_fsdp_mlp_fsdp_mlp_cuda_LDADD = examples/fsdp_mlp/libfsdpmlp.la lib/libtcomms.la $(CUDA_LDFLAGS) \
	-lcublas -lcudart -lstdc++ -lm
# The .cu.o rule (Makefile.am) tracks no headers: name them.
examples/fsdp_mlp/cuda_model.$(OBJEXT): $(srcdir)/examples/fsdp_mlp/cuda_model.h $(srcdir)/examples/fsdp_mlp/model.h
endif
endif
# Sharded against the reference on GPUs; without a GPU or without the program it exits 77 (skipped).
TESTS += tests/gpu/fsdp.sh
EXTRA_DIST += tests/gpu/fsdp.sh
