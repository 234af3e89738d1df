# SPDX-License-Identifier: BSD-3-Clause
# Under Open MPI's mpirun (tests/test_mpirun.sh, a shell script): examples/allreduce on 4 oversubscribed ranks, which
# learn their rank from OMPI_COMM_WORLD_* and their host's ranks from the rendezvous alone. Exit 77 without mpirun.
TESTS += tests/test_mpirun.sh
EXTRA_DIST += tests/test_mpirun.sh
AM_TESTS_ENVIRONMENT += TCOMMS_EXAMPLE_ALLREDUCE='$(abs_top_builddir)/examples/allreduce'; \
	export TCOMMS_EXAMPLE_ALLREDUCE;
