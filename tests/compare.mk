# SPDX-License-Identifier: BSD-3-Clause
# Tests of compare-nccl's and compare-openmpi's figures, shell scripts with stand-in data: bench/compare.sh (the
# order of sides, --budget, the medians; tests/test_compare.sh) and compare-nccl's summary of issue 5's targets
# (bench/compare-nccl-report.sh; tests/test_nccl_report.sh).
TESTS += tests/test_compare.sh tests/test_nccl_report.sh
EXTRA_DIST += tests/test_compare.sh tests/test_nccl_report.sh
