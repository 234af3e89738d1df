# Test of bench/compare.sh (tests/test_compare.sh, a shell script): the order of sides, --budget and the medians
# behind compare-nccl's and compare-openmpi's figures, with stand-in runs.
TESTS += tests/test_compare.sh
EXTRA_DIST += tests/test_compare.sh
