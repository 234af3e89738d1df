# examples/fsdp_mlp: a small MLP trained with the FSDP runtime (built by 'make', not installed). The model and both
# trainers are a convenience library that tests/test_fsdp_train links; main.c is the command line.
noinst_LTLIBRARIES += examples/fsdp_mlp/libfsdpmlp.la
examples_fsdp_mlp_libfsdpmlp_la_SOURCES = \
	examples/fsdp_mlp/model.c examples/fsdp_mlp/model.h \
	examples/fsdp_mlp/train.c examples/fsdp_mlp/reference.c examples/fsdp_mlp/train.h
examples_fsdp_mlp_libfsdpmlp_la_LIBADD = -lm

noinst_PROGRAMS += examples/fsdp_mlp/fsdp_mlp
examples_fsdp_mlp_fsdp_mlp_SOURCES = examples/fsdp_mlp/main.c
examples_fsdp_mlp_fsdp_mlp_LDADD = examples/fsdp_mlp/libfsdpmlp.la lib/libtcomms.la -lm
