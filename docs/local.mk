# SPDX-License-Identifier: BSD-3-Clause
# User documentation, shipped in the tarball.
EXTRA_DIST += docs/python.md docs/env.md docs/hints.md docs/backends.md docs/launching.md docs/api.md docs/perf.md docs/ucx.md \
	docs/gpu-results.md docs/fsdp.md docs/fsdp_example.md docs/img/nccl-2xh200.png docs/img/nccl-2xh200-s12.png \
	docs/img/nccl-2xh200-s13.png docs/img/ucx-ompi-2.png docs/img/ucx-ompi-4.png
